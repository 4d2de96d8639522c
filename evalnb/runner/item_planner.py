"""Planning a run a stretch of items at a time: kept, copied, cached, or still to call.

A task's items are walked twice, never held together (`suite.items.iter_items` streams a
local JSONL/CSV file as it reads it):

1. The survey, before any model call, decides for every (model, epoch) and item whether the
   sample is already in this run (kept), can be copied whole from an identical earlier run,
   is answered by the output cache, or needs a call — one byte per sample — and counts what
   the progress panel shows. It asks the store one stretch (``CHUNK`` items) at a time.
2. The work pass, epoch by epoch as before, walks the items again and hands out `executor.Unit`s: the
   cached outputs and the calls still to make, a stretch at a time.

Deciding everything before the first call keeps the old semantics exactly: an output this run
receives never answers another request of the same run, and the totals are known up front.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from evalnb.runner.unit import Unit

CALL, KEEP, COPY, CACHED, TWIN = 0, 1, 2, 3, 4  # TWIN: an earlier task of the run sends this request (`twins`)
CHUNK = 1000  # items per stretch: a few store queries each


@dataclass
class TaskSurvey:
    """What the survey found for one task: items, and per model label the finished samples."""

    n_items: int = 0
    kept: dict[str, int] = field(default_factory=dict)
    copied: dict[str, int] = field(default_factory=dict)
    # copied samples' first metric, for the progress panel: label -> (sum, n)
    copied_metric: dict[str, tuple[float, int]] = field(default_factory=dict)


def chunks(items: Iterable[Any], size: int = CHUNK) -> Iterator[list[Any]]:
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def key_text(item: Any) -> str:
    """What an item's request key hashes: its prompt, and a log-likelihood item's continuations
    (two items with one prompt and different choices are different requests)."""
    continuations = getattr(item, "continuations", None)
    if continuations is None:
        return item.prompt
    contexts = getattr(item, "contexts", None)
    if contexts is not None:  # a multiple-input item: its contexts differ, not its continuation
        return "\x00".join((item.prompt, "loglikelihood-contexts", *contexts, "", *continuations))
    return "\x00".join((item.prompt, "loglikelihood", *continuations))


class _Stretch:
    """One stretch of a task's items being surveyed: its decisions per (label, epoch), one byte
    per item, and the items' row digests (computed once, when a step first needs one)."""

    def __init__(self, task_id: str, chunk: list[Any], dec: dict[tuple[str, int], bytearray]) -> None:
        self.task_id, self.chunk, self.dec = task_id, chunk, dec
        self.first, self.last, self.n = chunk[0].index, chunk[-1].index, len(chunk)
        self._digests: list[bytes | None] = [None] * self.n

    def row_hash(self, j: int) -> bytes:
        from evalnb.store import row_digest

        d = self._digests[j]
        if d is None:
            d = self._digests[j] = row_digest(self.chunk[j].row)
        return d

    def calls(self) -> Iterator[tuple[str, int, bytearray, int]]:
        """(label, epoch, decisions, j) of every sample still at CALL when the loop reaches it."""
        for (label, epoch), d in self.dec.items():
            for j in range(self.n):
                if d[j] == CALL:
                    yield label, epoch, d, j


