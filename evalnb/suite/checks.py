"""`Suite.validate()`: what a run of this suite would trip over, found before any model call.

The schema (`manifest.py`) judges a manifest on its own; these checks hold it against its data
and its code, the way a run will: each task's rows are loaded (all of a local or uploaded file;
the first `HF_CHECK_ROWS` of a Hugging Face dataset, which honours `HF_HUB_OFFLINE` /
`HF_DATASETS_OFFLINE` as `datasets` does), its preprocessor runs on them, every `{{field}}` of
its templates is looked up in them, its output extraction is built, and its grader is loaded
in the sandbox and its function found (never called), and the score names its grader uses are
held against its ``metrics`` (`evalnb.suite.metric_names`). Every problem is reported, not only the
first, as a `Problem` naming the task by id and position.

A template field counts as a problem only when it is in *no* loaded row: a value missing from
some rows renders as "" (SPEC), and the run counts those prompts (`n_missing_field`). Such a
problem has ``kind == "missing_field"``, a grader's score beside its declared ones
``"extra_score"``: a run only warns about those (`refusal` leaves them out).

`refusal` is what a run raises when the checks found problems (`evalnb.run` runs them first on
the tasks it will run, with a row limit, and starts nothing when they fail).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalnb.sandbox import SandboxPool
    from evalnb.suite.manifest import SuiteManifest, Task

__all__ = ["HF_CHECK_ROWS", "Problem", "acheck_suite", "check_suite", "missing_field_problems", "refusal", "row_fields"]

HF_CHECK_ROWS = 5  # rows read from a Hugging Face dataset (its rows share one schema)
_FIELD_ORDER = ("dataset", "preprocess", "prompt_template", "target_template", "fewshot.dataset",
                "fewshot.prompt_template", "fewshot.target_template", "fewshot.example_template",
                "output_extraction", "grader")


@dataclass(frozen=True)
class Problem:
    """One thing that will go wrong: the task (id and position in ``tasks``), the field, what.

    ``str(problem)`` reads ``task 'capitals' (tasks[0]).prompt_template: field 'contry' is in
    no row; fields are: country, capital``; ``loc`` is the manifest location
    (``tasks[0].prompt_template``), as in `ManifestError.errors`.
    """

    task_id: str
    position: int
    field: str
    message: str
    kind: str = "error"  # "missing_field" / "extra_score": the run warns about it, it does not refuse

    @property
    def loc(self) -> str:
        return f"tasks[{self.position}].{self.field}"

    def as_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "loc": self.loc, "field": self.field, "msg": self.message}

    def __str__(self) -> str:
        return f"task {self.task_id!r} (tasks[{self.position}]).{self.field}: {self.message}"


def check_suite(suite: SuiteManifest, *, hf_rows: int = HF_CHECK_ROWS) -> list[Problem]:
    """Every problem of every task (see the module docstring); ``[]`` when a run would start clean."""
    from evalnb.aio import run_sync

    return run_sync(acheck_suite(suite, hf_rows=hf_rows))


async def acheck_suite(suite: SuiteManifest, *, hf_rows: int = HF_CHECK_ROWS, task_ids: Any = None,
                       rows: int | None = None) -> list[Problem]:
    """`check_suite` in a running event loop; ``task_ids`` limits it to those tasks and ``rows``
    reads at most that many rows of a file dataset too (a run's check before it starts)."""
    from evalnb.sandbox import SandboxPool

    pool = SandboxPool(1)
    warm = pool.warm_soon(1)  # the worker starts while the first rows load
    try:
        problems: list[Problem] = []
        for position, task in enumerate(suite.tasks):
            if task_ids is None or task.id in task_ids:
                problems += await _TaskCheck(suite, task, position, pool, hf_rows, rows).run()
        return problems
    finally:
        warm.cancel()
        await pool.aclose()


def missing_field_problems(task: Task, position: int, rows: list[dict], *, what: str = "row") -> list[Problem]:
    """A problem for each field of the task's prompt/target template that is in none of ``rows``."""
    from evalnb.suite.templates import fields_in_no_row

    choices = list(task.choices) if task.choices is not None else None
    problems = []
    for field, template in (("prompt_template", task.prompt_template), ("target_template", task.target_template)):
        for path in fields_in_no_row(template or "", rows, choices):
            problems.append(Problem(task.id, position, field, _no_field(path, rows, what), MISSING_FIELD))
    return problems


class MissingFields:
    """`missing_field_problems` over rows that arrive a stretch at a time (a streamed task).

    ``add(rows)`` each stretch; ``problems(position)`` at the end names the template fields no
    row had, listing the row fields seen, as `missing_field_problems` over all the rows would.
    """

    def __init__(self, task: Task) -> None:
        from evalnb.suite.templates import template_fields

        self.task = task
        self._choices = list(task.choices) if task.choices is not None else None
        self._missing = {field: list(dict.fromkeys(template_fields(template or "")))
                         for field, template in (("prompt_template", task.prompt_template),
                                                 ("target_template", task.target_template))}
        self._fields: dict[str, None] = {}
        self._seen_rows = False

    def add(self, rows: list[dict]) -> None:
        from evalnb.suite.templates import fields_in_no_row

        if not rows:
            return
        self._seen_rows = True
        for field, paths in self._missing.items():
            if paths:
                template = " ".join("{{" + p + "}}" for p in paths)
                self._missing[field] = fields_in_no_row(template, rows, self._choices)
        if len(self._fields) <= 30:
            for key in row_fields(rows):
                self._fields.setdefault(key, None)

    def problems(self, position: int, *, what: str = "row") -> list[Problem]:
        if not self._seen_rows:
            return []
        fields = list(self._fields)
        shown = ", ".join(fields[:30]) + (", ..." if len(fields) > 30 else "")
        return [Problem(self.task.id, position, field, f"field {path!r} is in no {what}; fields are: {shown or '(none)'}",
                        MISSING_FIELD)
                for field, paths in self._missing.items() for path in paths]


def row_fields(rows: list[dict], limit: int = 30) -> list[str]:
    """The top-level field names of ``rows``, in order of first appearance (at most ``limit``)."""
    seen: dict[str, None] = {}
    for row in rows:
        for key in row:
            if key not in seen:
                seen[key] = None
                if len(seen) > limit:
                    return list(seen)
    return list(seen)


def _no_field(path: str, rows: list[dict], what: str) -> str:
    fields = row_fields(rows)
    shown = ", ".join(fields[:30]) + (", ..." if len(fields) > 30 else "")
    return f"field {path!r} is in no {what}; fields are: {shown or '(none)'}"


class _TaskCheck:
    """The checks of one task, each adding its problems; later checks skip what earlier ones broke."""

    def __init__(self, suite: SuiteManifest, task: Task, position: int, pool: SandboxPool, hf_rows: int,
                 rows: int | None = None) -> None:
        self.suite, self.task, self.position, self.pool, self.hf_rows = suite, task, position, pool, hf_rows
        self.rows = rows
        self.problems: list[Problem] = []

    def problem(self, field: str, message: str, kind: str = "error") -> None:
        self.problems.append(Problem(self.task.id, self.position, field, _without_task(message, self.task.id), kind))

    async def run(self) -> list[Problem]:
        import asyncio

        task = self.task
        grader = asyncio.ensure_future(self._grader())  # loads in the sandbox while the rows are read
        try:
            rows = await self._rows(task.dataset, "dataset", "test")
            if task.preprocess is not None:
                rows = await self._preprocess(rows, "dataset")
            if rows is not None:
                if not rows:
                    self.problem("dataset", "no rows to evaluate" + (" after the preprocessor" if task.preprocess else ""))
                self.problems += missing_field_problems(task, self.position, rows)
            await self._fewshot(rows)
            self._extraction()
            self._metric_names()
        finally:
            await grader
        order = {field: i for i, field in enumerate(_FIELD_ORDER)}
        return sorted(self.problems, key=lambda p: order.get(p.field, len(order)))  # stable: manifest order

    async def _rows(self, dataset: Any, field: str, default_split: str) -> list[dict] | None:
        import asyncio

        from evalnb.data.loaders import dataset_kind, load_rows

        limit = self.hf_rows if dataset_kind(dataset) == "huggingface" else self.rows
        try:
            return await asyncio.to_thread(
                load_rows, dataset, base_dir=self.suite.base_dir, task_id=self.task.id,
                default_split=default_split, limit=limit,
            )
        except Exception as exc:  # noqa: BLE001 - DatasetError and whatever a loader lets through
            self.problem(field, _text(exc))
            return None

    async def _preprocess(self, rows: list[dict] | None, field: str) -> list[dict] | None:
        """The preprocessed rows; without rows (they did not load) the code is still loaded."""
        from evalnb.sandbox import arun_preprocessor, check_preprocessor

        spec, task_id = self.task.preprocess, self.task.id
        try:
            if not rows:
                await check_preprocessor(spec, task_id=task_id, pool=self.pool)
                return rows
            return await arun_preprocessor(spec, rows, task_id=task_id, pool=self.pool)
        except Exception as exc:  # noqa: BLE001 - PreprocessError, SandboxError
            if field == "dataset":  # report a broken preprocessor once, not for the few-shot rows too
                self.problem("preprocess", _text(exc))
            return None

    async def _fewshot(self, rows: list[dict] | None) -> None:
        from evalnb.suite.templates import fields_in_no_row

        task, spec = self.task, self.task.effective_fewshot
        if spec is None:
            return
        bad = fields_in_no_row(spec.example_template, [{"prompt": "", "target": ""}])
        for path in bad:
            self.problem("fewshot.example_template", f"field {path!r} is not one of: prompt, target")
        if spec.dataset is not None:
            rows = await self._rows(spec.dataset, "fewshot.dataset", "train")
            if rows and task.preprocess is not None:
                rows = await self._preprocess(rows, "fewshot.dataset")
            if rows is not None and not rows:
                self.problem("fewshot.dataset", "no rows to draw few-shot examples from")
        elif task.fewshot.prompt_template is None and task.fewshot.target_template is None:
            return  # the task's own templates on its own rows: checked already
        if not rows:
            return
        choices = list(task.choices) if task.choices is not None else None
        for name, template, own in (("prompt_template", spec.prompt_template, task.fewshot.prompt_template),
                                    ("target_template", spec.target_template, task.fewshot.target_template)):
            field = f"fewshot.{name}" if own is not None else "fewshot.dataset"
            for path in fields_in_no_row(template or "", rows, choices):
                where = "" if own is not None else f" ({name}, used for the few-shot examples)"
                self.problem(field, _no_field(path, rows, "few-shot row") + where, MISSING_FIELD)

    def _extraction(self) -> None:
        from evalnb.scoring.extraction import make_extractor

        try:
            make_extractor(self.task.extraction)
        except Exception as exc:  # noqa: BLE001 - whatever the spec cannot build
            self.problem("output_extraction", _text(exc))

    def _metric_names(self) -> None:
        from evalnb.suite.metric_names import counts_nothing, problems

        # names that leave every metric empty stop a run; extra scores beside counted ones do not
        kind = "error" if counts_nothing(self.task) else EXTRA_SCORE
        for field, message in problems(self.task):
            self.problem(field, message, kind)

    async def _grader(self) -> None:
        from evalnb.scoring.grading import Grader

        try:
            await Grader(self.task.grader, task_id=self.task.id, pool=self.pool).check()
        except Exception as exc:  # noqa: BLE001 - SandboxError: does not load, no grade function, bad spec
            self.problem("grader", _text(exc))


MISSING_FIELD = "missing_field"
EXTRA_SCORE = "extra_score"  # a grader's score beside its declared ones (a run warns, it does not refuse)
_DATASET_FIELDS = ("dataset", "fewshot.dataset")


def refusal(problems: list[Problem]) -> Exception | None:
    """The error a run raises for these problems, naming every one; None when it may start.

    Template fields in no row and a grader's extra scores beside its declared ones are left out
    (the run warns about them). Only dataset problems (a
    missing file, a bad line): a `DatasetError`; anything else too: a `ManifestError`, whose
    ``errors`` hold every problem (``loc``, ``msg``, ``task_id``).
    """
    from evalnb.errors import DatasetError, ManifestError

    blocking = [p for p in problems if p.kind not in (MISSING_FIELD, EXTRA_SCORE)]
    if not blocking:
        return None
    if all(p.field in _DATASET_FIELDS for p in blocking):
        noun = "problem" if len(blocking) == 1 else "problems"
        error = DatasetError(f"the run did not start ({len(blocking)} dataset {noun}):\n  "
                             + "\n  ".join(map(str, blocking)))
        error.problems = blocking  # type: ignore[attr-defined]
        return error
    return ManifestError([{**p.as_dict(), "type": p.kind} for p in blocking])


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _without_task(message: str, task_id: str) -> str:
    """Drop "task 'x': " and "of task 'x' " (the Problem names the task already)."""
    message = re.sub(rf"^task {re.escape(repr(task_id))}: ", "", message, count=1)
    return message.replace(f" of task {task_id!r}", "", 1)
