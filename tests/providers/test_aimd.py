"""AdaptiveLimit: the AIMD arithmetic, and that acquire() really bounds concurrency."""

from __future__ import annotations

import asyncio

import pytest

from evalnb.providers.aimd import AdaptiveLimit


def run(coro):
    return asyncio.run(coro)


def cycle(limit: AdaptiveLimit, outcome: str, wait_s: float = 0.0) -> None:
    """One call start to finish, outside any concurrency."""
    async def one():
        token = await limit.acquire()
        limit.release(token, outcome, wait_s=wait_s)  # type: ignore[arg-type]
    run(one())


def test_rejects_bad_bounds():
    for kwargs in [dict(initial=0), dict(initial=4, minimum=5), dict(initial=5, maximum=4),
                   dict(initial=2, minimum=0), dict(initial=2, decrease=1.0),
                   dict(initial=2, decrease=0.0)]:
        with pytest.raises(ValueError):
            AdaptiveLimit(**kwargs)


def test_maximum_defaults_to_initial():
    lim = AdaptiveLimit(6)
    assert lim.maximum == 6 and lim.limit == 6
    for _ in range(50):
        cycle(lim, "ok")
    assert lim.limit == 6 and lim.increases == 0  # never above maximum


def test_halving_and_floor_at_minimum():
    lim = AdaptiveLimit(8, minimum=3)
    cycle(lim, "rate_limited", wait_s=1.5)
    assert lim.limit == 4
    cycle(lim, "rate_limited", wait_s=0.5)
    assert lim.limit == 3  # floor(4 * 0.5) = 2, held at minimum 3
    cycle(lim, "rate_limited")
    assert lim.limit == 3
    assert lim.rate_limited == 3 and lim.decreases == 3
    assert lim.rate_limit_waits == 2 and lim.rate_limit_wait_s == pytest.approx(2.0)


def test_additive_recovery_walkthrough_from_the_docstring():
    lim = AdaptiveLimit(8, minimum=1, maximum=8)
    cycle(lim, "rate_limited")
    assert lim.limit == 4
    for expected, successes in [(5, 4), (6, 5), (7, 6), (8, 7)]:
        for _ in range(successes - 1):
            cycle(lim, "ok")
        assert lim.limit == expected - 1  # one short
        cycle(lim, "ok")
        assert lim.limit == expected
    assert lim.increases == 4
    cycle(lim, "ok")
    assert lim.limit == 8


def test_other_errors_leave_the_limit_alone():
    lim = AdaptiveLimit(4, maximum=10)
    for _ in range(3):
        cycle(lim, "ok")
    cycle(lim, "error")
    assert lim.limit == 4 and lim.rate_limited == 0
    cycle(lim, "ok")  # the error did not reset the success streak either
    assert lim.limit == 5


def test_burst_of_429s_from_one_epoch_cuts_once():
    async def main():
        lim = AdaptiveLimit(8)
        tokens = [await lim.acquire() for _ in range(8)]
        for t in tokens:  # all eight were in flight when the server said 429
            lim.release(t, "rate_limited")
        assert lim.limit == 4 and lim.decreases == 1 and lim.rate_limited == 8
        # a call started after the cut that gets 429 cuts again
        t = await lim.acquire()
        lim.release(t, "rate_limited")
        assert lim.limit == 2 and lim.decreases == 2

    run(main())


def test_acquire_bounds_in_flight_and_is_fifo():
    async def main():
        lim = AdaptiveLimit(3)
        peak = 0
        order: list[int] = []

        async def call(i):
            nonlocal peak
            token = await lim.acquire()
            order.append(i)
            peak = max(peak, lim.in_flight)
            await asyncio.sleep(0.01)
            lim.release(token, "ok")

        await asyncio.gather(*(call(i) for i in range(12)))
        assert peak == 3 and lim.in_flight == 0
        assert order == list(range(12))

    run(main())


def test_lower_limit_admits_fewer_and_recovery_admits_waiters():
    async def main():
        lim = AdaptiveLimit(2, maximum=4)
        a = await lim.acquire()
        b = await lim.acquire()
        waiter = asyncio.ensure_future(lim.acquire())
        await asyncio.sleep(0)
        assert not waiter.done() and lim.waiting == 1
        lim.release(a, "rate_limited")  # limit 2 -> 1, one still in flight: waiter must wait
        await asyncio.sleep(0)
        assert lim.limit == 1 and not waiter.done()
        lim.release(b, "ok")
        token = await asyncio.wait_for(waiter, 1)
        assert lim.in_flight == 1
        lim.release(token, "ok")

    run(main())


def test_cancelled_waiter_does_not_leak_a_slot():
    async def main():
        lim = AdaptiveLimit(1)
        held = await lim.acquire()
        waiter = asyncio.ensure_future(lim.acquire())
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        lim.release(held, "ok")
        assert lim.in_flight == 0 and lim.waiting == 0
        token = await asyncio.wait_for(lim.acquire(), 1)
        lim.release(token, "ok")

    run(main())


def test_release_without_acquire_is_an_error_and_snapshot():
    lim = AdaptiveLimit(2)
    with pytest.raises(RuntimeError):
        lim.release(0)
    snap = lim.snapshot()
    assert snap == {"limit": 2, "in_flight": 0, "waiting": 0, "rate_limited": 0,
                    "rate_limit_waits": 0, "rate_limit_wait_s": 0.0, "decreases": 0,
                    "increases": 0}
    assert "limit=2" in repr(lim)


def test_waiter_cancelled_after_being_handed_a_slot_gives_it_back():
    async def main():
        lim = AdaptiveLimit(1)
        held = await lim.acquire()
        waiter = asyncio.ensure_future(lim.acquire())
        await asyncio.sleep(0)
        lim.release(held, "ok")  # hands the slot to the waiter...
        assert lim.in_flight == 1
        waiter.cancel()  # ...which is cancelled before it runs
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert lim.in_flight == 0
        token = await asyncio.wait_for(lim.acquire(), 1)
        lim.release(token, "ok")

    run(main())
