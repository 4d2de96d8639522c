"""The MKA1 suite manifest: every field, default and limit, readable top to bottom.

``Suite.from_dict`` / ``Suite.from_file`` turn a manifest into frozen pydantic models or raise
one ``ManifestError`` that lists *every* problem with its location
(``tasks[0].grader.timeout_seconds: must be at most 600 (found 601)``). This module holds the
suite, its tasks and few-shot settings; the leaf specs live beside it and are re-exported here:
datasets in ``evalnb.suite.datasets``, output extraction in ``evalnb.suite.extraction_spec``,
preprocessors, graders and metrics in ``evalnb.suite.python_spec``, and the base model and error
reporting in ``evalnb.suite._validation``. Choices where SPEC.md leaves room:

- **Dataset forms, default split, builder mode:** see ``evalnb.suite.datasets``.
- **Defaults are filled in** so equal meaning gives an equal canonical form: ``num_fewshot: N``
  becomes ``fewshot: {count: N}``; ``output_extraction`` defaults to ``{"type": "none"}``;
  ``take_first.lines`` to 1, ``label_set.case_sensitive`` to false, regex ``flags`` to ``""``
  (letters sorted, repeats dropped) and ``group`` to 1 when the pattern has a group, else 0;
  ``grader.model_access`` to ``mka1`` for ``model_backed``, else ``none``. ``grader.execution``
  stays unset when not given (for ``model_backed`` it depends on the code).
- **Metadata** values are JSON scalars (string, number, boolean, null); keys are at most 64
  characters and values at most 512 characters as written (``json.dumps`` for non-strings).
- **Task type** defaults to ``"custom"``: it is only a label (SPEC §2.4). The gateway requires it,
  so ``to_dict``/``to_yaml`` always write it and a manifest they produce loads there too.
- **Inline rows** ``dataset: {rows: [...]}`` (task or few-shot): see ``evalnb.suite.datasets``.
- **Few-shot** ``count`` defaults to 0; ``fewshot.count`` and ``num_fewshot`` may both be given
  only when they agree.
- **Types are strict**: ``"120"`` is not a number and ``1`` is not ``true``.
- ``from_file`` raises ``FileNotFoundError`` for a missing file; YAML is read without YAML 1.1
  surprises (``2026-05-27`` stays a string, ``no`` is not ``false``).
- ``Suite`` equality compares the manifest only, not ``base_dir``.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Self, get_args

from pydantic import AfterValidator, Field, PrivateAttr, StringConstraints, ValidationError, WrapValidator
from pydantic_core import InitErrorDetails

from evalnb.suite._validation import (
    Identifier,
    ManifestModel,
    NonEmptyStr,
    custom_error,
    duplicates,
    is_int,
    manifest_error,
    problem,
    raw_field,
    show_value,
    union_message,
    whole_manifest_error,
)
from evalnb.suite.datasets import (
    BUILDER_PATHS,
    DATASET_TAGS,
    HF_ONLY_KEYS,
    LOCAL_FILE_SUFFIXES,
    MAX_HF_ROWS,
    DataFiles,
    Dataset,
    DatasetFormat,
    FileDataset,
    HuggingFaceDataset,
    InlineDataset,
    LocalDataset,
    dataset_kind,
    with_split,
)
from evalnb.errors import ManifestError
from evalnb.suite.extraction_spec import EXTRACTION_PARAMS, OutputExtraction
from evalnb.suite.paths import paths_outside
from evalnb.suite.loglikelihood_spec import LoglikelihoodSpec
from evalnb.suite.task_generation import TaskGeneration
from evalnb.suite.python_spec import (
    DEFAULT_MODEL_CALLS,
    DEFAULT_TIMEOUT,
    MAX_MODEL_CALLS,
    MAX_TIMEOUT,
    MIN_TIMEOUT,
    GraderSpec,
    MetricSpec,
    PreprocessSpec,
    Timeout,
)

__all__ = [
    "SCHEMA_VERSION",
    "TASK_TYPES",
    "TaskType",
    "SuiteManifest",
    "Task",
    "FileDataset",
    "LocalDataset",
    "HuggingFaceDataset",
    "InlineDataset",
    "Dataset",
    "FewshotSpec",
    "PreprocessSpec",
    "OutputExtraction",
    "LoglikelihoodSpec",
    "MetricSpec",
    "GraderSpec",
    "ManifestModel",
    "dataset_kind",
    "manifest_error",
]
# Also importable from here, as before the split: the leaf modules' limits and vocabularies
# (MAX_HF_ROWS, MIN/MAX/DEFAULT_TIMEOUT, MAX/DEFAULT_MODEL_CALLS, EXTRACTION_PARAMS, ...) and
# the error helpers problem, show_value and union_message.

# --- limits and vocabularies (SPEC §2.2 and the Decisions) ----------------------------------

SCHEMA_VERSION = "2026-05-27"
MAX_TASKS = 100
MAX_FEWSHOT = 100
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
# A label for people and reports only: scoring is never derived from it (SPEC §2.4).
TaskType = Literal[
    "classification",
    "multiple_choice",
    "qa",
    "summarization",
    "semantic_similarity",
    "llm_judge",
    "numeric",
    "math",
    "custom",
]
TASK_TYPES: tuple[str, ...] = get_args(TaskType)
# Omitted `type` means "custom" ("anything else"): a label needs no choosing to run a task. The
# gateway's SDK requires the field, so the canonical form (to_dict, to_yaml) always carries it.
DEFAULT_TASK_TYPE = "custom"
_DATASET_UNIONS = {"dataset": frozenset(DATASET_TAGS)}


def _type_label(value: Any, handler: Any) -> Any:
    """A wrong ``type`` says it is a label, and where it is required (the gateway)."""
    try:
        return handler(value)
    except ValidationError:
        allowed = ", ".join(TASK_TYPES)
        raise custom_error("literal_error", f"must be one of {allowed} (found {show_value(value)}); a label only: "
                           f"leave it out for {DEFAULT_TASK_TYPE!r} (the gateway requires it, and evalnb "
                           "writes it out)") from None


# --- metadata --------------------------------------------------------------------------------


def _check_metadata_value(value: Any) -> Any:
    text = value if isinstance(value, str) else json.dumps(value)
    if len(text) > MAX_METADATA_VALUE:
        raise custom_error(
            "too_long",
            f"value must be at most {MAX_METADATA_VALUE} characters (found {len(text)})",
        )
    return value


MetadataKey = Annotated[str, StringConstraints(max_length=MAX_METADATA_KEY)]
MetadataValue = Annotated[
    str | int | float | bool | None,
    union_message("a string, number, boolean or null"),
    AfterValidator(_check_metadata_value),
]
Metadata = dict[MetadataKey, MetadataValue]


# --- templates and few-shot (SPEC §4) --------------------------------------------------------


class FewshotSpec(ManifestModel):
    """Examples rendered before the evaluated prompt; templates default to the task's."""

    count: Annotated[int, Field(ge=0, le=MAX_FEWSHOT)] = 0
    dataset: Dataset | None = None  # None: the task's own (preprocessed) rows
    prompt_template: NonEmptyStr | None = None
    target_template: str | None = None
    example_template: str = "{{prompt}}\n{{target}}"
    separator: str = "\n\n"
    strategy: Literal["first", "random"] = "first"
    seed: int = 0

    _tagged_unions = _DATASET_UNIONS

    @classmethod
    def _fill_defaults(cls, data: dict[str, Any]) -> dict[str, Any]:
        dataset = with_split(data.get("dataset"), "train")
        return data if dataset is data.get("dataset") else {**data, "dataset": dataset}


