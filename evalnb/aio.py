"""Run a coroutine to completion from sync code, also inside Jupyter's running event loop.

`asyncio.run` refuses to start while a loop is running in the thread (always the case in a
notebook kernel), and `nest_asyncio` patches asyncio globally. Instead, when a loop is
running, the coroutine runs on a fresh loop in a helper thread and this thread waits for it.
A KeyboardInterrupt (the notebook's interrupt button, Ctrl-C) while waiting is forwarded to
the coroutine as cancellation, and we still wait for it to wind down, so it can save its
work and return a partial result instead of dying half-way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import queue
import threading
from typing import Any, Callable, Coroutine, TypeVar

T = TypeVar("T")


def loop_is_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def new_loop() -> asyncio.AbstractEventLoop:
    """The loop evalnb's own runs use: uvloop when it is installed (its C transports make a
    local model call several times cheaper), else asyncio's. ``EVALNB_LOOP=asyncio`` forces
    the standard loop. Code awaiting `evalnb.arun` in its own loop keeps that loop."""
    if os.environ.get("EVALNB_LOOP", "").lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` and return its result, whether or not this thread has a running loop."""
    if not loop_is_running():
        return _run_here(coro)
    return _run_in_thread(coro)


def _run_here(coro: Coroutine[Any, Any, T]) -> T:
    # asyncio.Runner turns the first Ctrl-C into cancelling the task (which saves its work and
    # returns a partial result) instead of a KeyboardInterrupt raised in whatever task happens
    # to be running, which would kill that task half-way; a second Ctrl-C raises at once.
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(coro)


def _run_in_thread(coro: Coroutine[Any, Any, T]) -> T:
    box: dict[str, Any] = {}
    ready, finished = threading.Event(), threading.Event()
    loop = new_loop()

    def target() -> None:
        asyncio.set_event_loop(loop)
        task = loop.create_task(coro)
        box["task"] = task
        ready.set()
        try:
            box["result"] = loop.run_until_complete(task)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc
        finally:
            _shutdown(loop)
            finished.set()

    thread = threading.Thread(target=target, name="evalnb-run", daemon=True)
    thread.start()
    ready.wait()
    # Wait on an Event, not thread.join(): a KeyboardInterrupt inside join() can leave the
    # thread looking finished while it still runs (CPython 3.11, bpo-45274's fix).
    while not finished.is_set():
        try:
            finished.wait(0.1)
        except KeyboardInterrupt:
            try:
                loop.call_soon_threadsafe(box["task"].cancel)
            except RuntimeError:  # the loop closed meanwhile: nothing left to cancel
                pass
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


def _shutdown(loop: asyncio.AbstractEventLoop) -> None:
    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


_lifelong: queue.SimpleQueue | None = None
_lifelong_lock = threading.Lock()


async def in_lifelong_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` in one thread that lives as long as the process; await the result.

    For starting runtimes that spawn long-lived helpers (Ray's ``ray.init()``): Linux's
    parent-death signal, which Ray gives its GCS and raylet, fires when the spawning *thread*
    exits, so a call from `asyncio.to_thread`'s worker or a run's own thread (`run_sync` in a
    notebook) would take those helpers down when that thread ends. The thread never exits.
    """
    global _lifelong
    with _lifelong_lock:
        if _lifelong is None:
            _lifelong = queue.SimpleQueue()
            threading.Thread(target=_serve_forever, args=(_lifelong,), name="evalnb-lifelong", daemon=True).start()
    future: concurrent.futures.Future = concurrent.futures.Future()
    _lifelong.put((future, fn, args))
    return await asyncio.wrap_future(future)


def _serve_forever(calls: queue.SimpleQueue) -> None:
    while True:
        future, fn, args = calls.get()
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting caller
            future.set_exception(exc)
