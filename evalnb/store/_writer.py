"""Group commit: finished samples are handed over in O(1) and committed in batches.

The runner calls `add()` from its event loop; a background thread (with its own SQLite
connection) commits whatever has arrived every `interval_s` (default 50 ms), or at once when
someone calls `flush()`. A producer that hands over `max_batch` items faster than that
commits the batch itself (a ~20 ms pause), which is quicker than waiting for the thread.

What "written as it finishes" means for a crash: everything handed over more than about
`interval_s` plus one commit (~100 ms in all) before the process dies is on disk; after
`flush()` returns, everything handed over before the call is. A write error stops the writer
and is raised by the next `add()`/`flush()`/`close()`, so it cannot go unnoticed.

Commits from one writer land in the order things were handed over. Writes through another
connection (`Store.write_samples`, another writer) are not ordered against them, so give
each run one writer.
"""

from __future__ import annotations

import atexit
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from evalnb.errors import EvalnbError
from evalnb.redaction import Redactor
from evalnb.store._codec import Op, SampleEncoder, encode_output, write_ops
from evalnb.store._reuse import copy_ops


class StoreWriteError(EvalnbError):
    """The background writer could not commit; the samples it held were not saved."""


WAL_CHECKPOINT_PAGES = 10_000  # the writer's automatic checkpoint, in pages (4 KB each)


