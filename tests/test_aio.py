"""evalnb.aio: the lifelong thread that starts runtimes whose helpers must outlive a run's thread."""

from __future__ import annotations

import asyncio
import threading

import pytest

from evalnb.aio import in_lifelong_thread, run_sync


def _where() -> threading.Thread:
    return threading.current_thread()


def test_the_lifelong_thread_is_one_thread_that_outlives_each_run():
    first = run_sync(in_lifelong_thread(_where))
    second = run_sync(in_lifelong_thread(_where))  # another loop, another run
    assert first is second and first is not threading.main_thread()
    assert first.is_alive() and first.daemon


def test_an_error_in_the_lifelong_thread_reaches_the_caller():
    async def fail():
        return await in_lifelong_thread(int, "not a number")

    with pytest.raises(ValueError, match="not a number"):
        asyncio.run(fail())
    assert run_sync(in_lifelong_thread(int, "7")) == 7  # and the thread goes on
