"""Keep Python's cyclic garbage collector out of the hot loops.

Four tools. `gc_paused` turns the collector off for a short bulk loop (packing a sandbox
frame, reading rows): each burst of small containers would otherwise trigger collections
that traverse the whole heap while the caller keeps everything alive. `fewer_collections`
covers a whole run: the heap that exists when the run starts (imports, the notebook's own
objects) is frozen so collections skip it, and young objects are collected after 50,000
allocations instead of 700. At zero model latency that is ~10% of a run's CPU; reference
counting still frees every sample as it goes, and cycles are still collected, just later.

`freeze_at_exit` is the third: a process that ran evalnb freezes its heap when it exits, so
the interpreter's shutdown collections (several full passes while modules are torn down)
skip the pandas/numpy/pyarrow-sized heap: ~70 ms of a script's exit. Python does not promise
`__del__` for objects still alive at exit; with the freeze, objects kept alive only by a
reference cycle at that point are not finalized (refcounted ones still are). Set
``EVALNB_FAST_EXIT=0`` to keep the usual shutdown.

`quiet_import` is for pandas, which a run imports in the background: no collections while
it loads, and its objects join the run's frozen heap.

`gc_paused` and `fewer_collections` count nesting process-wide (runs in several threads, pool
threads pausing at once): the collector's settings come back when the last user leaves, and
only as they were before.
"""

from __future__ import annotations

import atexit
import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

RUN_GEN0_THRESHOLD = 50_000

_lock = threading.Lock()
_paused = 0
_was_enabled = False
_runs = 0
_saved_threshold: tuple[int, ...] = ()
_exit_hook = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Keep the cyclic collector off inside the block (nesting and threads are fine)."""
    global _paused, _was_enabled
    with _lock:
        if _paused == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _lock:
            _paused -= 1
            if _paused == 0 and _was_enabled:
                gc.enable()


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Freeze the existing heap and collect young objects rarely while the block runs."""
    global _runs, _saved_threshold
    with _lock:
        if _runs == 0:
            _saved_threshold = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(max(RUN_GEN0_THRESHOLD, _saved_threshold[0]), *_saved_threshold[1:])
        _runs += 1
    try:
        yield
    finally:
        with _lock:
            _runs -= 1
            if _runs == 0:
                gc.set_threshold(*_saved_threshold)
                gc.unfreeze()


@contextmanager
def quiet_import() -> Iterator[None]:
    """For a big import during a run (pandas, in the run's preload thread).

    The collector stays off while the import runs, and if a run is still going afterwards,
    the modules' objects are frozen with the rest of the run's heap (`fewer_collections` thaws
    it all when the run ends). Otherwise each of the ~300,000 long-lived objects pandas, numpy
    and pyarrow create is traversed by a young and then a middle-aged collection during the
    run: 20-35 ms of a fast run, holding the interpreter lock.
    """
    with gc_paused():
        yield
        with _lock:  # before the collector is back: its first pass would traverse everything new
            if _runs > 0:
                gc.freeze()


def freeze_at_exit() -> None:
    """Once per process: freeze the heap at exit so shutdown skips collecting it (see above)."""
    global _exit_hook
    with _lock:
        if _exit_hook or os.environ.get("EVALNB_FAST_EXIT", "1").strip().lower() in ("0", "false", "no", "off"):
            return
        _exit_hook = True
    atexit.register(gc.freeze)
