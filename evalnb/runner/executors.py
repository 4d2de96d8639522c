"""The executors that ship: this process (`LocalExecutor`), Ray workers (`runner.ray_executor`)
or the provider's Batch API (`runner.batch_executor`).

All implement `runner.executor.Executor` and talk to the run only through its
`RunContext`; see `runner.executor` for the contract and how to write another.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from evalnb.runner.executor import Executor
from evalnb.runner.run_context import RunContext
from evalnb.runner.unit import Unit

QUEUED_CALLS = 4000  # calls waiting for a generation worker before the planner pauses
UNGRADED = 20_000  # samples generated but not yet graded before the planner pauses
POLL_S = 0.005


class LocalExecutor:
    """The run's own event loop makes the calls: ``concurrency`` workers take them from a queue.

    Each worker hands a call to `RunContext.call` (the run's clients, limits and budget), which
    passes the outcome on to extraction, grading and the store; the queue and the grading
    backlog are bounded, so a million-item task holds a few thousand samples at a time.
    """

    name = "local"

    async def start(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.calls: deque[Unit] = deque()
        self._more = asyncio.Event()
        self._closing = False
        self._workers = [asyncio.ensure_future(self._worker()) for _ in range(ctx.plan.concurrency)]

    async def submit(self, units: list[Unit]) -> None:
        ctx = self.ctx
        for unit in units:
            if unit.output is None:
                self.calls.append(unit)
            else:
                ctx.answered(unit)
        self._more.set()
        while (len(self.calls) >= QUEUED_CALLS or ctx.backlog() >= UNGRADED) and not self._failed():
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
        """Make the queued calls one at a time; when the queue is empty, wait for more (or end)."""
        calls, call = self.calls, self.ctx.call
        while True:
            if not calls:
                if not await self._wait_for_more():
                    return
                continue
            await call(calls.popleft())

    async def _wait_for_more(self) -> bool:
        """Called by an idle worker: False once the executor is draining (nothing more comes)."""
        if self._closing:
            return False
        self._more.clear()
        await self._more.wait()
        return True


# Executors a stored run can name: type -> build one from its record (what `resume` runs with).
# Another executor registers itself here (with a `record()` giving {"type": <its type>, ...}).
EXECUTOR_TYPES: dict[str, Callable[[dict[str, Any]], Any]] = {}


def _ray_from_record(record: dict[str, Any]) -> Any:
    from evalnb.runner.ray_executor import RayExecutor

    return RayExecutor.from_record(record)


def _batch_from_record(record: dict[str, Any]) -> Any:
    from evalnb.runner.batch_executor import BatchExecutor

    return BatchExecutor.from_record(record)


EXECUTOR_TYPES["ray"] = _ray_from_record
EXECUTOR_TYPES["batch"] = _batch_from_record
EXECUTORS = "'local', 'ray', 'batch', or an executor such as evalnb.RayExecutor(...) or evalnb.BatchExecutor(...)"


def _is_executor(value: Any) -> bool:
    return isinstance(value, Executor) and isinstance(getattr(value, "name", None), str)


def make_executor(value: Any) -> Any:
    """The executor object for `RunPlan.executor` ("local", "ray", "batch", or an `Executor` object)."""
    if value is None or value == "local":
        return LocalExecutor()
    if value == "ray":
        from evalnb.runner.ray_executor import RayExecutor

        return RayExecutor()
    if value == "batch":
        from evalnb.runner.batch_executor import BatchExecutor

        return BatchExecutor()
    if _is_executor(value):
        return value
    raise ValueError(f"executor must be {EXECUTORS}, got {value!r}")


def check_executor(value: Any) -> Any:
    """`make_plan`'s check: "local", "ray", "batch", an `Executor` object, or a stored description of one."""
    if value is None or value == "local":
        return "local"
    if value in ("ray", "batch"):
        return value
    if isinstance(value, dict) and value.get("type") in EXECUTOR_TYPES:
        return EXECUTOR_TYPES[value["type"]](value)
    if _is_executor(value):
        return value
    raise ValueError(f"executor must be {EXECUTORS}, got {value!r}")


def executor_record(value: Any) -> Any:
    """How a run's executor is stored with its options (JSON; what `resume` runs with again)."""
    if value in (None, "local", "ray", "batch"):
        return value or "local"
    record = getattr(value, "record", None)
    return record() if record is not None else {"type": value.name}