class StoreWriter:
    """Buffers samples and cache entries and commits them from a background thread.

    Use as a context manager or call `close()`; `flush()` blocks until everything handed over
    so far is committed. `add()` blocks only when `max_pending` items are already waiting
    (back-pressure instead of unbounded memory).
    """

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        redactor: Redactor,
        *,
        run_id: str | None = None,
        columns: Any = None,
        interval_s: float = 0.05,
        max_batch: int = 2000,
        max_pending: int = 50_000,
    ) -> None:
        if interval_s < 0 or max_batch < 1 or max_pending < 1:
            raise ValueError("interval_s must be >= 0, max_batch and max_pending >= 1")
        self.run_id = run_id
        self._interval = interval_s
        self._max_batch = max_batch
        self._max_pending = max_pending
        self._cond = threading.Condition()
        self._commit_lock = threading.Lock()  # one thread at a time uses the connection
        self._pending: deque[Op] = deque()
        self._queued = 0  # ops ever handed over
        self._committed = 0  # ops committed
        self._flush_to = 0  # a flush() is waiting for _committed to reach this
        self._error: BaseException | None = None
        self._error_reported = False
        self._closing = False
        self._closed = False
        self._redactor = redactor
        self._columns = columns  # the samples' columns (`Store(sample_class=...)`): None for `Sample`'s
        self._encoder = SampleEncoder(redactor) if columns is None else SampleEncoder(redactor, columns)
        self._encode_lock = threading.Lock()  # encode + enqueue in one step: queue order = encoder's memory order
        self._conn = connect()
        # The writer reads only the B-tree pages its inserts land on: through its own page cache
        # (32 MB), not the readers' 256 MB memory map, whose pages would stay resident in this
        # process for as long as the writer lives (a 1M-sample run: +256 MB of RSS).
        self._conn.execute("PRAGMA mmap_size = 0")
        # Checkpoint the WAL every ~40 MB instead of SQLite's 4 MB: a run's writes then copy
        # fewer pages twice (~7 us a sample less writer CPU at 20,000 samples, benchmarks/README.md)
        self._conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
        self.checkpointed: threading.Thread | None = None  # set by close(): the background checkpoint
        self._thread = threading.Thread(target=self._loop, name="evalnb-store-writer", daemon=True)
        self._thread.start()
        atexit.register(self._at_exit)

    # ---- handing over -------------------------------------------------------------------
    def add(self, sample: Mapping[str, Any]) -> None:
        """Queue one sample (UPSERT); validation errors raise here, on the caller's thread."""
        with self._encode_lock:
            self._enqueue(self._encoder.encode_many([sample], self.run_id, int(time.time())))

    def add_samples(self, samples: Iterable[Mapping[str, Any]]) -> None:
        """Queue several samples; if any is malformed, none is queued."""
        with self._encode_lock:
            self._enqueue(self._encoder.encode_many(samples, self.run_id, int(time.time())))

    def put_output(self, output: Mapping[str, Any]) -> None:
        """Queue one output-cache entry (`put_outputs` of one, without its lists: once per call)."""
        op = encode_output(output, int(time.time()), self._redactor, self.run_id)
        if op is not None:
            with self._encode_lock:
                self._enqueue([op])

    def put_outputs(self, outputs: Iterable[Mapping[str, Any]]) -> None:
        """Queue output-cache entries; entries carrying an `error` are skipped."""
        now = int(time.time())
        ops = [op for op in (encode_output(o, now, self._redactor, self.run_id) for o in outputs) if op is not None]
        with self._encode_lock:
            self._enqueue(ops)

    def copy_samples(self, from_run: str, task_id: str, model: str, epoch: int, indexes: list[int]) -> None:
        """Queue a copy of `from_run`'s completed samples `indexes` of (task, model, epoch) into this run."""
        if not indexes:
            return
        if self.run_id is None:
            raise ValueError("copy_samples needs a writer made for a run (Store.writer(run_id))")
        ops = copy_ops(from_run, self.run_id, task_id, model, epoch, list(indexes), int(time.time()), self._columns)
        with self._encode_lock:
            self._enqueue(ops)

    def _enqueue(self, ops: list[Op]) -> None:
        if not ops:
            return
        with self._cond:
            self._check()
            while len(self._pending) >= self._max_pending and self._error is None:
                self._cond.wait()
            self._check()
            was_empty = not self._pending
            self._pending.extend(ops)
            self._queued += len(ops)
            full = len(self._pending) >= self._max_batch
            if was_empty:
                self._cond.notify_all()
        if full:
            # A producer this fast would otherwise spend its time handing the GIL back and forth
            # with the writer thread (sqlite releases it on every row): it commits its own backlog.
            self._commit_batch()
            if self._error is not None:
                self._raise_error()

    def _check(self) -> None:
        if self._error is not None:
            self._raise_error()
        if self._closing:
            raise StoreWriteError("the store writer is closed")

    # ---- waiting ----------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Items handed over and not yet committed."""
        with self._cond:
            return self._queued - self._committed

    @property
    def committed(self) -> int:
        """Items committed since this writer started."""
        with self._cond:
            return self._committed

    def flush(self, timeout: float | None = None) -> None:
        """Block until everything handed over before this call is committed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            target = self._queued
            self._flush_to = max(self._flush_to, target)
            self._cond.notify_all()
            while self._committed < target and self._error is None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"store flush timed out with {target - self._committed} items pending")
                self._cond.wait(remaining)
            if self._error is not None:
                self._raise_error()

    def _raise_error(self) -> None:
        self._error_reported = True
        raise StoreWriteError(f"the store writer stopped: {self._error}") from self._error

    def close(self) -> None:
        """Flush, stop the thread and close its connection. Safe to call twice.

        Raises `StoreWriteError` if the writer failed and no earlier call has said so.
        """
        if self._closed:
            return
        try:
            if self._thread.is_alive():
                self.flush()
            elif self._error is not None and not self._error_reported:
                self._raise_error()
        finally:
            with self._cond:
                self._closing = True
                self._cond.notify_all()
            self._thread.join()
            self._closed = True
            atexit.unregister(self._at_exit)
            self.checkpointed = _checkpoint_and_close(self._conn)

    def _at_exit(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown; nothing left to tell
            pass

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- committing ---------------------------------------------------------------------------
    def _commit_batch(self) -> None:
        """Commit up to `max_batch` pending items on the calling thread, oldest first.

        Taking the batch and writing it happen under one lock, so batches commit in the order
        they were handed over whichever thread commits them. A failure stops the writer.
        """
        with self._commit_lock:
            with self._cond:
                if self._error is not None or not self._pending:
                    return
                n = min(len(self._pending), self._max_batch)
                batch = [self._pending.popleft() for _ in range(n)]
            try:
                write_ops(self._conn, batch)
            except BaseException as exc:  # noqa: BLE001 - raised to the caller by _check/flush/close
                with self._cond:
                    self._error = exc
                    self._pending.clear()
                    self._cond.notify_all()
                return
            with self._cond:
                self._committed += n
                self._cond.notify_all()

    def _loop(self) -> None:
        """The writer thread: wait for items, let more gather for `interval_s`, commit."""
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                if not self._pending:
                    return  # closing and drained
                deadline = time.monotonic() + self._interval
                while (
                    len(self._pending) < self._max_batch
                    and self._flush_to <= self._committed
                    and not self._closing
                ):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
            self._commit_batch()
            if self._error is not None:
                return


def _checkpoint_and_close(conn: Any) -> threading.Thread:
    """Copy the run's writes from the WAL into the database file, then close, in the background.

    SQLite does this when the last connection to the file closes, which is usually the
    process's exit (a RunResult keeps the store open): ~10 ms of I/O and fsync then, on the
    critical path. Here it overlaps whatever the caller does next. A PASSIVE checkpoint never
    blocks readers or writers; if the process ends first, the WAL simply stays (it is valid).
    """

    def run() -> None:
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except Exception:  # noqa: BLE001 - best effort: the WAL stays and is checkpointed later
            pass
        finally:
            conn.close()

    thread = threading.Thread(target=run, name="evalnb-store-checkpoint", daemon=True)
    thread.start()
    return thread
