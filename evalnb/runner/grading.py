"""The grading half of a run: batching finished samples to the sandbox, recording them.

A mixin of `engine.RunEngine` (it uses the engine's tasks, store writer, progress and
sandbox pool): finished generations arrive in ``_grade_queue``; ``_dispatch_grading`` sends
them in batches while calls are still in flight; ``_record`` stores a finished sample and
starts a batch grader once a task and model have all their samples.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

GRADE_BATCH = 512  # samples per sandbox round trip


class GradingPipeline:
    # ---- grading --------------------------------------------------------------------------
    async def _dispatch_grading(self) -> None:
        """Send finished samples to the sandbox in batches while generation goes on."""
        slots = asyncio.Semaphore(max(2, 2 * (self.plan.grader_concurrency or (os.cpu_count() or 1))))
        while True:
            await self._grade_event.wait()
            self._grade_event.clear()
            if not self._generation_done and len(self._grade_queue) < GRADE_BATCH:
                await asyncio.sleep(0.01)  # let a batch build up while calls are in flight
            while self._grade_queue:
                groups: dict[tuple[str, str], tuple[list[dict], list[Any]]] = {}
                for _ in range(min(GRADE_BATCH, len(self._grade_queue))):
                    task_id, label, sample, item = self._grade_queue.popleft()
                    samples, items = groups.setdefault((task_id, label), ([], []))
                    samples.append(sample)
                    items.append(item)
                for (task_id, label), (samples, items) in groups.items():
                    await slots.acquire()
                    self._spawn(self._grade(task_id, label, samples, items, slots))
            if self._generation_done and not self._grade_queue:
                return

    async def _grade(self, task_id: str, label: str, samples: list[dict], items: list[Any],
                     slots: asyncio.Semaphore) -> None:
        state = self.tasks[task_id]
        try:
            grader_items = [item.as_grader_item() for item in items]
            try:
                grades = await state.grader.grade_samples(samples, grader_items, model=label)
            except Exception as exc:  # noqa: BLE001 - the grader machinery failed for the batch
                message = f"{type(exc).__name__}: {exc}"
                for s in samples:
                    self._record(task_id, label, s, error={"stage": "grading", "message": message})
                return
            for s, g in zip(samples, grades):
                if g.log is not None:
                    s["log"] = g.log  # what the grader printed, also for a sample it failed on
                if g.calls:
                    s["judge_calls"] = g.calls
                if g.refused:
                    # the budget refused one of its model calls: not graded, and not failed
                    # either; it stays "scoring" (saved at shutdown, with the calls it paid
                    # for) and a resume grades it
                    continue
                if g.error:
                    self._finish(task_id, label, s, error={"stage": "grading", "message": g.error})
                    continue
                s["scores"] = dict(g.scores)
                s["judge"] = g.judge
                if g.metadata is not None:
                    s["grader_metadata"] = g.metadata
                self._finish(task_id, label, s)
            self.writer.add_samples([s for s, g in zip(samples, grades) if not g.refused])  # one hand-over per batch
        finally:
            slots.release()

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


    def _record(self, task_id: str, label: str, sample: dict, *, error: dict | None = None) -> None:
        """A sample is finished: store it, count it, and start an aggregate grader if due."""
        self._finish(task_id, label, sample, error=error)
        self.writer.add(sample)

    def _finish(self, task_id: str, label: str, sample: dict, *, error: dict | None = None) -> None:
        """`_record` without the store write: the caller hands the sample to the writer."""
        state = self.tasks[task_id]
        sample.pop("reused", None)
        self._ungraded.pop((task_id, label, sample["sample_index"], sample.get("epoch", 0)), None)
        if error is not None:
            sample["status"], sample["error"] = "failed", error
        else:
            sample["status"] = "completed"
        mp = self.progress.model(label)
        mp.done += 1
        if sample["status"] == "failed":
            mp.failed += 1
        elif mp.metric is not None:
            value = (sample.get("scores") or {}).get(mp.metric)
            if isinstance(value, (int, float)):
                mp.metric_sum += float(value)
                mp.metric_n += 1
        state.remaining[label] -= 1
        if not state.per_sample and state.remaining[label] == 0:
            self._spawn(self._aggregate(task_id, label))

    def _check_aggregates(self) -> None:
        for task_id, state in self.tasks.items():
            if state.per_sample:
                continue
            for label, remaining in state.remaining.items():
                if remaining == 0:
                    self._spawn(self._aggregate(task_id, label))


def _grader_items(items: Any, wanted: set[int]) -> dict[int, dict]:
    """The grader's `item` dicts of the items whose index is in `wanted` (a batch grader's samples)."""
    return {item.index: item.as_grader_item() for item in items if item.index in wanted}
