"""Keep Python's cyclic garbage collector out of the hot loops.

Four tools. `gc_paused` turns the collector off for a short bulk loop (packing a sandbox
frame, reading rows): each burst of small containers would otherwise trigger collections
that traverse the whole heap while the caller keeps everything alive. `fewer_collections`
covers a whole run: the heap that exists when the run starts (imports, the notebook's own
objects) is frozen so collections skip it, and young objects are collected after 50,000
allocations instead of 700. At zero model latency that is ~10% of a run's CPU; reference
counting still frees every sample as it goes, and cycles are still collected, just later.

`freeze_at_exit` is the third, and the only one that outlives a run, so it is kept to
processes evalnb owns: the ``evalnb`` command (`own_this_process`), or a script that asks
with ``EVALNB_FAST_EXIT=1``; never a notebook kernel or a user's script by default. Such a
process freezes its heap when it exits, so the interpreter's shutdown collections (several
full passes while modules are torn down) skip the pandas/numpy/pyarrow-sized heap: ~70 ms
of an exit. Python does not promise `__del__` for objects still alive at exit; with the
freeze, objects kept alive only by a reference cycle at that point are not finalized
(refcounted ones still are). ``EVALNB_FAST_EXIT=0`` turns it off in the CLI too.

`quiet_import` is for pandas, which a run imports in the background: no collections while
it loads, and its objects join the run's frozen heap.

`gc_paused` and `fewer_collections` count nesting process-wide (runs in several threads, pool
threads pausing at once): the collector's settings come back when the last user leaves, and
only as they were before. Freezing cannot be undone in part (`gc.unfreeze` thaws every
frozen object), so when the caller has frozen objects of its own (`gc.get_freeze_count()`
above 0), a run does not freeze at all and only raises the young-generation threshold.
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
_froze = False  # this run froze the heap (the caller had frozen nothing): it thaws it again
_exit_hook = False
_owned = False  # set by the evalnb command: this whole process is evalnb's


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
    global _runs, _saved_threshold, _froze
    with _lock:
        if _runs == 0:
            _saved_threshold = gc.get_threshold()
            _froze = gc.get_freeze_count() == 0
            if _froze:
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
                if _froze:
                    gc.unfreeze()
                    _froze = False


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
            if _runs > 0 and _froze:
                gc.freeze()


def own_this_process() -> None:
    """Called by the evalnb command: process-wide shortcuts (the exit freeze) are allowed."""
    global _owned
    _owned = True


def fast_exit_wanted() -> bool:
    """``EVALNB_FAST_EXIT`` decides when set; otherwise only a process evalnb owns."""
    value = os.environ.get("EVALNB_FAST_EXIT", "").strip().lower()
    if value in ("0", "false", "no", "off"):
        return False
    return value in ("1", "true", "yes", "on") or _owned


def freeze_at_exit() -> None:
    """Once per process, where allowed: freeze the heap at exit so shutdown skips it (see above)."""
    global _exit_hook
    with _lock:
        if _exit_hook or not fast_exit_wanted():
            return
        _exit_hook = True
    atexit.register(gc.freeze)
