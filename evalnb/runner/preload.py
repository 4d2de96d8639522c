"""Import the model-client code, then pandas, in a background thread from the moment a run is asked for.

pandas (~0.3-0.45 s of CPU with pyarrow, for RunResult's frames) loads while the run checks
its options, opens its record, reads its rows and waits for a sandbox worker. Started at
`evalnb.run` / `arun` / `resume` rather than when the engine starts, the import overlaps the
plan checks and the engine's own imports too. Calls do not wait for it against a server that
takes its time (the import hides in the waits for replies: ~0.3 s less per run at 50 ms); once a
reply comes back fast, the run is CPU-bound and new calls wait for `ready` (`RunContext`), since
the import beside fast calls cost more CPU than before them (benchmarks/README.md). In a
notebook pandas is usually loaded already: no thread, no wait.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable

from evalnb._gc import fewer_collections, quiet_import

_lock = threading.Lock()
_started = False
_done = threading.Event()
_waiters: list[Callable[[], None]] = []


def _loaded() -> bool:
    return "pandas" in sys.modules and "evalnb.providers.client" in sys.modules


def start() -> None:
    """Start the imports in the background once per process (later calls do nothing)."""
    global _started
    with _lock:
        if _started or _done.is_set():
            return
        if _loaded():
            _done.set()
            return
        _started = True
    threading.Thread(target=_load, name="evalnb-preload", daemon=True).start()


def ready(loop: asyncio.AbstractEventLoop) -> asyncio.Future:
    """A future of `loop`, done once the imports are (starts them if nobody has)."""
    start()
    done = loop.create_future()

    def finish() -> None:
        if not done.done():
            done.set_result(None)

    def wake() -> None:
        try:
            loop.call_soon_threadsafe(finish)
        except RuntimeError:  # the run ended (and closed its loop) first
            pass

    with _lock:
        if not _done.is_set():
            _waiters.append(wake)
            return done
    done.set_result(None)
    return done


def _load() -> None:
    try:
        import evalnb.providers.client  # noqa: F401 - needed first

        # the run's collector settings hold until the import is done, even past a short run
        with fewer_collections(), quiet_import():
            import pandas  # noqa: F401
    except ImportError:  # pragma: no cover - both are dependencies
        pass
    finally:
        with _lock:
            _done.set()
            waiters, _waiters[:] = list(_waiters), []
        for wake in waiters:
            wake()
