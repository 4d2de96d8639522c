"""Pause the cyclic garbage collector around short bulk loops in the parent.

Packing a frame or normalising a batch of results allocates thousands of small containers
while the caller keeps every sample alive; each allocation burst then triggers full
collections that traverse the whole heap, tripling the per-sample cost. Pausing only the
*cyclic* collector (reference counting still frees everything) for those few milliseconds
avoids that. A process-wide counter makes overlapping pauses from several pool threads
safe: the collector comes back on when the last one ends, and only if it was on before.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Keep the cyclic collector off inside the block (nesting and threads are fine)."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
