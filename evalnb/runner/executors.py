"""Where a run's model calls (and their grading) happen: this process, or Ray workers.

The engine plans the run, owns the store and hands its work to an executor a stretch at a
time (`submit`); an executor must not run ahead of the store by more than a bounded amount
(back-pressure), and finishes with `drain`. `LocalExecutor` is the asyncio pipeline evalnb
always had; `evalnb.RayExecutor` (`runner.ray_executor`) shards the same work over Ray;
`evalnb.BatchExecutor` (`runner.batch_executor`) sends it through the provider's Batch API.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

QUEUED_CALLS = 4000  # calls waiting for a generation worker before the planner pauses
UNGRADED = 20_000  # samples generated but not yet graded before the planner pauses
POLL_S = 0.005


class LocalExecutor:
    """The run's own event loop makes the calls: ``concurrency`` workers take them from a queue.

    Finished calls go to the engine's grading pipeline (sandbox batches) and then to the store
    writer, exactly as before streaming; the queue and the grading backlog are bounded, so a
    million-item task holds a few thousand samples at a time.
    """

    name = "local"

    async def start(self, engine: Any) -> None:
        self.engine = engine
        self.calls: deque[Any] = deque()
        self._more = asyncio.Event()
        self._closing = False
        self._workers = [asyncio.ensure_future(self._worker()) for _ in range(engine.plan.concurrency)]

    async def submit(self, units: list[Any]) -> None:
        engine = self.engine
        for unit in units:
            if unit.output is None:
                self.calls.append(unit)
            else:
                engine.progress.model(unit.model.label).reused += 1
                engine._finish_generation(unit, unit.output, reused=True)
        self._more.set()
        while (len(self.calls) >= QUEUED_CALLS or len(engine._ungraded) >= UNGRADED) and not self._failed():
            await asyncio.sleep(POLL_S)
        self._raise_failure()

    async def drain(self) -> None:
        self._closing = True
        self._more.set()
        await asyncio.gather(*self._workers)

    async def close(self) -> None:
        for w in self._workers:
            w.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)

    def _failed(self) -> bool:
        return any(w.done() for w in self._workers)

    def _raise_failure(self) -> None:
        for w in self._workers:
            if w.done() and not w.cancelled() and w.exception() is not None:
                raise w.exception()  # type: ignore[misc]

    async def _worker(self) -> None:
        await self.engine._generation_worker(self.calls, self._wait_for_more)

    async def _wait_for_more(self) -> bool:
        """Called by an idle worker: False once the executor is draining (nothing more comes)."""
        if self._closing:
            return False
        self._more.clear()
        await self._more.wait()
        return True


EXECUTORS = "'local', 'ray', 'batch', an evalnb.RayExecutor(...) or an evalnb.BatchExecutor(...)"


def make_executor(value: Any) -> Any:
    """The executor object for `RunPlan.executor` ("local", "ray", "batch" or an executor)."""
    if value is None or value == "local":
        return LocalExecutor()
    if value == "ray":
        from evalnb.runner.ray_executor import RayExecutor

        return RayExecutor()
    if value == "batch":
        from evalnb.runner.batch_executor import BatchExecutor

        return BatchExecutor()
    if getattr(value, "name", None) in ("ray", "batch"):
        return value
    raise ValueError(f"executor must be {EXECUTORS}, got {value!r}")


def check_executor(value: Any) -> Any:
    """`make_plan`'s check: a name, an executor, or a stored description of one."""
    if value is None or value == "local":
        return "local"
    if value in ("ray", "batch"):
        return value
    if isinstance(value, dict) and value.get("type") == "ray":
        from evalnb.runner.ray_executor import RayExecutor

        return RayExecutor.from_record(value)
    if isinstance(value, dict) and value.get("type") == "batch":
        from evalnb.runner.batch_executor import BatchExecutor

        return BatchExecutor.from_record(value)
    if getattr(value, "name", None) in ("ray", "batch"):
        return value
    raise ValueError(f"executor must be {EXECUTORS}, got {value!r}")


def executor_record(value: Any) -> Any:
    """How a run's executor is stored with its options (JSON; what `resume` runs with again)."""
    if value in (None, "local", "ray", "batch"):
        return value or "local"
    return value.record()
