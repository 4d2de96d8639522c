"""The run's spend and its cost budget (``max_cost_usd``): may this call start?

Every model call of a run, candidate or judge, asks `Budget.reserve` first with its worst
case (its prompt's estimated input tokens at the input price plus its max output tokens at
the output price; `providers.pricing.worst_case_cost`) and reports its real cost with
`settle` when it returns. A call starts only if what was spent, plus the worst case of every
call in flight, plus its own worst case stays within the budget. When it does not fit but
calls are in flight, it waits for them (they usually cost less than their worst case, which
frees room); when nothing is in flight and it still does not fit, the budget is exhausted and
from then on no call starts (waiting only helps while priced calls are in flight: free ones
release nothing). So spend never passes the budget unless a call costs more than
its worst case (an input token estimate that was low), and then only by what the calls in
flight underestimated. Calls without a price reserve 0 and always fit until the budget is
exhausted.

All of it runs on the run's event loop (judge calls from graders are brought there by the
bridge), so plain counters and one `asyncio.Condition` suffice.
"""

from __future__ import annotations

import asyncio

# Float sums of many tiny costs drift by ~1e-18; a nano-dollar of slack keeps "exactly on
# budget" a fit.
SLACK_USD = 1e-9


class Budget:
    """Spend so far, reservations in flight, and an optional limit (None: count, never refuse)."""

    def __init__(self, limit: float | None, *, spent: float = 0.0) -> None:
        self.limit = limit
        self.spent = float(spent)  # includes what earlier attempts of the run recorded
        self.spent_here = 0.0  # this attempt only
        self.reserved = 0.0
        self.in_flight = 0
        self.priced_in_flight = 0  # calls in flight holding a reservation > 0 (only they can free room)
        self.exhausted = False
        self.refused = 0  # calls that did not start because of the budget
        self._changed: asyncio.Condition | None = None

    def _fits(self, worst: float) -> bool:
        assert self.limit is not None
        return self.spent + self.reserved + worst <= self.limit + SLACK_USD

    async def reserve(self, worst: float) -> bool:
        """Hold ``worst`` USD for a call about to start; False: the budget is exhausted, do not call."""
        if self.limit is not None:
            while not self._fits(worst) or self.exhausted:
                if self.exhausted or self.priced_in_flight == 0:
                    self.exhausted = True
                    self.refused += 1
                    await self._notify()
                    return False
                cond = self._condition()
                async with cond:
                    await cond.wait()
        self.in_flight += 1
        if worst > 0:
            self.priced_in_flight += 1
        self.reserved += worst
        return True

    def try_reserve(self, worst: float) -> bool:
        """`reserve` without waiting: for calls that are only made later in one go (a provider
        batch), where waiting for calls in flight would wait for ourselves."""
        if self.limit is not None and (self.exhausted or not self._fits(worst)):
            self.exhausted = True
            self.refused += 1
            return False
        self.in_flight += 1
        if worst > 0:
            self.priced_in_flight += 1
        self.reserved += worst
        return True

    def settle(self, worst: float, cost: float | None) -> None:
        """A reserved call returned (or failed): release its reservation, count what it cost."""
        self.in_flight -= 1
        if worst > 0:
            self.priced_in_flight -= 1
        self.reserved = max(0.0, self.reserved - worst) if self.priced_in_flight else 0.0
        if cost:
            self.spent += cost
            self.spent_here += cost
        if self._changed is not None:
            asyncio.ensure_future(self._notify())

    def add(self, cost: float | None) -> None:
        """Count a call that was made without a reservation (a run without a budget)."""
        if cost:
            self.spent += cost
            self.spent_here += cost

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def _notify(self) -> None:
        if self._changed is None:
            return
        async with self._changed:
            self._changed.notify_all()

    def describe(self) -> str:
        """``$0.0123 spent`` (``of $5.00`` with a budget), for progress lines and errors."""
        text = f"${self.spent:.4f} spent"
        if self.limit is not None:
            text += f" of ${self.limit:.2f}"
        return text
