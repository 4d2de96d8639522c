"""Rows -> Items: preprocessing, few-shot selection and template rendering.

This is the one place that turns a task's dataset rows into exactly what a model is asked
(`Item.prompt`) and what it is graded against (`Item.target`). The preview widget and the
runner both read Items, so what you preview is what gets sent.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from evalnb.suite.templates import field_value, missing_field_check, render_template

if TYPE_CHECKING:
    from evalnb.suite.manifest import SuiteManifest as Suite, Task

# A preprocessor hook: (task, rows) -> rows. The sandbox provides the real one; tests and the
# preview may pass their own.
Preprocessor = Callable[["Task", list[dict]], list[dict]]


@dataclass(frozen=True)
class FewshotExample:
    """One rendered few-shot example and the row it came from."""

    row_index: int
    prompt: str
    target: str
    text: str


@dataclass(frozen=True)
class Item:
    """One evaluated row: the exact prompt sent to every model and the target it is graded on."""

    index: int
    row: dict[str, Any]
    prompt: str
    target: str
    choices: list[str] | None = None
    fewshot: tuple[FewshotExample, ...] = field(default_factory=tuple)
    question: str = ""  # the rendered prompt without few-shot examples
    missing_field: bool = False  # the prompt or target template named a field this row lacks
    description: str = ""  # the task's description (an evalnb extension), before everything else
    # what a log-likelihood task scores (prompt + each continuation); None for generation tasks
    continuations: tuple[str, ...] | None = None
    # a multiple-input item (winogrande): each context after the prompt, with the one continuation
    contexts: tuple[str, ...] | None = None

    def as_grader_item(self) -> dict[str, Any]:
        """The `item` dict a grader receives (SPEC Decisions: row fields + rendered fields)."""
        item = dict(self.row)
        item["target"] = self.target
        item["prompt"] = self.prompt
        if self.continuations is not None:
            item["continuations"] = list(self.continuations)
        if self.contexts is not None:
            item["contexts"] = list(self.contexts)
        # A task without choices leaves a row's own `choices` in place, as templates do (and
        # as evalnb.scoring.grading.make_item does).
        if self.choices is not None or "choices" not in item:
            item["choices"] = self.choices
        item["sample_index"] = self.index
        item["row"] = self.row
        return item


def default_preprocessor(task: "Task", rows: list[dict]) -> list[dict]:
    """Run the task's Python preprocessor in the sandbox (no-op when the task has none)."""
    if task.preprocess is None:
        return rows
    from evalnb.sandbox import run_preprocessor

    return run_preprocessor(task.preprocess, rows, task_id=task.id)


def suite_items(
    suite: "Suite",
    task_id: str,
    limit: int | None = None,
    *,
    preprocess: Preprocessor | None = None,
    allow_private_hosts: bool = False,
) -> list[Item]:
    """Build the Items of one task: load rows, preprocess, add few-shot examples, render."""
    return list(iter_items(suite, task_id, limit, preprocess=preprocess, allow_private_hosts=allow_private_hosts))


def streams_rows(task: "Task", preprocess: Preprocessor | None = None) -> bool:
    """Whether `iter_items` reads the task's rows as it goes (else it loads them all first).

    A preprocessor sees every row at once (it may drop, add or reorder rows), and own-dataset
    ``random`` few-shot draws from every row: those tasks load their rows whole.
    """
    if preprocess is not None or task.preprocess is not None:
        return False
    fewshot = task.effective_fewshot
    count = fewshot.count if fewshot else 0
    return not count or fewshot.dataset is not None or fewshot.strategy == "first"


