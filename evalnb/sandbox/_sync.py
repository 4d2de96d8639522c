"""Run a coroutine to completion from plain code, even when an event loop is already running.

Jupyter runs cells inside a live loop, where ``asyncio.run`` refuses to start; there the
coroutine runs on a helper thread with a loop of its own. The sandbox pool is not bound to
any loop, so either path can use it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """``asyncio.run(make())``, on a helper thread when this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(make))
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(_await(make))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="evalnb-sync", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


async def _await(make: Callable[[], Awaitable[T]]) -> T:
    return await make()
