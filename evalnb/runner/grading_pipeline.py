"""The grading half of a run: batching finished samples to the sandbox, recording them.

A component the engine owns (`RunEngine.grading`): extracted samples of per-sample tasks
arrive through `enqueue`; `dispatch` sends them in batches while calls are still in flight;
`record` / `finish` complete a sample (stored, counted) and start a task's batch grader
once a task and model have all their samples.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from typing import Any

from evalnb.sample import Sample

GRADE_BATCH = 512  # samples per sandbox round trip
FILL_S, FILL_STEP_S = 0.1, 0.01  # how long a batch may wait to fill while calls are in flight, in steps of


class GradingPipeline:
    """Grades and records one run's samples; ``tasks`` is the engine's (filled while it prepares)."""

    def __init__(self, *, plan: Any, tasks: dict[str, Any], store: Any, run_id: str, writer: Any,
                 progress: Any, fail_fast: Any = None, warn: Any = None) -> None:
        self.plan, self.tasks, self.store, self.run_id = plan, tasks, store, run_id
        self.writer, self.progress = writer, progress
        self.fail_fast = fail_fast  # `runner.fail_fast.FailFast`: a grader failing every sample stops its task
        self._warn = warn  # (message) -> None: shown on the progress display, else a UserWarning
        self._undeclared_warned: set[str] = set()  # tasks warned about score names not among their metrics
        self._queue: deque[tuple[Sample, Any]] = deque()  # (sample, its Item)
        self._event = asyncio.Event()
        self._generation_done = False
        self.running: set[asyncio.Task] = set()  # grading and aggregate tasks in flight
        # generated samples waiting for (or in) a per-sample grader, by (task, model, index, epoch)
        self._ungraded: dict[tuple[str, str, int, int], Sample] = {}

    # ---- intake -----------------------------------------------------------------------------
    def enqueue(self, sample: Sample, item: Any) -> None:
        """An extracted sample of a per-sample task: graded in the next batch."""
        self._ungraded[(sample.task_id, sample.model, sample.sample_index, sample.epoch)] = sample
        self._queue.append((sample, item))
        self._event.set()

    def waiting(self, sample: Sample) -> None:
        """A generated sample not yet extracted (its search runs off the loop): counted in the
        backlog, and saved for a resume if the run stops before it comes back."""
        self._ungraded[(sample.task_id, sample.model, sample.sample_index, sample.epoch)] = sample

    def backlog(self) -> int:
        """Samples generated and not graded yet (executors pause their intake on it)."""
        return len(self._ungraded)

    def generation_done(self) -> None:
        """No more samples will be enqueued: `dispatch` returns once the queue is empty."""
        self._generation_done = True
        self._event.set()

    def take_ungraded(self) -> list[Sample]:
        """The samples generated but not graded (at shutdown: saved as "scoring" for a resume)."""
        samples = list(self._ungraded.values())
        self._ungraded.clear()
        return samples

    # ---- grading ----------------------------------------------------------------------------
    async def dispatch(self) -> None:
        """Send finished samples to the sandbox in batches while generation goes on."""
        slots = asyncio.Semaphore(max(2, 2 * (self.plan.grader_concurrency or (os.cpu_count() or 1))))
        queue = self._queue
        while True:
            await self._event.wait()
            self._event.clear()
            await self._fill(queue)
            while queue:
                groups: dict[tuple[str, str], tuple[list[Sample], list[Any]]] = {}
                for _ in range(min(GRADE_BATCH, len(queue))):
                    sample, item = queue.popleft()
                    samples, items = groups.setdefault((sample.task_id, sample.model), ([], []))
                    samples.append(sample)
                    items.append(item)
                for (task_id, label), (samples, items) in groups.items():
                    await slots.acquire()
                    self.spawn(self._grade(task_id, label, samples, items, slots))
            if self._generation_done and not queue:
                return

    async def _fill(self, queue: deque) -> None:
        """Let a batch build up while calls are in flight: up to `FILL_S`, or until it is full.

        Against a slow server the samples trickle in (500/s at 25 calls of 50 ms); sending
        each 10 ms's few as a frame of their own cost the sandbox round trip per handful of
        samples (benchmarks/README.md, issue 30).
        """
        waited = 0.0
        while not self._generation_done and len(queue) < GRADE_BATCH and waited < FILL_S:
            await asyncio.sleep(FILL_STEP_S)
            waited += FILL_STEP_S

    async def _grade(self, task_id: str, label: str, samples: list[Sample], items: list[Any],
                     slots: asyncio.Semaphore) -> None:
        state = self.tasks[task_id]
        try:
            grader_items = [item.as_grader_item() for item in items]
            try:
                grades = await state.grader.grade_samples(samples, grader_items, model=label)
            except Exception as exc:  # noqa: BLE001 - the grader machinery failed for the batch
                message = f"{type(exc).__name__}: {exc}"
                for s in samples:
                    self.record(s, error={"stage": "grading", "message": message})
                return
            self._check_names(state, grades)
            ff = self.fail_fast
            for s, g in zip(samples, grades):
                if ff is not None and not g.refused:
                    if g.error:
                        reason = ff.grade_failed(task_id, g.error)
                        if reason is not None and self._warn is not None:
                            self._warn(f"{reason}; its remaining calls are not made (a resume sends them)")
                    else:
                        ff.grade_succeeded(task_id)
                if g.log is not None:
                    s.log = g.log  # what the grader printed, also for a sample it failed on
                if g.calls:
                    s.judge_calls = g.calls
                if g.refused:
                    # the budget refused one of its model calls: not graded, and not failed
                    # either; it stays "scoring" (saved at shutdown, with the calls it paid
                    # for) and a resume grades it
                    continue
                if g.error:
                    self.finish(s, error={"stage": "grading", "message": g.error})
                    continue
                s.scores = dict(g.scores)
                s.judge = g.judge
                if g.metadata is not None:
                    s.grader_metadata = g.metadata
                self.finish(s)
            self.writer.add_samples([s for s, g in zip(samples, grades) if not g.refused])  # one hand-over per batch
        finally:
            slots.release()

    def _check_names(self, state: Any, grades: list[Any]) -> None:
        """Warn once per task when its grader returns score names the task does not declare:
        they are stored, but `metrics` counts only declared ids (it would show n=0)."""
        from evalnb.suite.metric_names import declared_ids, undeclared_message

        task = state.task
        if task.id in self._undeclared_warned or self._warn is None:
            return
        declared = declared_ids(task)
        if not declared:
            return
        extra = sorted({name for g in grades if not g.error for name in g.scores if name not in declared})
        if extra:
            self._undeclared_warned.add(task.id)
            self._warn(undeclared_message(task.id, extra, declared))

    async def _aggregate(self, task_id: str, label: str) -> None:
        """Run a batch grader over every finished sample of one task and model."""
        state = self.tasks[task_id]
        self.writer.flush()
        samples = self.store.samples(self.run_id, task_id=task_id, model=label, status="completed")
        if not samples:
            return
        wanted = {s["sample_index"] for s in samples}
        by_index = await asyncio.to_thread(_grader_items, state.source(), wanted)
        items = [by_index[s["sample_index"]] for s in samples]
        batch = await state.grader.grade_batch(samples, items, model=label)
        if batch.calls:
            self.store.write_judge_calls(self.run_id, task_id, label, batch.calls)
        self.store.write_task_metrics(self.run_id, task_id, label, batch.metrics or None, error=batch.error)
        if batch.sample_updates:
            updated = []
            for s, g in zip(samples, batch.sample_updates):
                if g is None:
                    continue
                if g.error:
                    s.update(status="failed", error={"stage": "grading", "message": g.error})
                else:
                    s["scores"] = dict(g.scores)
                    s["judge"] = g.judge
                updated.append(s)
            self.writer.add_samples(updated)

    # ---- finishing --------------------------------------------------------------------------
    def record(self, sample: Sample, *, error: dict | None = None) -> None:
        """A sample is finished: store it, count it, and start an aggregate grader if due."""
        self.finish(sample, error=error)
        self.writer.add(sample)

    def finish(self, sample: Sample, *, error: dict | None = None) -> None:
        """`record` without the store write: the caller hands the sample to the writer."""
        task_id, label = sample.task_id, sample.model
        state = self.tasks[task_id]
        self._ungraded.pop((task_id, label, sample.sample_index, sample.epoch), None)
        if error is not None:
            sample.status, sample.error = "failed", error
        else:
            sample.status = "completed"
        mp = self.progress.model(label, task_id)
        mp.done += 1
        if sample.status == "failed":
            mp.failed += 1
            self.progress.failed_because(str(error.get("message") or error.get("stage") or "failed"))
        elif mp.metric is not None:
            value = sample.scores.get(mp.metric) if sample.scores else None
            if isinstance(value, (int, float)):
                mp.metric_sum += float(value)
                mp.metric_n += 1
        state.remaining[label] -= 1
        if not state.per_sample and state.remaining[label] == 0:
            self.spawn(self._aggregate(task_id, label))

    def not_run(self, sample: Sample, reason: str) -> None:
        """A sample not called (its model or task was stopped): stored as not run, with why."""
        task_id, label = sample.task_id, sample.model
        sample.status, sample.error = "not_run", {"stage": "not_run", "message": reason}
        mp = self.progress.model(label, task_id)
        mp.done += 1
        mp.not_run += 1
        self.progress.failed_because(reason)
        state = self.tasks[task_id]
        state.remaining[label] -= 1
        self.writer.add(sample)
        if not state.per_sample and state.remaining[label] == 0:
            self.spawn(self._aggregate(task_id, label))

    def check_aggregates(self) -> None:
        """Start the batch graders of tasks whose samples were all finished before this run."""
        for task_id, state in self.tasks.items():
            if state.per_sample:
                continue
            for label, remaining in state.remaining.items():
                if remaining == 0:
                    self.spawn(self._aggregate(task_id, label))

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.running.add(task)
        task.add_done_callback(self.running.discard)


def _grader_items(items: Any, wanted: set[int]) -> dict[int, dict]:
    """The grader's `item` dicts of the items whose index is in `wanted` (a batch grader's samples)."""
    return {item.index: item.as_grader_item() for item in items if item.index in wanted}
