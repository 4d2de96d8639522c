"""Graders: run a task's Python grader in the sandbox and turn what it returns into scores.

Three contracts (``sample``, ``batch``, ``model_backed``) reduce to two ways of calling:
``per_sample`` runs ``grade(sample, item[, ctx])`` once per sample (batched many to a frame),
``aggregate`` runs ``grade_batch(samples[, ctx])`` once per task and model. What a grader
returns is validated here, in the parent, by :func:`normalize_grade` and
:func:`normalize_batch`; statistics over the scores live in ``evalnb.results.stats``.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from ..errors import SandboxError
from evalnb._gc import gc_paused
from evalnb.aio import run_sync
from ..sandbox.bridging import Bridge
from ..sandbox.job import CodeLoadError, Job, spec_value, user_code_from_spec
from ..sandbox.pool import SandboxPool

SAMPLE_KEYS = (
    "task_id", "model", "sample_index", "prompt", "target", "output_text",
    "extracted_output", "dataset_row", "response_id", "usage", "epoch",
)  # fmt: skip
"""The keys of the ``sample`` a grader receives (Decisions: "sample holds ...")."""

CONTRACTS = ("sample", "batch", "model_backed")
EXECUTIONS = ("per_sample", "aggregate")
MODEL_ACCESS = ("none", "mka1")
SIGNATURES = {"per_sample": "grade(sample, item[, ctx])", "aggregate": "grade_batch(samples[, ctx])"}
_METRIC_ID = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
_GRADE_KEYS = ("scores", "judge", "metadata")
_BATCH_KEYS = ("metrics", "samples")
_EXPECTED_GRADE = "a number, a bool, None, or a dict with 'scores'"


@dataclass(slots=True)
class SampleGrade:
    """One sample's grading outcome; ``scores[m] is None`` means "not scored" for metric m."""

    scores: dict[str, float | None] = field(default_factory=dict)
    judge: Any = None
    metadata: Any = None
    error: str | None = None
    log: str | None = None  # what ``grade`` printed for this sample (its last few KB)
    calls: list[dict] | None = None  # the model calls the grader made for this sample (bridge records)
    refused: bool = False  # a model call was refused by the run's budget: the grade is not final

    @property
    def failed(self) -> bool:
        return self.error is not None


@dataclass(slots=True)
class BatchGrade:
    """An aggregate grader's outcome: task metrics and optional per-sample updates (None = keep)."""

    metrics: dict[str, float] = field(default_factory=dict)
    sample_updates: list[SampleGrade | None] | None = None
    error: str | None = None
    calls: list[dict] | None = None
    refused: bool = False

    @property
    def failed(self) -> bool:
        return self.error is not None


def make_item(row: dict, *, prompt: str, target: str | None, choices: list[str] | None, sample_index: int) -> dict:
    """The ``item`` a grader sees: the row's fields, then target/prompt/choices/sample_index on top.

    The untouched row is kept under ``row``. A task without ``choices`` leaves a row's own
    ``choices`` field in place (as templates do) instead of overwriting it with None.
    """
    item = dict(row)
    item["target"] = target
    item["prompt"] = prompt
    if choices is not None or "choices" not in item:
        item["choices"] = choices
    item["sample_index"] = sample_index
    item["row"] = row
    return item


def grader_sample(sample: dict) -> dict:
    """The part of a sample record a grader receives (no status, scores or timings)."""
    return {key: sample.get(key) for key in SAMPLE_KEYS}


_ROW_AT, _PROMPT_AT, _TARGET_AT = (SAMPLE_KEYS.index(k) for k in ("dataset_row", "prompt", "target"))


def pack_grade_call(sample: dict, item: dict) -> list:
    """The compact wire form of ``grade(sample, item)`` that the worker expands (worker.py).

    Each dataset row travels once instead of three times (item fields, ``item["row"]``,
    ``sample["dataset_row"]``); an item that is not ``{**row, ..., "row": row}`` is sent as is.
    """
    values = list(map(sample.get, SAMPLE_KEYS))
    row = item.get("row")
    # only the make_item layout (row keys first, in order; "row" last) rebuilds with the same key order
    if type(row) is not dict or next(reversed(item)) != "row" or list(islice(item, len(row))) != list(row):
        return [0, values, None, item]
    extras = {k: v for k, v in item.items() if k not in row or row[k] is not v}
    extras.pop("row", None)
    if len(item) != len(row) + len(extras.keys() - row.keys()) + (0 if "row" in row else 1):
        return [0, values, None, item]  # some row key was removed from the item: send it whole
    flags = 0
    if values[_ROW_AT] is row:
        flags, values[_ROW_AT] = 1, None
    value = values[_PROMPT_AT]
    if type(value) is str and value == item.get("prompt"):
        flags, values[_PROMPT_AT] = flags | 2, None
    value = values[_TARGET_AT]
    if type(value) is str and value == item.get("target"):
        flags, values[_TARGET_AT] = flags | 4, None
    return [flags, values, row, extras]