# --- task (SPEC §2.3) ------------------------------------------------------------------------


class Task(ManifestModel):
    """One evaluation task: where rows come from, how they become prompts, how they are scored."""

    id: Identifier
    name: str | None = None
    type: Annotated[TaskType, WrapValidator(_type_label)] = Field(
        default=DEFAULT_TASK_TYPE,
        description="a label for people and reports; scoring never depends on it. Optional in evalnb "
        f"(default {DEFAULT_TASK_TYPE!r}); the gateway requires it, and to_dict()/to_yaml() always write it",
    )
    dataset: Dataset
    prompt_template: NonEmptyStr
    target_template: str | None = None
    description: str | None = Field(
        default=None,
        description="a template put before the few-shot examples and the prompt (lm-eval's description); "
        "an evalnb extension",
    )
    choices: list[str] | None = None
    fewshot: FewshotSpec | None = None
    num_fewshot: Annotated[int, Field(ge=0, le=MAX_FEWSHOT)] | None = Field(
        default=None, exclude=True, repr=False, description="shorthand for fewshot.count"
    )
    preprocess: PreprocessSpec | None = None
    output_extraction: OutputExtraction = Field(default_factory=OutputExtraction)
    metrics: list[MetricSpec] = Field(default_factory=list)
    grader: GraderSpec
    loglikelihood: LoglikelihoodSpec | None = Field(
        default=None,
        description="score by the log-probability of each continuation over /v1/completions instead "
        "of generating; an evalnb extension (see evalnb.suite.loglikelihood_spec)",
    )
    generation: TaskGeneration | None = Field(
        default=None,
        description="the task's own generation settings (lm-eval's generation_kwargs: until, max_gen_toks, "
        "temperature...) and its `defaults` (lm-eval's: temperature 0, 256 tokens, seed 1234); the task's own "
        "win over the run's generation, which wins over the defaults; an evalnb extension",
    )
    metadata: Metadata = Field(default_factory=dict)

    _tagged_unions = _DATASET_UNIONS

    @classmethod
    def _fill_defaults(cls, data: dict[str, Any]) -> dict[str, Any]:
        dataset = with_split(data.get("dataset"), "test")
        return data if dataset is data.get("dataset") else {**data, "dataset": dataset}

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        problems = []
        shorthand, count = data.get("num_fewshot"), _explicit_count(data.get("fewshot"))
        if is_int(shorthand) and is_int(count) and shorthand != count:
            problems.append(
                problem(
                    ("num_fewshot",),
                    "conflict",
                    f"num_fewshot ({shorthand}) and fewshot.count ({count}) disagree; give one of them",
                )
            )
        metrics = data.get("metrics")
        if isinstance(metrics, list):
            ids = [raw_field(metric, "id") for metric in metrics]
            problems += duplicates(ids, ("metrics",), "metric id")
        scoring = data.get("loglikelihood")
        if (raw_field(scoring, "type") or "multiple_choice") == "multiple_choice" and scoring is not None:
            if raw_field(scoring, "continuations") is None and data.get("choices") is None:
                problems.append(problem(("loglikelihood", "continuations"), "missing",
                                        "multiple_choice needs continuations (a row path) or the task's choices"))
        return problems

    @classmethod
    def _fold_aliases(cls, data: dict[str, Any]) -> dict[str, Any]:
        if "num_fewshot" not in data:
            return data
        data = dict(data)
        shorthand, fewshot = data.pop("num_fewshot"), data.get("fewshot")
        if shorthand is None:
            return data
        if fewshot is None:
            data["fewshot"] = {"count": shorthand}
        elif isinstance(fewshot, dict) and fewshot.get("count") is None:
            data["fewshot"] = {**fewshot, "count": shorthand}
        elif isinstance(fewshot, FewshotSpec) and "count" not in fewshot.model_fields_set:
            data["fewshot"] = {**fewshot.model_dump(exclude_unset=True), "count": shorthand}
        return data

    @property
    def effective_fewshot(self) -> FewshotSpec | None:
        """The few-shot settings with templates resolved; None when no examples are prepended."""
        spec = self.fewshot
        if spec is None or spec.count == 0:
            return None
        prompt, target = spec.prompt_template, spec.target_template
        return spec.model_copy(
            update={
                "prompt_template": self.prompt_template if prompt is None else prompt,
                "target_template": self.target_template if target is None else target,
            }
        )

    @property
    def effective_metrics(self) -> list[MetricSpec]:
        """Declared metrics, else the grader's ``metric_id`` for a per-sample grader.

        A ``model_backed`` grader given by ``file_id`` without ``execution`` counts as per-sample
        here (its code is not read at manifest time); the default metric then stays empty if the
        grader turns out to be a batch one.
        """
        if self.metrics:
            return list(self.metrics)
        if self.grader.effective_execution == "aggregate":
            return []
        return [MetricSpec(id=self.grader.metric_id)]

    @property
    def extraction(self) -> OutputExtraction:
        """The output extraction (``{"type": "none"}`` when the manifest has none)."""
        return self.output_extraction