def iter_items(
    suite: "Suite",
    task_id: str,
    limit: int | None = None,
    *,
    preprocess: Preprocessor | None = None,
    allow_private_hosts: bool = False,
) -> Iterator[Item]:
    """`suite_items` one Item at a time, in order (what a run uses: its memory stays flat).

    When `streams_rows` says so the rows are parsed as they are read; a local JSONL/CSV file
    of a million rows is then never in memory whole. The same Items as `suite_items`.
    """
    from evalnb.data.loaders import iter_rows, load_rows

    task = suite.task(task_id)
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise ValueError(f"task {task.id!r}: limit must be a non-negative integer (found {limit!r})")
    fewshot = task.effective_fewshot
    count = fewshot.count if fewshot else 0
    separate_pool = bool(fewshot and fewshot.dataset is not None)
    streaming = streams_rows(task, preprocess)

    # Read no more rows than the items asked for need. A preprocessor (the task's, or one
    # passed in) may drop or add rows, so with one we read everything; own-dataset random
    # few-shot needs the whole pool too.
    has_preprocessor = preprocess is not None or task.preprocess is not None
    preprocess = preprocess or default_preprocessor
    read_limit = None
    if limit is not None and not has_preprocessor:
        if count == 0 or separate_pool:
            read_limit = limit
        elif fewshot.strategy == "first":
            read_limit = limit + count + 1

    source = dict(dataset=task.dataset, base_dir=suite.base_dir, task_id=task.id, default_split="test",
                  allow_private_hosts=allow_private_hosts, limit=read_limit)
    rows: Iterator[dict]
    pool: list[dict]
    if streaming:
        rows = iter_rows(**source)
        pool = []
        if count and not separate_pool:
            # "first" few-shot only ever picks among the first count + 1 rows (see _FewshotRenderer)
            pool = list(itertools.islice(rows, count + 1))
            rows = itertools.chain(pool, rows)
    else:
        loaded = preprocess(task, load_rows(**source))
        rows, pool = iter(loaded), loaded
    if count and separate_pool:
        pool = load_rows(
            fewshot.dataset,
            base_dir=suite.base_dir,
            task_id=task.id,
            default_split="train",
            allow_private_hosts=allow_private_hosts,
        )
        pool = preprocess(task, pool)

    evaluated = rows if limit is None else itertools.islice(rows, limit)
    examples = _FewshotRenderer(task, pool) if count else None
    choices = list(task.choices) if task.choices is not None else None
    target_template = task.target_template or ""
    lacks_field = missing_field_check([task.prompt_template or "", target_template], choices)
    for index, row in enumerate(evaluated):
        question = render_template(task.prompt_template, row, choices)
        shots: tuple[FewshotExample, ...] = ()
        prompt = question
        if examples is not None:
            exclude = None if separate_pool else index
            shots = examples.pick(index, exclude)
            if shots:
                sep = fewshot.separator
                prompt = sep.join(s.text for s in shots) + sep + question
        description = render_template(task.description, row, choices) if task.description else ""
        target = render_template(target_template, row, choices)
        yield Item(
            index=index,
            row=row,
            prompt=description + prompt,
            target=target,
            choices=choices,
            fewshot=shots,
            question=question,
            missing_field=lacks_field(row),
            description=description,
            continuations=item_continuations(task, row, target),
            contexts=item_contexts(task, row),
        )


def item_continuations(task: "Task", row: dict, target: str = "") -> tuple[str, ...] | None:
    """A log-likelihood task's continuations for one row (None for a generation task).

    ``loglikelihood.continuations`` names a row field (a list of strings, or one string);
    without it a multiple-choice task uses its ``choices``, each after ``delimiter``. A
    rolling (perplexity) task scores its target: that is its one continuation (so the item's
    request key tells two texts apart). A missing or malformed field is an error naming the
    task and the field.
    """
    spec = task.loglikelihood
    if spec is None:
        return None
    if spec.type == "loglikelihood_rolling":
        return (target,)
    if spec.continuations is None:
        return tuple(spec.delimiter + choice for choice in task.choices or ())
    try:
        value = field_value(row, spec.continuations)
    except KeyError:
        raise ValueError(
            f"task {task.id!r}: loglikelihood.continuations: the row has no field {spec.continuations!r}"
        ) from None
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(
            f"task {task.id!r}: loglikelihood.continuations: {spec.continuations!r} must be a list of "
            f"strings (found {type(value).__name__})"
        )
    return tuple(value)


def item_contexts(task: "Task", row: dict) -> tuple[str, ...] | None:
    """A multiple-input item's contexts (``loglikelihood.contexts``: a row path to a list of
    strings; a missing or null value: the item has one context, its prompt)."""
    spec = task.loglikelihood
    if spec is None or spec.contexts is None:
        return None
    try:
        value = field_value(row, spec.contexts)
    except KeyError:
        return None
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"task {task.id!r}: loglikelihood.contexts: {spec.contexts!r} must be a non-empty list of "
                         f"strings (found {type(value).__name__})")
    return tuple(value)


class _FewshotRenderer:
    """Picks few-shot rows per evaluated row and renders each example once."""

    def __init__(self, task: "Task", pool: list[dict]):
        spec = task.effective_fewshot
        self.spec = spec
        self.pool = pool
        self.choices = list(task.choices) if task.choices is not None else None
        self._cache: dict[int, FewshotExample] = {}

    def pick(self, index: int, exclude: int | None) -> tuple[FewshotExample, ...]:
        n = len(self.pool)
        available = n - (1 if exclude is not None and exclude < n else 0)
        k = min(self.spec.count, available)
        if k <= 0:
            return ()
        if self.spec.strategy == "random":
            # Deterministic in (seed, row index): the same row always gets the same examples.
            rng = random.Random(f"{self.spec.seed}:{index}")
            picked = rng.sample(range(available), k)
            if exclude is not None and exclude < n:
                picked = [j + 1 if j >= exclude else j for j in picked]
        else:
            picked = [j for j in range(min(n, k + 1)) if j != exclude][:k]
        return tuple(self._example(j) for j in picked)

    def _example(self, j: int) -> FewshotExample:
        cached = self._cache.get(j)
        if cached is None:
            row = self.pool[j]
            prompt = render_template(self.spec.prompt_template, row, self.choices)
            target = render_template(self.spec.target_template or "", row, self.choices)
            text = render_template(
                self.spec.example_template, {"prompt": prompt, "target": target}, None
            )
            cached = self._cache[j] = FewshotExample(j, prompt, target, text)
        return cached