class _GradeCalls(Sequence):
    """``grade`` arguments packed frame by frame, so a large batch is never copied up front."""

    def __init__(self, samples: list[dict], items: list[dict]) -> None:
        self.samples, self.items = samples, items

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        if isinstance(index, slice):
            return [pack_grade_call(s, i) for s, i in zip(self.samples[index], self.items[index])]
        return pack_grade_call(self.samples[index], self.items[index])


# -- return values --------------------------------------------------------------------------
def normalize_grade(value: Any, metric_id: str = "score", *, what: str = "grade") -> SampleGrade:
    """Validate what ``grade`` returned. Bools count 1/0; NaN and None mean "not scored".

    A wrong shape is not raised: it becomes the sample's error, naming what was returned.
    """
    kind = type(value)
    if kind is bool:  # the common cases first: this runs once per sample
        return SampleGrade({metric_id: 1.0 if value else 0.0})
    if kind is float and math.isfinite(value):
        return SampleGrade({metric_id: value})
    if value is None or _is_number(value):
        try:
            return SampleGrade(scores={metric_id: _score(value)})
        except ValueError as exc:
            return SampleGrade(error=f"{what} returned {exc}")
    if not isinstance(value, dict):
        return SampleGrade(error=f"{what} returned {_describe(value)}; expected {_EXPECTED_GRADE}")
    if "scores" not in value:
        keys = ", ".join(map(str, value)) or "none"
        return SampleGrade(
            error=f"{what} returned a dict without 'scores' (keys: {keys}); expected {_EXPECTED_GRADE}, "
            'e.g. {"scores": {"accuracy": 1.0}}'
        )
    unknown = sorted(str(k) for k in value if k not in _GRADE_KEYS)
    if unknown:
        allowed = ", ".join(_GRADE_KEYS)
        return SampleGrade(error=f"{what} returned unexpected key(s) {', '.join(unknown)}; allowed: {allowed}")
    try:
        scores = _score_map(value["scores"], "scores")
    except ValueError as exc:
        return SampleGrade(error=f"{what} returned {exc}")
    return SampleGrade(scores=scores, judge=value.get("judge"), metadata=value.get("metadata"))


def normalize_batch(
    value: Any, metric_id: str = "score", sample_count: int = 0, *, what: str = "grade_batch"
) -> BatchGrade:
    """Validate what ``grade_batch`` returned: a number, or ``{"metrics": ..., "samples": [...]}``."""
    if value is None or _is_number(value):
        try:
            score = _score(value)
        except ValueError as exc:
            return BatchGrade(error=f"{what} returned {exc}")
        return BatchGrade(metrics={} if score is None else {metric_id: score})
    if not isinstance(value, dict):
        expected = "a number or a dict with 'metrics' and/or 'samples'"
        return BatchGrade(error=f"{what} returned {_describe(value)}; expected {expected}")
    unknown = sorted(str(k) for k in value if k not in _BATCH_KEYS)
    if unknown or not any(k in value for k in _BATCH_KEYS):
        found = f"unexpected key(s) {', '.join(unknown)}" if unknown else "a dict without 'metrics' or 'samples'"
        return BatchGrade(error=f"{what} returned {found}; allowed: {', '.join(_BATCH_KEYS)}")
    try:
        raw = _score_map(value.get("metrics") or {}, "metrics")
    except ValueError as exc:
        return BatchGrade(error=f"{what} returned {exc}")
    metrics = {key: score for key, score in raw.items() if score is not None}
    updates: list[SampleGrade | None] | None = None
    if value.get("samples") is not None:
        entries = value["samples"]
        if not isinstance(entries, list):
            return BatchGrade(error=f"{what} returned 'samples' as {_describe(entries)}; expected a list")
        if len(entries) != sample_count:
            return BatchGrade(error=f"{what} returned {len(entries)} 'samples' entries for {sample_count} samples")
        updates = [
            None if entry is None else normalize_grade(entry, metric_id, what=f"{what} samples[{i}]")
            for i, entry in enumerate(entries)
        ]
    return BatchGrade(metrics=metrics, sample_updates=updates)


