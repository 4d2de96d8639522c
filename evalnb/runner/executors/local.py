"""`LocalExecutor`: the run's own event loop makes the calls (the default executor).

It talks to the run only through its `RunContext`; see `runner.executors.base` for the contract.
"""

from __future__ import annotations

import asyncio
from collections import deque

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