def _explicit_count(fewshot: Any) -> Any:
    if isinstance(fewshot, dict):
        return fewshot.get("count")
    if isinstance(fewshot, FewshotSpec) and "count" in fewshot.model_fields_set:
        return fewshot.count
    return None


# --- suite (SPEC §2.1) -----------------------------------------------------------------------


class SuiteManifest(ManifestModel):
    """A versioned manifest: 1-100 tasks, the schema only (``evalnb.Suite`` adds items and display).

    Build it with ``from_dict`` or ``from_file``; both return an instance of the class they are
    called on.
    """

    schema_version: Literal["2026-05-27"] = SCHEMA_VERSION
    tasks: list[Task] = Field(min_length=1, max_length=MAX_TASKS)
    metadata: Metadata = Field(default_factory=dict)

    _base_dir: Path | None = PrivateAttr(default=None)

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        tasks = data.get("tasks")
        if not isinstance(tasks, list):
            return []
        return duplicates([raw_field(task, "id") for task in tasks], ("tasks",), "task id")

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Any, base_dir: str | Path | None = None) -> Self:
        """Validate a manifest dict; relative local dataset paths will resolve from ``base_dir``."""
        if isinstance(data, SuiteManifest):
            base_dir = data.base_dir if base_dir is None else base_dir
            data = data.to_dict()
        if not isinstance(data, dict):
            found = "null" if data is None else type(data).__name__
            raise whole_manifest_error(f"a manifest must be an object (found {found})", "model_type")
        try:
            suite = cls.model_validate(data)
        except ValidationError as exc:
            raise manifest_error(exc) from None
        suite._base_dir = Path(base_dir) if base_dir is not None else None
        return suite

    @classmethod
    def from_file(cls, path: str | Path, *, allow_paths_outside: bool = False) -> Self:
        """Read a ``.json``, ``.yaml`` or ``.yml`` manifest (FileNotFoundError if it is missing).

        Local dataset and few-shot paths must stay inside the manifest's folder (see
        ``evalnb.suite.paths``); ``allow_paths_outside=True`` lifts that for a trusted manifest.
        """
        path = Path(path)
        text = path.read_text(encoding="utf-8")
        suffix = path.suffix.lower()
        if suffix == ".json":
            data = _parse_json(text, path)
        elif suffix in (".yaml", ".yml"):
            data = _parse_yaml(text, path)
        else:
            msg = f"{path}: unsupported manifest file type {suffix!r}; use .json, .yaml or .yml"
            raise whole_manifest_error(msg, "file_type")
        suite = cls.from_dict(data, base_dir=path.resolve().parent)
        if not allow_paths_outside:
            problems = paths_outside(suite.tasks, path.resolve().parent)
            if problems:
                raise ManifestError(problems)
        return suite

    # -- reading -----------------------------------------------------------------------------

    @property
    def base_dir(self) -> Path | None:
        """The folder relative local dataset paths resolve from (not part of the manifest)."""
        return self._base_dir

    def to_dict(self) -> dict[str, Any]:
        """The canonical manifest: defaults filled, aliases folded; ``from_dict`` reads it back."""
        return self.model_dump(mode="json", exclude_none=True)

    def to_yaml(self) -> str:
        """``to_dict()`` as YAML that ``from_file`` reads back to an equal suite (code as literal blocks)."""
        return yaml_text(self.to_dict())

    @property
    def version(self) -> str:
        """SHA-256 hex of the canonical JSON: key order and aliases do not change it.

        Canonical JSON is ``to_dict()`` with sorted keys, compact separators and ASCII escapes
        (so any string, even a lone surrogate, hashes).
        """
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("ascii")).hexdigest()

    def task(self, task_id: str) -> Task:
        """The task with this id (KeyError listing the ids there are)."""
        for task in self.tasks:
            if task.id == task_id:
                return task
        ids = ", ".join(task.id for task in self.tasks)
        raise KeyError(f"no task {task_id!r} in this suite; its tasks are: {ids}")

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON Schema of the manifest (for editors and docs)."""
        return cls.model_json_schema()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SuiteManifest):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # tasks are a list


def _parse_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        raise whole_manifest_error(msg, "json_syntax") from None


def _parse_yaml(text: str, path: Path) -> Any:
    import yaml  # lazy: only YAML manifests need it

    try:
        return yaml.load(text, Loader=_yaml_loader(yaml))  # noqa: S506  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = getattr(exc, "problem", None) or str(exc)
        raise whole_manifest_error(f"{path}: invalid YAML{where}: {what}", "yaml_syntax") from None


def yaml_text(data: Any) -> str:
    """YAML that evalnb reads back unchanged; multi-line strings (code) as literal blocks."""
    import yaml  # lazy: only YAML output needs it

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: Any, value: str) -> Any:
        style = "|" if "\n" in value else None  # PyYAML falls back where a block cannot hold it
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=100)


def _yaml_loader(yaml: Any) -> type:
    """A SafeLoader without YAML 1.1 dates and yes/no booleans (JSON-like scalars)."""

    class Loader(yaml.SafeLoader):
        pass

    dropped = {"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:bool"}
    Loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in dropped]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
    )
    return Loader