def _printed_grade(result: Any, metric_id: str) -> SampleGrade:
    """The grade of a call that printed something: its output goes on the sample as ``log``."""
    grade = normalize_grade(result.value, metric_id) if result.ok else SampleGrade(error=result.error)
    grade.log = result.log
    return grade


def _is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float))


def _score(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if not isinstance(value, (int, float)):
        raise ValueError(f"{_describe(value)} as a score; expected a number, a bool or null")
    try:
        score = float(value)
    except OverflowError:
        raise ValueError(f"the score {value} (too large)") from None
    if math.isnan(score):
        return None
    if math.isinf(score):
        raise ValueError(f"the score {value} (scores must be finite)")
    return score


def _score_map(mapping: Any, name: str) -> dict[str, float | None]:
    if not isinstance(mapping, dict):
        raise ValueError(f"'{name}' as {_describe(mapping)}; expected a dict of metric id -> number")
    out: dict[str, float | None] = {}
    for key, raw in mapping.items():
        if not isinstance(key, str) or not _METRIC_ID.fullmatch(key):
            raise ValueError(f"the metric id {key!r} in '{name}' (use letters, digits, _, . and -)")
        try:
            out[key] = _score(raw)
        except ValueError:
            raise ValueError(f"{name}[{key!r}] = {_describe(raw)}; expected a number, a bool or null") from None
    return out


def _describe(value: Any) -> str:
    article = {str: "a string", list: "a list", dict: "a dict", int: "an int", float: "a float"}
    text = repr(value)
    return f"{article.get(type(value), type(value).__name__)} ({text[:60] + '...' if len(text) > 60 else text})"


# -- the grader -----------------------------------------------------------------------------
class Grader:
    """One task's grader, built from its GraderSpec (a manifest model or a plain dict)."""

    def __init__(
        self,
        spec: Any,
        *,
        task_id: str,
        pool: SandboxPool,
        bridge: Bridge | None = None,
        run_id: str | None = None,
        metadata: dict | None = None,
    ) -> None:
        self.task_id, self.pool, self.bridge, self.run_id = task_id, pool, bridge, run_id
        self.metadata = dict(metadata or {})
        self.code = user_code_from_spec(spec, what="grader", task_id=task_id)
        self.contract = self._choice(spec, "contract", CONTRACTS, "sample")
        access = getattr(spec, "effective_model_access", None)
        access = access or ("mka1" if self.contract == "model_backed" else "none")
        self.model_access = self._choice(spec, "model_access", MODEL_ACCESS, access)
        rule = getattr(spec, "execution_for", None)  # the manifest model's own rule, when given one
        execution = rule(self.code.source) if callable(rule) else None
        execution = execution or _default_execution(self.contract, self.code.source)
        self.execution = self._choice(spec, "execution", EXECUTIONS, execution)
        self.metric_id = str(spec_value(spec, "metric_id", "score"))
        if not _METRIC_ID.fullmatch(self.metric_id):
            self._fail(f"metric_id {self.metric_id!r} may only use letters, digits, _, . and -")
        self.timeout_seconds = self._number(spec, "timeout_seconds", 120, 1, 600)
        self.max_model_calls = int(self._number(spec, "max_model_calls", 64, 0, 500))
        if spec_value(spec, "type", "python") != "python":
            self._fail(f"grader type must be 'python', got {spec_value(spec, 'type')!r}")
        try:
            json.dumps(self.metadata)
        except (TypeError, ValueError) as exc:
            self._fail(f"grader metadata must be JSON ({exc})")

    # -- public --------------------------------------------------------------------------
    async def check(self) -> None:
        """Load the code in a worker and find its entry point; SandboxError naming the task if not."""
        try:
            await self.pool.check(self._job(model=None))
        except CodeLoadError as exc:
            raise SandboxError(self._load_message(exc)) from None

    async def grade_samples(self, samples: list[dict], items: list[dict], *, model: str) -> list[SampleGrade]:
        """``per_sample`` execution: one ``grade`` call per sample, many samples per worker frame."""
        self._expect("per_sample", samples, items)
        calls = _GradeCalls(samples, items)
        bound = self._bind(model)
        try:
            results = await self.pool.run(self._job(model=model), calls, bridge=bound or self.bridge)
        except CodeLoadError as exc:
            return [SampleGrade(error=self._load_message(exc)) for _ in samples]
        metric_id = self.metric_id
        with gc_paused():  # one small object per sample while the caller holds every sample
            grades = [
                (normalize_grade(r.value, metric_id) if r.ok else SampleGrade(error=r.error))
                if r.log is None else _printed_grade(r, metric_id)
                for r in results
            ]
        if bound is not None:
            for i, g in enumerate(grades):
                g.calls = bound.calls_of(i) or None
                g.refused = i in bound.refused
        return grades

    def _bind(self, model: str | None) -> Any:
        """The bridge for one batch, if the run's bridge records calls per sample (see runner.bridge)."""
        bind = getattr(self.bridge, "bind", None)
        return bind(model=model, task_id=self.task_id) if bind is not None and self.model_access == "mka1" else None

    async def grade_batch(self, samples: list[dict], items: list[dict], *, model: str) -> BatchGrade:
        """``aggregate`` execution: one ``grade_batch`` call with every sample (each with its ``item``)."""
        self._expect("aggregate", samples, items)
        batch = [{**grader_sample(sample), "item": item} for sample, item in zip(samples, items)]
        bound = self._bind(model)
        try:
            (result,) = await self.pool.run(self._job(model=model), [[batch]], bridge=bound or self.bridge)
        except CodeLoadError as exc:
            return BatchGrade(error=self._load_message(exc))
        if not result.ok:
            # the task's metrics row has no log: keep the end of what it printed with the error
            log = result.log or ""
            printed = f" (it printed: {log if len(log) <= 1000 else '...' + log[-1000:]})" if log else ""
            grade = BatchGrade(error=f"{result.error}{printed}")
        else:
            grade = normalize_batch(result.value, self.metric_id, len(samples))
        if bound is not None:
            grade.calls = bound.calls_of(0) or None
            grade.refused = 0 in bound.refused
        return grade

    def grade_samples_sync(self, samples: list[dict], items: list[dict], *, model: str) -> list[SampleGrade]:
        return run_sync(self.grade_samples(samples, items, model=model))

    def grade_batch_sync(self, samples: list[dict], items: list[dict], *, model: str) -> BatchGrade:
        return run_sync(self.grade_batch(samples, items, model=model))

    # -- internals -----------------------------------------------------------------------
    def _job(self, *, model: str | None) -> Job:
        per_sample = self.execution == "per_sample"
        ctx = {"task_id": self.task_id, "model": model, "run_id": self.run_id, "metadata": self.metadata}
        return Job(
            self.code,
            names=("grade",) if per_sample else ("grade_batch",),
            nargs=2 if per_sample else 1,
            timeout=self.timeout_seconds,
            ctx=ctx,
            model_access=self.model_access == "mka1",
            max_model_calls=self.max_model_calls,
            unpack={"sample_keys": list(SAMPLE_KEYS)} if per_sample else None,
        )

    def _expect(self, execution: str, samples: list[dict], items: list[dict]) -> None:
        if self.execution != execution:
            other = "grade_samples" if self.execution == "per_sample" else "grade_batch"
            raise ValueError(f"the grader of task {self.task_id!r} runs {self.execution!r}; call {other}() instead")
        if len(samples) != len(items):
            raise ValueError(f"got {len(samples)} samples but {len(items)} items")

    def _load_message(self, exc: CodeLoadError) -> str:
        if exc.missing:
            return (
                f"the grader of task {self.task_id!r} (execution {self.execution!r}) needs "
                f"{SIGNATURES[self.execution]}, but its code does not define it"
            )
        return f"the grader of task {self.task_id!r} failed to load: {exc.message}"

    def _choice(self, spec: Any, name: str, allowed: tuple[str, ...], default: str) -> str:
        value = spec_value(spec, name, default)
        if value not in allowed:
            self._fail(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
        return str(value)

    def _number(self, spec: Any, name: str, default: float, low: float, high: float) -> float:
        value = spec_value(spec, name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            self._fail(f"{name} must be a number from {low:g} to {high:g}, got {value!r}")
        return float(value)

    def _fail(self, message: str) -> None:
        raise SandboxError(f"task {self.task_id!r}: grader {message}")


def _default_execution(contract: str, source: str) -> str:
    """sample -> per_sample, batch -> aggregate, model_backed -> per_sample iff ``grade`` is defined."""
    if contract == "sample":
        return "per_sample"
    if contract == "batch":
        return "aggregate"
    return "per_sample" if "grade" in _top_level_names(source) else "aggregate"


def _top_level_names(source: str) -> set[str]:
    """Names a module defines at top level, read without running it (ast only parses)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {"grade"}  # the load error will surface when the grader runs
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names
