"""Adaptive concurrency: how many model calls may be in flight, learned from 429s (AIMD)."""

from __future__ import annotations

import asyncio
import math
from collections import deque
from typing import Any, Literal

Outcome = Literal["ok", "rate_limited", "error"]


class AdaptiveLimit:
    """A concurrency limit that halves on rate limits and creeps back up on success (AIMD).

    The arithmetic, with ``AdaptiveLimit(8, minimum=1, maximum=8)``:

    - Start: up to 8 calls in flight.
    - A call gets HTTP 429: multiplicative decrease, ``limit = max(minimum, floor(8 * 0.5))``
      = 4. Calls already in flight when the limit was cut may get 429 too; they do not cut
      again (each slot remembers the "epoch" it started in, and only a 429 from a call
      started after the latest cut counts), so one burst of 429s halves the limit once, not
      eight times down to 1.
    - Recovery is additive: after ``limit`` successes in a row at the current limit, it rises
      by one. At 4, four successes make it 5; then five more make it 6; then 7, then 8 — about
      4 + 5 + 6 + 7 = 22 successful calls to win back what one 429 took. It never exceeds
      ``maximum`` (the run's ``concurrency``) nor drops below ``minimum``.
    - Another 429 at 6 cuts to 3, and so on: the limit settles just under what the server
      accepts.

    Other errors (timeouts, 500s) leave the limit alone: they say nothing about rate.
    Counters (`rate_limited`, `rate_limit_waits`, `rate_limit_wait_s`, `decreases`,
    `increases`) feed the progress panel; `snapshot()` returns them as a dict.
    """

    def __init__(self, initial: int, *, minimum: int = 1, maximum: int | None = None,
                 decrease: float = 0.5):
        maximum = initial if maximum is None else maximum
        if not 1 <= minimum <= initial <= maximum:
            raise ValueError(
                f"AdaptiveLimit needs 1 <= minimum <= initial <= maximum, "
                f"got minimum={minimum}, initial={initial}, maximum={maximum}"
            )
        if not 0.0 < decrease < 1.0:
            raise ValueError(f"decrease must be between 0 and 1 (exclusive), got {decrease}")
        self.minimum, self.maximum, self.decrease = minimum, maximum, decrease
        self._limit = initial
        self._in_flight = 0
        self._epoch = 0
        self._streak = 0  # successes since the limit last changed
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.rate_limited = 0
        self.rate_limit_waits = 0
        self.rate_limit_wait_s = 0.0
        self.decreases = 0
        self.increases = 0

    @property
    def limit(self) -> int:
        """Calls allowed in flight right now."""
        return self._limit

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def waiting(self) -> int:
        return sum(1 for f in self._waiters if not f.done())

    async def acquire(self) -> int:
        """Wait for a free slot (first come, first served); returns the slot's epoch token."""
        if self._in_flight < self._limit and not self._waiters:
            self._in_flight += 1
            return self._epoch
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # a slot was handed to us: give it back
                self._in_flight -= 1
                self._wake()
            else:
                try:
                    self._waiters.remove(fut)
                except ValueError:
                    pass
            raise
        return self._epoch

    def release(self, token: int, outcome: Outcome = "ok", *, wait_s: float = 0.0) -> None:
        """Give the slot back, saying how the call went (and how long a 429 makes us wait)."""
        if self._in_flight <= 0:
            raise RuntimeError("AdaptiveLimit.release() without a matching acquire()")
        self._in_flight -= 1
        if outcome == "ok":
            self._on_success()
        elif outcome == "rate_limited":
            self._on_rate_limited(token, wait_s)
        self._wake()

    def _on_success(self) -> None:
        self._streak += 1
        if self._streak >= self._limit and self._limit < self.maximum:
            self._limit += 1
            self._streak = 0
            self.increases += 1

    def _on_rate_limited(self, token: int, wait_s: float) -> None:
        self.rate_limited += 1
        if wait_s > 0:
            self.rate_limit_waits += 1
            self.rate_limit_wait_s += wait_s
        if token != self._epoch:  # started before the latest cut: already accounted for
            return
        self._limit = max(self.minimum, math.floor(self._limit * self.decrease))
        self._epoch += 1
        self._streak = 0
        self.decreases += 1

    def _wake(self) -> None:
        while self._waiters and self._in_flight < self._limit:
            fut = self._waiters.popleft()
            if fut.done():
                continue
            self._in_flight += 1
            fut.set_result(None)

    def snapshot(self) -> dict[str, Any]:
        """The current limit and counters, for a progress display."""
        return {
            "limit": self._limit,
            "in_flight": self._in_flight,
            "waiting": self.waiting,
            "rate_limited": self.rate_limited,
            "rate_limit_waits": self.rate_limit_waits,
            "rate_limit_wait_s": self.rate_limit_wait_s,
            "decreases": self.decreases,
            "increases": self.increases,
        }

    def __repr__(self) -> str:
        return (f"AdaptiveLimit(limit={self._limit}, in_flight={self._in_flight}, "
                f"minimum={self.minimum}, maximum={self.maximum}, rate_limited={self.rate_limited})")