class Planner:
    """The survey and the work pass of one run (see the module docstring)."""

    def __init__(self, plan: Any, store: Any, run_id: str, *, continuing: bool, previous: str | None,
                 retry_failed: bool = False) -> None:
        from evalnb.store import request_key_function

        self.plan, self.store, self.run_id = plan, store, run_id
        # samples of this run that failed for their own reasons (a 400 for that prompt, a grader
        # error): kept as they are unless retry_failed; the transport's and provider's failures
        # and the not-run samples are done again (`runner.fail_fast.resendable`)
        self.own_failures = set() if retry_failed or not continuing else _own_failures(store, run_id)
        self.previous = previous  # an identical completed run to copy graded samples from
        self.continuing = continuing  # this run existed before: look for its own samples
        self.has_own = continuing and store.has_completed(run_id)
        self.cache_run = None if plan.reuse else run_id  # reuse=False: only the run's own answers
        self.use_cache = plan.reuse or continuing
        from evalnb.suite.task_generation import merged_generation

        gen = plan.generation
        self._keys = {m.label: request_key_function(m.name, m.base_url, m.api, gen) for m in plan.models}
        # a task with its own generation settings (an evalnb extension) asks with those merged in
        self._task_keys = {
            (task.id, m.label): request_key_function(m.name, m.base_url, m.api, merged_generation(gen, task.generation))
            for task in plan.suite.tasks if getattr(task, "generation", None) is not None for m in plan.models
        }
        self.decisions: dict[tuple[str, str, int], bytearray] = {}
        self._labels = [m.label for m in plan.models]
        # prompt variants: request keys some task of this run already calls; the same request of a
        # later task (a variant that changes nothing there) waits for that call (`runner.twins`)
        self._claimed: set[str] | None = set() if getattr(plan, "variants", None) is not None else None
        self.twins: list[Unit] = []  # twins of the last stretch `work` gave: the engine takes them

    def key(self, label: str, prompt: str, epoch: int, task_id: str | None = None) -> str:
        from evalnb.store import epoch_request_key

        keyer = self._task_keys.get((task_id, label)) if self._task_keys else None
        key = (keyer or self._keys[label])(prompt)
        return epoch_request_key(key, epoch) if epoch else key

    # ---- 1. the survey ----------------------------------------------------------------------
    def survey(self, task_id: str, items: Iterable[Any], *, per_sample: bool, metric: dict[str, str | None],
               on_rows: Any = None) -> TaskSurvey:
        """Decide every sample of one task (see the module docstring); nothing is written.

        ``metric``: each model's progress metric (copied samples' scores feed its running mean);
        ``on_rows(rows)`` sees each stretch's rows (the missing-field check).
        """
        result = TaskSurvey()
        labels = [m.label for m in self.plan.models]
        for label in labels:
            result.kept[label] = result.copied[label] = 0
            for epoch in range(self.plan.epochs):
                self.decisions[(task_id, label, epoch)] = bytearray()
        sums = {label: [0.0, 0] for label in labels}
        for chunk in chunks(items):
            if on_rows is not None:
                on_rows([i.row for i in chunk])
            self._survey_chunk(task_id, chunk, per_sample, result, metric, sums)
            result.n_items += len(chunk)
        result.copied_metric = {label: (s, n) for label, (s, n) in sums.items()}
        return result

    def _survey_chunk(self, task_id: str, chunk: list[Any], per_sample: bool, result: TaskSurvey,
                      metric: dict[str, str | None], sums: dict[str, list]) -> None:
        """One stretch's decisions, each step deciding only samples still at CALL: kept (this
        run's own), copied (an identical earlier run), cached (the output cache), twins."""
        stretch = _Stretch(task_id, chunk, {(m.label, e): bytearray(len(chunk))
                                            for m in self.plan.models for e in range(self.plan.epochs)})
        if self.has_own:
            self._keep_own(stretch, result)
        if self.own_failures:
            self._keep_own_failures(stretch, result)
        if self.previous is not None and per_sample and self.plan.reuse:
            self._copy_previous(stretch, result, metric, sums)
        if self.use_cache:
            self._mark_cached(stretch)
        if self._claimed is not None:
            self._mark_twins(stretch, self._claimed)
        for (label, epoch), d in stretch.dec.items():
            self.decisions[(task_id, label, epoch)].extend(d)

    def _keep_own(self, st: "_Stretch", result: TaskSurvey) -> None:
        """Samples this run finished before: kept if asked and graded the same way."""
        from evalnb.store import text_hash

        for label, index, epoch, prompt_hash, target, row_hash in self.store.completed_range(
                self.run_id, st.task_id, self._labels, st.first, st.last):
            d, j = st.dec.get((label, epoch)), index - st.first
            if d is None or not 0 <= j < st.n:
                continue
            item = st.chunk[j]
            if prompt_hash == text_hash(item.prompt) and target == item.target and row_hash == st.row_hash(j):
                d[j] = KEEP
                result.kept[label] += 1

    def _keep_own_failures(self, st: "_Stretch", result: TaskSurvey) -> None:
        """This run's samples that failed for their own reasons stay as they are."""
        for label, epoch, d, j in st.calls():
            if (st.task_id, label, st.first + j, epoch) in self.own_failures:
                d[j] = KEEP
                result.kept[label] += 1

    def _copy_previous(self, st: "_Stretch", result: TaskSurvey, metric: dict[str, str | None],
                       sums: dict[str, list]) -> None:
        """Graded samples of the identical earlier run, same request, target and row: copied
        (their progress metric added to ``sums``)."""
        for label, index, epoch, key, target, row_hash, scores in self.store.graded_range(
                self.previous, st.task_id, self._labels, st.first, st.last):
            d, j = st.dec.get((label, epoch)), index - st.first
            if d is None or not 0 <= j < st.n or d[j] != CALL:
                continue
            item = st.chunk[j]
            if (key == self.key(label, key_text(item), epoch, st.task_id) and target == item.target
                    and row_hash == st.row_hash(j)):
                d[j] = COPY
                result.copied[label] += 1
                name = metric.get(label)
                value = (json.loads(scores) if scores else {}).get(name) if name else None
                if isinstance(value, (int, float)):
                    sums[label][0] += float(value)
                    sums[label][1] += 1

    def _mark_cached(self, st: "_Stretch") -> None:
        """Calls whose request the output cache answers."""
        wanted: dict[str, list[tuple[bytearray, int]]] = {}
        for label, epoch, d, j in st.calls():
            wanted.setdefault(self.key(label, key_text(st.chunk[j]), epoch, st.task_id), []).append((d, j))
        if wanted:
            for key in self.store.cached_keys(wanted, run_id=self.cache_run):
                for d, j in wanted[key]:
                    d[j] = CACHED

    def _mark_twins(self, st: "_Stretch", claimed: set[str]) -> None:
        """Calls an earlier task (variant) of the run already makes: twins; the rest claim theirs."""
        for label, epoch, d, j in st.calls():
            key = self.key(label, key_text(st.chunk[j]), epoch, st.task_id)
            if key in claimed:
                d[j] = TWIN
            else:
                claimed.add(key)

    def copy_kept(self, writer: Any, task_id: str) -> None:
        """Queue the copies the survey decided on, a statement per stretch of items."""
        if self.previous is None:
            return
        for model in self.plan.models:
            for epoch in range(self.plan.epochs):
                d = self.decisions[(task_id, model.label, epoch)]
                for start in range(0, len(d), CHUNK):
                    part = d[start:start + CHUNK]
                    if COPY in part:
                        indexes = [start + j for j, code in enumerate(part) if code == COPY]
                        writer.copy_samples(self.previous, task_id, model.label, epoch, indexes)

    # ---- 2. the work pass -------------------------------------------------------------------
    def has_work(self, task_id: str, epoch: int) -> bool:
        """Whether any sample of (task, epoch) is still to produce (a call or a cached output)."""
        for model in self.plan.models:
            d = self.decisions.get((task_id, model.label, epoch))
            if d is not None and d.count(KEEP) + d.count(COPY) < len(d):
                return True
        return False

    def work(self, task_id: str, epoch: int, items: Iterable[Any]) -> Iterator[list[Unit]]:
        """The cached outputs and calls of one (task, epoch), a stretch of items at a time,
        items in order and every model of an item together (as the run always asked)."""
        models = self.plan.models
        rows = [(m, self.decisions[(task_id, m.label, epoch)]) for m in models]
        for chunk in chunks(items):
            units: list[Unit] = []
            cached: list[Unit] = []
            for item in chunk:
                i = item.index
                for model, d in rows:
                    code = d[i] if i < len(d) else CALL
                    if code == TWIN:
                        self.twins.append(Unit(task_id, item, model, self.key(model.label, key_text(item), epoch,
                                                                              task_id), epoch))
                    elif code == CALL or code == CACHED:
                        unit = Unit(task_id, item, model, self.key(model.label, key_text(item), epoch, task_id), epoch)
                        units.append(unit)
                        if code == CACHED:
                            cached.append(unit)
            if cached:
                found = self.store.lookup_outputs([u.key for u in cached], run_id=self.cache_run)
                for unit in cached:
                    unit.output = found.get(unit.key)  # gone since the survey (never, in practice): call
            if units or self.twins:
                yield units


def _own_failures(store: Any, run_id: str) -> set[tuple[str, str, int, int]]:
    """(task, model, index, epoch) of the run's samples that failed for their own reasons."""
    from evalnb.runner.fail_fast import resendable

    return {(t, m, i, e) for t, m, i, e, error in store.failed_errors(run_id) if not resendable(error)}
