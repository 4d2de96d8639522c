"""Extraction beside an event loop: a reply whose search runs long never stalls the loop's calls.

A regex-based extraction (``regex``, ``regex_last``, ``label_set``) first runs inline with a
short bound (`QUICK_S` of CPU time: any ordinary reply is done well within it); a search that
needs longer is run again in a small thread pool with the full bound
(`extraction.REGEX_TIMEOUT_S`), where the ``regex`` module releases the GIL while it searches.
Running over the full bound raises `extraction.ExtractionTimeout`, which the caller records on
the sample (its error says why), instead of a silent ``None``. Other types do linear work on
at most 100,000 characters and always run inline.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from evalnb.scoring.extraction import ExtractionTimeout, make_extractor, may_run_long

QUICK_S = 0.005  # CPU seconds a search may take inline, on the loop's thread
THREADS = 2  # searches that need longer: at most this many at a time, off the loop

LATER = object()  # `LoopExtractor.now`'s answer when the search must run off the loop

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _threads() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="evalnb-extract")
        return _pool


class LoopExtractor:
    """One task's extraction for a running loop: `now` inline, `later` (awaited) off the loop."""

    def __init__(self, spec: Any) -> None:
        self.full = make_extractor(spec, strict=True)
        self._long = may_run_long(spec)
        self._quick = make_extractor(spec, timeout=QUICK_S, strict=True) if self._long else self.full

    def __call__(self, text: str | None) -> str | None:
        """Extract inline with the full bound (for code with no loop to protect)."""
        return self.full(text)

    def now(self, text: str | None) -> Any:
        """The extracted output, or `LATER` when the search needs more than `QUICK_S`."""
        if not self._long:
            return self.full(text)
        try:
            return self._quick(text)
        except ExtractionTimeout:
            return LATER

    async def later(self, text: str | None) -> str | None:
        """The search with its full bound, in the extraction threads; `ExtractionTimeout` past it."""
        return await asyncio.get_running_loop().run_in_executor(_threads(), self.full, text)

    async def extract(self, text: str | None) -> str | None:
        """`now`, else `later`: what an async caller awaits."""
        value = self.now(text)
        return await self.later(text) if value is LATER else value
