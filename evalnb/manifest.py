"""The MKA1 suite manifest: every field, default and limit, readable top to bottom.

``Suite.from_dict`` / ``Suite.from_file`` turn a manifest into frozen pydantic models or raise
one ``ManifestError`` that lists *every* problem with its location
(``tasks[0].grader.timeout_seconds: must be at most 600 (found 601)``). Choices where SPEC.md
leaves room:

- **Dataset forms.** ``{"file_id", "format"?}`` is an uploaded file. Otherwise a ``dataset`` is
  Hugging Face when it has ``source`` or any Hugging Face-only key (``name``, ``split``,
  ``revision``, ``max_rows``, ``dataset_kwargs``, ``data_files``); else it is a local file when
  it has ``format`` or its ``path`` ends in ``.jsonl``, ``.ndjson``, ``.csv`` or ``.json`` (any
  case); any other ``path`` is Hugging Face (a repo id such as ``org/name``, a builder such as
  ``json``, or a local dataset folder). See ``dataset_kind``; ``evalnb.data.loaders`` agrees.
- **Split.** A Hugging Face dataset without ``split`` gets ``"test"`` as a task dataset and
  ``"train"`` as a few-shot dataset, filled in at validation so the canonical form is explicit.
  ``HuggingFaceDataset.split`` built directly in Python may stay ``None``: the loader's
  ``default_split`` then applies.
- **Builder mode.** ``path`` ``"json"``/``"csv"`` needs ``data_files`` (top level or in
  ``dataset_kwargs``), whose values must be http(s) URLs with a host. Whether a host is public is
  checked when rows are loaded (``evalnb.data.urls``), not here.
- **Defaults are filled in** so equal meaning gives an equal canonical form: ``num_fewshot: N``
  becomes ``fewshot: {count: N}``; ``output_extraction`` defaults to ``{"type": "none"}``;
  ``take_first.lines`` to 1, ``label_set.case_sensitive`` to false, regex ``flags`` to ``""``
  (letters sorted, repeats dropped) and ``group`` to 1 when the pattern has a group, else 0;
  ``grader.model_access`` to ``mka1`` for ``model_backed``, else ``none``. ``grader.execution``
  stays unset when not given (for ``model_backed`` it depends on the code).
- **Metadata** values are JSON scalars (string, number, boolean, null); keys are at most 64
  characters and values at most 512 characters as written (``json.dumps`` for non-strings).
- **Few-shot** ``count`` defaults to 0; ``fewshot.count`` and ``num_fewshot`` may both be given
  only when they agree.
- **Types are strict**: ``"120"`` is not a number and ``1`` is not ``true``.
- ``from_file`` raises ``FileNotFoundError`` for a missing file; YAML is read without YAML 1.1
  surprises (``2026-05-27`` stays a string, ``no`` is not ``false``).
- ``Suite`` equality compares the manifest only, not ``base_dir``.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StringConstraints,
    Tag,
    ValidationError,
    WrapValidator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from evalnb.errors import ManifestError

if TYPE_CHECKING:
    from evalnb.prepare import Item

__all__ = [
    "SCHEMA_VERSION",
    "TASK_TYPES",
    "TaskType",
    "Suite",
    "Task",
    "FileDataset",
    "LocalDataset",
    "HuggingFaceDataset",
    "Dataset",
    "FewshotSpec",
    "PreprocessSpec",
    "OutputExtraction",
    "MetricSpec",
    "GraderSpec",
    "ManifestModel",
    "dataset_kind",
    "manifest_error",
]
# Also used by evalnb.generation (same error machinery): union_message, problem, show_value.

# --- limits and vocabularies (SPEC §2.2 and the Decisions) ----------------------------------

SCHEMA_VERSION = "2026-05-27"
MAX_TASKS = 100
MAX_FEWSHOT = 100
MAX_HF_ROWS = 1_000_000
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
MIN_TIMEOUT, MAX_TIMEOUT, DEFAULT_TIMEOUT = 1, 600, 120
MAX_MODEL_CALLS, DEFAULT_MODEL_CALLS = 500, 64
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
LOCAL_FILE_SUFFIXES = (".jsonl", ".ndjson", ".csv", ".json")  # as evalnb.data.loaders
HF_ONLY_KEYS = frozenset(
    {"source", "name", "split", "revision", "max_rows", "dataset_kwargs", "data_files"}
)
BUILDER_PATHS = frozenset({"json", "csv"})
EXTRACTION_PARAMS: dict[str, tuple[str, ...]] = {
    "none": (),
    "take_first": ("lines",),
    "regex": ("pattern", "group", "flags"),
    "regex_last": ("pattern", "group", "flags"),
    "label_set": ("labels", "case_sensitive"),
    "number": (),
}
_ID_PATTERN = r"^[A-Za-z0-9_.\-]+$"
_FLAGS_PATTERN = r"^[imsx]*$"

_MARK = "_evalnb"  # context key marking errors already in final form


# --- the base model: strict, frozen, no unknown keys, every problem at once -----------------


class ManifestModel(BaseModel):
    """Base of every manifest model.

    Its wrap validator fills contextual defaults, runs the cross-field rules even when some
    fields are invalid (so one pass reports everything), rewrites pydantic's messages into
    "rule (found value)" form with unknown-key suggestions, and folds input aliases.
    """

    # defer_build: schemas are built on first use, so `import evalnb` stays light.
    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, allow_inf_nan=False, defer_build=True
    )

    @classmethod
    def _fill_defaults(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Defaults that depend on other fields (returns a copy when it changes anything)."""
        return data

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        """Cross-field rules, checked on the raw input so they are reported with field errors."""
        return []

    @classmethod
    def _fold_aliases(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Rewrite accepted aliases to their canonical field once the input is known valid."""
        return data

    @classmethod
    def _unknown_field(cls, key: str) -> str:
        known = list(cls.model_fields)
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        if close:
            return f"unknown field; did you mean {close[0]}?"
        return f"unknown field; expected one of: {', '.join(known)}"

    @model_validator(mode="wrap")
    @classmethod
    def _validate_everything(cls, data: Any, handler: Any) -> Any:
        if not isinstance(data, dict):
            return handler(data)
        data = cls._fill_defaults(data)
        problems = cls._problems(data)
        try:
            model = handler(data)
        except ValidationError as exc:
            raise _as_validation_error(cls, _cleaned(exc, cls) + problems) from None
        if problems:
            raise _as_validation_error(cls, problems)
        folded = cls._fold_aliases(data)
        return model if folded is data else handler(folded)


# --- shared field types ----------------------------------------------------------------------

Identifier = Annotated[str, StringConstraints(pattern=_ID_PATTERN)]
NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]
Timeout = Annotated[int, Field(ge=MIN_TIMEOUT, le=MAX_TIMEOUT)]


def union_message(expected: str) -> WrapValidator:
    """Collapse a union's per-branch errors into one "must be <expected>" message."""

    def validate(value: Any, handler: Any) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise _error("type_error", f"must be {expected} (found {show_value(value)})") from None

    return WrapValidator(validate)


def _check_metadata_value(value: Any) -> Any:
    text = value if isinstance(value, str) else json.dumps(value)
    if len(text) > MAX_METADATA_VALUE:
        raise _error(
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


# --- datasets (SPEC §3) ----------------------------------------------------------------------

DatasetFormat = Literal["jsonl", "csv"]


class FileDataset(ManifestModel):
    """An uploaded file (``evalnb.data.files``); ``format`` is inferred from its name if omitted."""

    file_id: NonEmptyStr
    format: DatasetFormat | None = None

    @classmethod
    def _unknown_field(cls, key: str) -> str:
        if key == "path":
            return "unknown field; a dataset has either file_id or path, not both"
        return "unknown field; a file_id dataset takes only file_id and format"


class LocalDataset(ManifestModel):
    """A local JSONL/CSV file, relative to the manifest's folder (an evalnb extension)."""

    path: NonEmptyStr
    format: DatasetFormat | None = None

    @classmethod
    def _unknown_field(cls, key: str) -> str:
        return "unknown field; a local file dataset takes only path and format"


_DATA_FILES_WORDS = "a URL, a list of URLs or a mapping of split name to URL(s)"
DataFiles = Annotated[str | list[str] | dict[str, str | list[str]], union_message(_DATA_FILES_WORDS)]


class HuggingFaceDataset(ManifestModel):
    """A Hugging Face dataset: a repo id, a builder (``json``/``csv`` + ``data_files``) or a folder."""

    source: Literal["huggingface"] = "huggingface"
    path: NonEmptyStr
    name: str | None = None
    split: NonEmptyStr | None = None  # None: the loader's default ("test", few-shot "train")
    revision: str | None = None
    max_rows: Annotated[int, Field(ge=1, le=MAX_HF_ROWS)] | None = None
    dataset_kwargs: dict[str, Any] | None = None
    data_files: DataFiles | None = None

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        path = data.get("path")
        if not isinstance(path, str) or path not in BUILDER_PATHS:
            return []
        kwargs = data.get("dataset_kwargs")
        nested = kwargs.get("data_files") if isinstance(kwargs, dict) else None
        if data.get("data_files") is None and nested is None:
            return [
                problem(
                    ("data_files",),
                    "missing",
                    f"required when path is {path!r} (builder mode): give data_files "
                    "here or in dataset_kwargs",
                )
            ]
        problems = []
        nested_loc = ("dataset_kwargs", "data_files")
        if nested is not None and not isinstance(nested, (str, list, dict)):
            msg = f"must be {_DATA_FILES_WORDS} (found {show_value(nested)})"
            problems.append(problem(nested_loc, "type_error", msg))
        for loc, files in ((("data_files",), data.get("data_files")), (nested_loc, nested)):
            bad = _non_http_urls(files)
            if bad:
                msg = f"builder data_files must be http(s) URLs (found {show_value(bad[0])})"
                problems.append(problem(loc, "url_scheme", msg))
        return problems


Dataset = Annotated[
    Annotated[FileDataset, Tag("file")]
    | Annotated[LocalDataset, Tag("local")]
    | Annotated[HuggingFaceDataset, Tag("huggingface")],
    Discriminator(
        lambda value: dataset_kind(value),
        custom_error_type="dataset_form",
        custom_error_message=(
            'must be {"file_id": ...} (an uploaded file), {"path": "data/x.jsonl"} (a local '
            'file) or a Hugging Face dataset {"path": "org/name", ...}'
        ),
    ),
]
_DATASET_TAGS = {"file": FileDataset, "local": LocalDataset, "huggingface": HuggingFaceDataset}


def dataset_kind(value: Any) -> Literal["file", "local", "huggingface"] | None:
    """Which dataset form a manifest ``dataset`` value is (the rule in the module docstring)."""
    if isinstance(value, BaseModel):
        return next((tag for tag, model in _DATASET_TAGS.items() if isinstance(value, model)), None)
    if not isinstance(value, dict):
        return None
    if "file_id" in value:
        return "file"
    if HF_ONLY_KEYS & value.keys():
        return "huggingface"
    if "format" in value:
        return "local"
    path = value.get("path")
    if isinstance(path, str) and path.lower().endswith(LOCAL_FILE_SUFFIXES):
        return "local"
    return "huggingface" if "path" in value else None


def _with_split(dataset: Any, split: str) -> Any:
    """A Hugging Face dataset dict with its default split filled in."""
    if dataset_kind(dataset) != "huggingface" or not isinstance(dataset, dict):
        return dataset
    return dataset if dataset.get("split") is not None else {**dataset, "split": split}


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

    @classmethod
    def _fill_defaults(cls, data: dict[str, Any]) -> dict[str, Any]:
        dataset = _with_split(data.get("dataset"), "train")
        return data if dataset is data.get("dataset") else {**data, "dataset": dataset}


# --- preprocessors (SPEC §5) -----------------------------------------------------------------


def _exactly_one_code(data: dict[str, Any], what: str) -> list[InitErrorDetails]:
    given = [key for key in ("source", "file_id") if data.get(key) is not None]
    if len(given) == 1:
        return []
    found = "neither" if not given else "both"
    return [
        problem(
            (),
            "one_of",
            f"{what} needs exactly one of source (inline Python) or file_id (an uploaded .py "
            f"file); found {found}",
        )
    ]


class PreprocessSpec(ManifestModel):
    """Python that normalises rows before rendering; runs in the sandbox."""

    type: Literal["python"] = "python"
    contract: Literal["row", "batch"] = "row"
    source: NonEmptyStr | None = None
    file_id: NonEmptyStr | None = None
    timeout_seconds: Timeout = DEFAULT_TIMEOUT

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        return _exactly_one_code(data, "a preprocessor")


# --- output extraction (SPEC §6) -------------------------------------------------------------


class OutputExtraction(ManifestModel):
    """How raw model text becomes ``extracted_output``; each type takes only its own params."""

    type: Literal["none", "take_first", "regex", "regex_last", "label_set", "number"] = "none"
    lines: Annotated[int, Field(ge=1)] | None = None
    pattern: NonEmptyStr | None = None
    group: Annotated[
        Annotated[int, Field(ge=0)] | str, union_message("a group number (>= 0) or a group name")
    ] | None = None
    flags: Annotated[str, StringConstraints(pattern=_FLAGS_PATTERN)] | None = None
    labels: Annotated[list[NonEmptyStr], Field(min_length=1)] | None = None
    case_sensitive: bool | None = None

    @classmethod
    def _fill_defaults(cls, data: dict[str, Any]) -> dict[str, Any]:
        kind = data.get("type", "none")
        fill: dict[str, Any] = {}
        if kind == "take_first" and data.get("lines") is None:
            fill["lines"] = 1
        elif kind == "label_set" and data.get("case_sensitive") is None:
            fill["case_sensitive"] = False
        elif kind in ("regex", "regex_last"):
            flags = data.get("flags")
            if flags is None:
                fill["flags"] = flags = ""
            elif isinstance(flags, str) and re.fullmatch(_FLAGS_PATTERN, flags):
                fill["flags"] = flags = "".join(sorted(set(flags)))
            compiled = _try_compile(data.get("pattern"), flags)
            if data.get("group") is None and compiled is not None:
                fill["group"] = 1 if compiled.groups else 0
        return {**data, **fill} if fill else data

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        kind = data.get("type", "none")
        if not isinstance(kind, str) or kind not in EXTRACTION_PARAMS:
            return []  # the type error itself is reported by the field
        allowed = EXTRACTION_PARAMS[kind]
        takes = f"it takes {', '.join(allowed)}" if allowed else "it takes no parameters"
        problems = [
            problem((key,), "not_a_parameter", f"not a parameter of type {kind!r} ({takes})")
            for key in ("lines", "pattern", "group", "flags", "labels", "case_sensitive")
            if data.get(key) is not None and key not in allowed
        ]
        for key in ("pattern", "labels"):
            if key in allowed and data.get(key) is None:
                problems.append(problem((key,), "missing", f"required for type {kind!r}"))
        if kind in ("regex", "regex_last"):
            problems += _pattern_problems(data.get("pattern"), data.get("flags"), data.get("group"))
        return problems


def _try_compile(pattern: Any, flags: Any) -> Any:
    if not isinstance(pattern, str) or not isinstance(flags, str):
        return None
    try:
        return _compile(pattern, flags)
    except ValueError:
        return None


def _compile(pattern: str, flags: str) -> Any:
    from evalnb.extraction import compile_pattern  # lazy: pulls in the `regex` module

    return compile_pattern(pattern, flags)


def _pattern_problems(pattern: Any, flags: Any, group: Any) -> list[InitErrorDetails]:
    if not isinstance(pattern, str) or not pattern:
        return []  # a missing or non-string pattern is reported elsewhere
    if not isinstance(flags, str) or not re.fullmatch(_FLAGS_PATTERN, flags):
        flags = ""  # bad flags are reported by their field; still check the pattern
    try:
        compiled = _compile(pattern, flags)
    except ValueError as exc:
        return [problem(("pattern",), "invalid_pattern", str(exc))]
    if isinstance(group, str) and group.isascii() and group.isdigit():
        group = int(group)
    if _is_int(group) and group > compiled.groups:
        msg = f"group {group} does not exist; the pattern has {compiled.groups} group(s)"
        return [problem(("group",), "no_such_group", msg)]
    if isinstance(group, str) and group not in compiled.groupindex:
        return [problem(("group",), "no_such_group", f"the pattern has no group named {group!r}")]
    return []


# --- metrics and graders (SPEC §7, §8) -------------------------------------------------------


class MetricSpec(ManifestModel):
    """A score key the grader produces and how it is aggregated over samples."""

    id: Identifier
    aggregation: Literal["mean", "none"] = "mean"
    higher_is_better: bool = True
    description: str | None = None


class GraderSpec(ManifestModel):
    """Python that scores samples; runs in the sandbox, optionally calling models via ``ctx``."""

    type: Literal["python"] = "python"
    contract: Literal["sample", "batch", "model_backed"] = "sample"
    execution: Literal["per_sample", "aggregate"] | None = None  # None: derived, see effective_execution
    model_access: Literal["mka1", "none"] | None = None  # filled from contract at validation
    metric_id: Identifier = "score"
    source: NonEmptyStr | None = None
    file_id: NonEmptyStr | None = None
    timeout_seconds: Timeout = DEFAULT_TIMEOUT
    max_model_calls: Annotated[int, Field(ge=0, le=MAX_MODEL_CALLS)] = DEFAULT_MODEL_CALLS

    @classmethod
    def _fill_defaults(cls, data: dict[str, Any]) -> dict[str, Any]:
        contract = data.get("contract", "sample")
        if data.get("model_access") is None and contract in ("sample", "batch", "model_backed"):
            return {**data, "model_access": "mka1" if contract == "model_backed" else "none"}
        return data

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        return _exactly_one_code(data, "a grader")

    @property
    def effective_model_access(self) -> Literal["mka1", "none"]:
        """``mka1`` turns on ``ctx.responses_create`` / ``ctx.embeddings_create``."""
        if self.model_access is not None:
            return self.model_access
        return "mka1" if self.contract == "model_backed" else "none"

    @property
    def effective_execution(self) -> Literal["per_sample", "aggregate"] | None:
        """How the grader runs; None only for a ``model_backed`` ``file_id`` grader (code unseen)."""
        return self.execution_for(self.source)

    def execution_for(self, code: str | None) -> Literal["per_sample", "aggregate"] | None:
        """The execution mode given the grader's code (needed only for ``model_backed``)."""
        if self.execution is not None:
            return self.execution
        if self.contract == "sample":
            return "per_sample"
        if self.contract == "batch":
            return "aggregate"
        if code is None:
            return None
        return "per_sample" if _defines(code, "grade") else "aggregate"


def _defines(code: str, name: str) -> bool:
    """Whether Python ``code`` defines ``name`` at module level (regex fallback on syntax errors)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return re.search(rf"^(?:async\s+)?def\s+{name}\s*\(", code, re.MULTILINE) is not None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.asname or alias.name for alias in node.names]
        else:
            continue
        if name in names:
            return True
    return False


# --- task (SPEC §2.3) ------------------------------------------------------------------------


class Task(ManifestModel):
    """One evaluation task: where rows come from, how they become prompts, how they are scored."""

    id: Identifier
    name: str | None = None
    type: TaskType
    dataset: Dataset
    prompt_template: NonEmptyStr
    target_template: str | None = None
    choices: list[str] | None = None
    fewshot: FewshotSpec | None = None
    num_fewshot: Annotated[int, Field(ge=0, le=MAX_FEWSHOT)] | None = Field(
        default=None, exclude=True, repr=False, description="shorthand for fewshot.count"
    )
    preprocess: PreprocessSpec | None = None
    output_extraction: OutputExtraction = Field(default_factory=OutputExtraction)
    metrics: list[MetricSpec] = Field(default_factory=list)
    grader: GraderSpec
    metadata: Metadata = Field(default_factory=dict)

    @classmethod
    def _fill_defaults(cls, data: dict[str, Any]) -> dict[str, Any]:
        dataset = _with_split(data.get("dataset"), "test")
        return data if dataset is data.get("dataset") else {**data, "dataset": dataset}

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        problems = []
        shorthand, count = data.get("num_fewshot"), _explicit_count(data.get("fewshot"))
        if _is_int(shorthand) and _is_int(count) and shorthand != count:
            problems.append(
                problem(
                    ("num_fewshot",),
                    "conflict",
                    f"num_fewshot ({shorthand}) and fewshot.count ({count}) disagree; give one of them",
                )
            )
        metrics = data.get("metrics")
        if isinstance(metrics, list):
            ids = [_get(metric, "id") for metric in metrics]
            problems += _duplicates(ids, ("metrics",), "metric id")
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


class Suite(ManifestModel):
    """A versioned manifest: 1-100 tasks. Build it with ``from_dict`` or ``from_file``."""

    schema_version: Literal["2026-05-27"] = SCHEMA_VERSION
    tasks: list[Task] = Field(min_length=1, max_length=MAX_TASKS)
    metadata: Metadata = Field(default_factory=dict)

    _base_dir: Path | None = PrivateAttr(default=None)

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        tasks = data.get("tasks")
        if not isinstance(tasks, list):
            return []
        return _duplicates([_get(task, "id") for task in tasks], ("tasks",), "task id")

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Any, base_dir: str | Path | None = None) -> Suite:
        """Validate a manifest dict; relative local dataset paths will resolve from ``base_dir``."""
        if isinstance(data, Suite):
            base_dir = data.base_dir if base_dir is None else base_dir
            data = data.to_dict()
        if not isinstance(data, dict):
            found = "null" if data is None else type(data).__name__
            raise _whole_manifest_error(f"a manifest must be an object (found {found})", "model_type")
        try:
            suite = cls.model_validate(data)
        except ValidationError as exc:
            raise manifest_error(exc) from None
        suite._base_dir = Path(base_dir) if base_dir is not None else None
        return suite

    @classmethod
    def from_file(cls, path: str | Path) -> Suite:
        """Read a ``.json``, ``.yaml`` or ``.yml`` manifest (FileNotFoundError if it is missing)."""
        path = Path(path)
        text = path.read_text(encoding="utf-8")
        suffix = path.suffix.lower()
        if suffix == ".json":
            data = _parse_json(text, path)
        elif suffix in (".yaml", ".yml"):
            data = _parse_yaml(text, path)
        else:
            msg = f"{path}: unsupported manifest file type {suffix!r}; use .json, .yaml or .yml"
            raise _whole_manifest_error(msg, "file_type")
        return cls.from_dict(data, base_dir=path.resolve().parent)

    # -- reading -----------------------------------------------------------------------------

    @property
    def base_dir(self) -> Path | None:
        """The folder relative local dataset paths resolve from (not part of the manifest)."""
        return self._base_dir

    def to_dict(self) -> dict[str, Any]:
        """The canonical manifest: defaults filled, aliases folded; ``from_dict`` reads it back."""
        return self.model_dump(mode="json", exclude_none=True)

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

    def items(self, task_id: str, limit: int | None = None) -> list[Item]:
        """The task's rows rendered as Items (prompt, target, row), as the runner will send them."""
        from evalnb.prepare import suite_items

        return suite_items(self, task_id, limit=limit)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON Schema of the manifest (for editors and docs)."""
        return cls.model_json_schema()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Suite):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # tasks are a list


def _parse_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        raise _whole_manifest_error(msg, "json_syntax") from None


def _parse_yaml(text: str, path: Path) -> Any:
    import yaml  # lazy: only YAML manifests need it

    try:
        return yaml.load(text, Loader=_yaml_loader(yaml))  # noqa: S506  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = getattr(exc, "problem", None) or str(exc)
        raise _whole_manifest_error(f"{path}: invalid YAML{where}: {what}", "yaml_syntax") from None


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


# --- error reporting -------------------------------------------------------------------------


def manifest_error(exc: ValidationError, prefix: str = "") -> ManifestError:
    """Turn a pydantic ValidationError from a manifest model into a ManifestError."""
    errors = []
    for loc, kind, msg in (_clean_one(err, None) for err in exc.errors()):
        errors.append({"loc": _loc_text(((prefix,) if prefix else ()) + loc), "msg": msg, "type": kind})
    return ManifestError(errors)


def _whole_manifest_error(msg: str, kind: str) -> ManifestError:
    return ManifestError([{"loc": "", "msg": msg, "type": kind}])


def _error(kind: str, msg: str) -> PydanticCustomError:
    return PydanticCustomError(kind, msg, {_MARK: 1})


def problem(loc: tuple[Any, ...], kind: str, msg: str, value: Any = None) -> InitErrorDetails:
    return InitErrorDetails(type=_error(kind, msg), loc=loc, input=value)


def _as_validation_error(model: type[BaseModel], problems: list[InitErrorDetails]) -> ValidationError:
    return ValidationError.from_exception_data(model.__name__, problems)


def _cleaned(exc: ValidationError, owner: type[ManifestModel]) -> list[InitErrorDetails]:
    out = []
    for err in exc.errors():
        loc, kind, msg = _clean_one(err, owner)
        out.append(InitErrorDetails(type=_error(kind, msg), loc=loc, input=err.get("input")))
    return out


def _clean_one(err: Any, owner: type[ManifestModel] | None) -> tuple[tuple[Any, ...], str, str]:
    """One pydantic error as (location without union tags, type, readable message)."""
    loc = tuple(
        part
        for i, part in enumerate(err["loc"])
        if not (part in _DATASET_TAGS and i > 0 and err["loc"][i - 1] == "dataset")
    )
    kind, ctx = err["type"], err.get("ctx") or {}
    if _MARK in ctx:
        return loc, kind, err["msg"]
    if kind == "extra_forbidden" and owner is not None and len(loc) == 1:
        return loc, "unknown_field", owner._unknown_field(str(loc[0]))
    if kind == "extra_forbidden":
        return loc, "unknown_field", "unknown field"
    return loc, kind, _describe(err, key=bool(loc) and loc[-1] == "[key]")


_TYPE_WORDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "a list",
    "invalid_key": "a string key",
}
_BOUND_WORDS = {
    "greater_than_equal": "at least",
    "less_than_equal": "at most",
    "greater_than": "greater than",
    "less_than": "less than",
}
_PATTERN_WORDS = {
    _ID_PATTERN: "may contain only letters, digits, '_', '.' and '-'",
    _FLAGS_PATTERN: "may contain only the flag letters i, m, s and x",
}


def _describe(err: Any, *, key: bool = False) -> str:
    """The rule that failed, in words, and the value found."""
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    subject = "key " if key else ""
    if kind == "missing":
        return "required field is missing"
    if kind == "string_too_long":
        return f"{subject}must be at most {ctx['max_length']} characters (found {len(value)})"
    if kind == "string_too_short":
        if ctx.get("min_length") == 1:
            return f"{subject}must not be empty"
        return f"{subject}must be at least {ctx['min_length']} characters (found {len(value)})"
    if kind == "too_long":
        return f"must have at most {ctx['max_length']} items (found {ctx.get('actual_length')})"
    if kind == "too_short":
        return f"must have at least {ctx['min_length']} item(s) (found {ctx.get('actual_length')})"
    if kind in _TYPE_WORDS:
        rule = f"must be {_TYPE_WORDS[kind]}"
    elif kind in _BOUND_WORDS:
        rule = f"must be {_BOUND_WORDS[kind]} {next(iter(ctx.values()))}"
    elif kind == "literal_error":
        expected = str(ctx.get("expected", ""))
        rule = f"must be one of {expected}" if " or " in expected else f"must be {expected}"
    elif kind == "string_pattern_mismatch":
        pattern = ctx.get("pattern")
        rule = subject + _PATTERN_WORDS.get(pattern, f"must match {pattern}")
    elif kind == "finite_number":
        rule = "must be a finite number"
    elif kind == "value_error":
        return str(ctx.get("error", "invalid value"))
    else:
        rule = err["msg"]
    return f"{rule} (found {show_value(value)})"


def _loc_text(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        if part == "[key]":
            continue
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def show_value(value: Any, limit: int = 80) -> str:
    """A short JSON-ish rendering of a found value for messages."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- small helpers ---------------------------------------------------------------------------


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None) if isinstance(obj, BaseModel) else None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _duplicates(ids: list[Any], where: tuple[str, ...], noun: str) -> list[InitErrorDetails]:
    first: dict[str, int] = {}
    problems = []
    for i, ident in enumerate(ids):
        if not isinstance(ident, str):
            continue
        if ident in first:
            msg = f"duplicate {noun} {ident!r} (first used at {_loc_text(where + (first[ident],))})"
            problems.append(problem(where + (i, "id"), "duplicate", msg, ident))
        else:
            first[ident] = i
    return problems


def _non_http_urls(files: Any) -> list[Any]:
    """The entries of a ``data_files`` value that are not http(s) URLs with a host."""
    from urllib.parse import urlsplit

    if isinstance(files, dict):
        values = [v for value in files.values() for v in (value if isinstance(value, list) else [value])]
    elif isinstance(files, list):
        values = files
    else:
        values = [files] if files is not None else []
    bad = []
    for value in values:
        if not isinstance(value, str):
            continue  # a type error, reported by the field
        try:
            parts = urlsplit(value)
            ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
        except ValueError:
            ok = False
        if not ok:
            bad.append(value)
    return bad
