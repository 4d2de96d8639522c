"""The pool of sandbox workers that serves a run: batching, fault recovery, the model bridge.

A big batch of calls is cut into frames that pool threads pull from a shared cursor, one
worker per thread, so fast and slow calls balance out. When a worker dies or stalls, its
progress slot names the call in flight: exactly that call is failed, and the rest of the
frame (including calls whose results were still buffered in the dead worker) goes to a fresh
worker. Threads (not asyncio pipes) do the I/O, which keeps
the pool independent of any event loop: it works from a notebook's running loop, from
``asyncio.run`` and from the sync wrappers alike.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import SandboxError
from . import protocol
from evalnb._gc import gc_paused
from evalnb.aio import run_sync
from .bridging import Bridge, answer_bridge, bridge_caller
from .isolation import filesystem_wanted, namespaces_wanted, warn_if_unconfined
from .job import CallResult, CodeLoadError, Job
from .process import START_TIMEOUT_SECONDS, Cancelled, WorkerGone, WorkerProcess

MAX_FRAME_CALLS = 2000
FRAME_SECONDS = 0.01  # once a job's calls are known to be fast: about this much work per frame
MAX_CONSECUTIVE_LOSSES = 3
SEND_TIMEOUT_SECONDS = 60.0
STALL_CHECK_SECONDS = 0.25  # how often a silent worker's progress slot is looked at
SPREAD_SECONDS = 0.02  # at least this long a batch's extra thread waits for a busy worker (see _checkout)
START_WAIT_SECONDS = START_TIMEOUT_SECONDS  # how long a caller waits for a worker another is starting


def grace_seconds(timeout: float) -> float:
    """How long past a call's timeout the parent waits before killing a silent worker."""
    return 1.0 + 0.05 * timeout


class _Shared:
    """Pool state the finalizer may touch (it must not reference the pool itself)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)  # a worker came free, started, or the pool closed
        self.idle: list[WorkerProcess] = []
        self.busy: set[WorkerProcess] = set()
        self.starting = 0
        self.start_seconds = 0.0  # how long the latest worker took to start
        self.closed = False
        self.owner_pid = os.getpid()


def _shutdown(shared: _Shared, executor: ThreadPoolExecutor) -> None:
    if os.getpid() != shared.owner_pid:  # a forked child must not kill its parent's workers
        return
    with shared.lock:
        shared.closed = True
        idle, busy = list(shared.idle), list(shared.busy)
        shared.idle.clear()
        shared.changed.notify_all()
    for worker in idle:
        worker.close(grace=0.2)
    for worker in busy:
        worker.kill()
    executor.shutdown(wait=False, cancel_futures=True)


class _Batch:
    """One ``run`` call in progress: the calls, their results and the shared frame cursor."""

    def __init__(self, job: Job, wire_job: dict, calls: Sequence[list], step: int) -> None:
        self.job, self.wire_job, self.calls, self.step = job, wire_job, calls, step
        self.results: list[CallResult | None] = [None] * len(calls)
        self.lock = threading.Lock()
        self.next_index = 0
        self.stop = threading.Event()  # no new frames (a fatal error or a fail-fast failure)
        self.cancel = threading.Event()  # the caller gave up: kill workers now
        self.broken: str | None = None
        self.prefetch = True  # one thread runs the batch: it may take the next frame early

    def take(self) -> tuple[int, int] | None:
        with self.lock:
            if self.stop.is_set() or self.next_index >= len(self.calls):
                return None
            lo = self.next_index
            self.next_index = min(lo + self.step, len(self.calls))
            return lo, self.next_index

    def exhausted(self) -> bool:
        """No frame left to take (or the batch stopped)."""
        with self.lock:
            return self.stop.is_set() or self.cancel.is_set() or self.next_index >= len(self.calls)

    def frame(self, lo: int, hi: int) -> bytes:
        with gc_paused():  # a burst of short-lived containers; see _gc.py
            return protocol.encode_lenient(["run", self.wire_job, lo, self.calls[lo:hi]])


class _Lost(Exception):
    """Call ``index`` killed its worker; calls from ``resume`` up to it finished but must run again."""

    def __init__(self, index: int, resume: int, message: str):
        super().__init__(message)
        self.index, self.resume, self.message = index, resume, message


class SandboxPool:
    """Long-lived worker processes that run user code; safe to share across tasks of a run.

    ``size`` workers at most (default: CPU count), each limited to ``memory_mb`` of address
    space and, if given, ``cpu_seconds`` of CPU per call. Use as a (async) context manager or
    call :meth:`close`; leftover workers are killed when the pool is collected or at exit.
    ``namespaces`` (default: on unless ``EVALNB_SANDBOX_NAMESPACES=0``) confines workers to
    their own PID, mount and IPC namespaces; ``network=False`` (the default) also gives them a
    network namespace with no network in it. ``filesystem`` (default: on unless
    ``EVALNB_SANDBOX_FILESYSTEM=0``) gives each worker a root of its own: read-only what Python
    needs and a private ``/tmp``, ``HOME`` and ``/dev/shm`` of ``scratch_mb`` (without
    namespaces: a folder the parent counts, see ``scratch.py``). ``max_threads`` caps a worker's
    threads, ``max_files`` its open descriptors (each can hold socket buffers no other cap
    counts), ``max_result_mb`` what one call returns (scores, judge, log). See
    ``isolation.py`` for what holds where.
    """

    def __init__(
        self,
        size: int | None = None,
        *,
        memory_mb: int = 2048,
        cpu_seconds: int | None = None,
        file_mb: int = 1024,
        seccomp: bool = True,
        namespaces: bool | None = None,
        network: bool = False,
        filesystem: bool | None = None,
        scratch_mb: int = 512,
        max_threads: int | None = 256,
        max_files: int | None = 256,
        max_result_mb: float = 16,
    ) -> None:
        size = (os.cpu_count() or 1) if size is None else size
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        if memory_mb is not None and memory_mb < 64:
            raise ValueError(f"memory_mb must be at least 64, got {memory_mb}")
        if cpu_seconds is not None and cpu_seconds <= 0:
            raise ValueError(f"cpu_seconds must be positive, got {cpu_seconds}")
        self.size = size
        self.memory_mb = memory_mb
        self.cpu_seconds = cpu_seconds
        self.file_mb = file_mb
        self._seccomp = seccomp
        # Asked for explicitly (namespaces=False) nothing is said; left to the default, a worker
        # without namespaces is warned about once, whatever the reason.
        self._namespaces = namespaces_wanted() if namespaces is None else namespaces
        self._warn_unconfined = namespaces is None or namespaces
        self.network = network
        self._filesystem = filesystem_wanted() if filesystem is None else filesystem
        self.scratch_mb = scratch_mb
        self.max_threads = max_threads
        self.max_files = max_files
        self.max_result_bytes = int(max_result_mb * 1024 * 1024)
        self.workers_started = 0
        self.isolation: dict[str, Any] | None = None
        self._shared = _Shared()
        self._call_seconds: dict[str, float] = {}  # per code key: recent seconds per call, frame I/O included
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="evalnb-sandbox")
        self._finalizer = weakref.finalize(self, _shutdown, self._shared, self._executor)

    # -- public API ----------------------------------------------------------------------
    async def run(self, job: Job, calls: Sequence[list], *, bridge: Bridge | None = None) -> list[CallResult]:
        """Run ``fn(*args)`` for each argument list in ``calls``; results keep the input order.

        ``calls`` is only ever sliced (one slice per frame, encoded right away), so a lazy
        sequence can build the arguments frame by frame instead of all up front.

        Raises CodeLoadError when the code does not load or lacks the function; every other
        failure (exception, timeout, crash, bad value) is that call's ``CallResult.error``.
        """
        if not calls:
            return []
        self._check_open()
        loop = asyncio.get_running_loop()
        step = self._frame_size(job, len(calls))
        batch = _Batch(job, job.wire(self.cpu_seconds), calls, step)
        bridge_call = bridge_caller(bridge, loop) if bridge is not None else None
        threads = min(self.size, math.ceil(len(calls) / step))
        per_call = self._call_seconds.get(job.code.key)
        if per_call is not None and per_call * len(calls) < SPREAD_SECONDS:
            threads = 1  # known-fast work, done before another worker could start
        batch.prefetch = threads == 1
        futures = [loop.run_in_executor(self._executor, self._drive, batch, bridge_call) for _ in range(threads)]
        try:
            outcomes = await asyncio.gather(*futures, return_exceptions=True)
        except BaseException:
            batch.cancel.set()
            raise
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if errors:
            raise next((e for e in errors if isinstance(e, CodeLoadError)), errors[0])
        missing = "not run: " + (batch.broken or "the batch stopped early")
        return [r if r is not None else CallResult(False, None, missing, skipped=True) for r in batch.results]

    def _frame_size(self, job: Job, n: int) -> int:
        """Calls per frame for a batch of `n`.

        Unknown or slow code: about eight frames per worker, so a slow call holds up little
        else and the workers share the work evenly. Code whose calls are known to be fast
        (an exact match takes microseconds): frames of about `FRAME_SECONDS` of work, but
        still spread over the workers — a frame costs ~0.1 ms of I/O, which would otherwise
        dwarf the calls when a run hands over a few samples at a time.
        """
        size = math.ceil(n / (self.size * 8))
        per_call = self._call_seconds.get(job.code.key)
        if per_call is not None:
            by_time = round(FRAME_SECONDS / max(per_call, 1e-7))
            size = max(size, min(by_time, math.ceil(n / self.size)))
        return max(1, min(MAX_FRAME_CALLS, size))

    def _observe(self, job: Job, calls: int, seconds: float) -> None:
        if calls > 0:
            old = self._call_seconds.get(job.code.key)
            now = seconds / calls
            self._call_seconds[job.code.key] = now if old is None else 0.7 * old + 0.3 * now

    async def check(self, job: Job) -> None:
        """Load the job's code in a worker and find its function; raises CodeLoadError if that fails."""
        self._check_open()
        await asyncio.get_running_loop().run_in_executor(self._executor, self._check, job)

    def run_sync(self, job: Job, calls: Sequence[list], *, bridge: Bridge | None = None) -> list[CallResult]:
        """:meth:`run` for plain (non-async) code; works inside a running loop too."""
        return run_sync(self.run(job, calls, bridge=bridge))

    async def warm(self, count: int | None = None) -> None:
        """Start workers ahead of time so the first batch does not wait for them.

        Up to `count` (default: the pool size) in all: workers already running or starting count.
        """
        await self.warm_soon(count)

    def warm_soon(self, count: int | None = None) -> asyncio.Future:
        """:meth:`warm`, but the workers start now rather than when the caller next awaits.

        A run calls this before it opens its store record and reads its rows, so the worker's
        ~60 ms start overlaps that work. The future is done when the workers are ready.
        """
        self._check_open()
        count = self.size if count is None else min(count, self.size)
        shared = self._shared
        with shared.lock:
            missing = count - len(shared.idle) - len(shared.busy) - shared.starting
        loop = asyncio.get_running_loop()
        return asyncio.gather(*[loop.run_in_executor(self._executor, self._warm_one, count)
                                for _ in range(max(0, missing))])

    def _warm_one(self, count: int) -> None:
        """Start one more worker unless `count` are running or starting by now."""
        shared = self._shared
        with shared.lock:
            if shared.closed or len(shared.idle) + len(shared.busy) + shared.starting >= count:
                return
            shared.starting += 1
        self._checkin(self._launch())

    def close(self) -> None:
        """Stop every worker and remove their temp folders. Safe to call twice."""
        self._finalizer()

    async def aclose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    @property
    def closed(self) -> bool:
        return self._shared.closed

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> SandboxPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def worker_pids(self) -> list[int]:
        """Pids of the live workers, as this process sees them (for tests and diagnostics)."""
        with self._shared.lock:
            return [w.pid for w in [*self._shared.idle, *self._shared.busy] if not w.dead]

    def worker_dirs(self) -> list[str]:
        """The live workers' private folders (their cwd and HOME): how user code can tell
        workers apart, since in its own PID namespace every worker is process 1."""
        with self._shared.lock:
            return [w.workdir for w in [*self._shared.idle, *self._shared.busy] if not w.dead]

    # -- workers -------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._shared.closed:
            raise SandboxError("the sandbox pool is closed")

    def _checkout(self, batch: _Batch | None = None) -> WorkerProcess | None:
        """A worker for the caller: an idle one, else a new one.

        Starting a worker costs ~30-80 ms of another process's CPU, more than a whole batch
        of fast calls, so the caller first waits for one that is starting, then for a busy
        one to come free, for as long as the latest worker took to start (at least
        `SPREAD_SECONDS`): a new worker would not be ready sooner. A batch's thread that has
        no frame yet (`batch` given) gives up (None) if the batch's frames are all taken
        meanwhile: fast code runs on the workers there are, and slow code still gets its
        extra workers, one worker start late. (A fixed 20 ms wait started a second worker
        for fast graders whenever a busy event loop delayed the pool thread's reply.)
        """
        shared = self._shared

        def spread_deadline() -> float:
            return time.monotonic() + max(SPREAD_SECONDS, shared.start_seconds)

        spread_until = spread_deadline()
        start_until = time.monotonic() + START_WAIT_SECONDS
        with shared.changed:
            while True:
                self._check_open()
                while shared.idle:
                    worker = shared.idle.pop()
                    if worker.proc.poll() is None:
                        shared.busy.add(worker)
                        return worker
                    worker.kill()
                if batch is not None and batch.exhausted():
                    return None
                now = time.monotonic()
                if shared.starting and now < start_until:
                    shared.changed.wait(min(start_until - now, STALL_CHECK_SECONDS))
                    if not shared.starting:  # it started (and went to its starter): the spread wait begins now
                        spread_until = spread_deadline()
                elif shared.busy and now < spread_until:
                    shared.changed.wait(spread_until - now)
                else:
                    break
            shared.starting += 1
        return self._launch()

    def _launch(self) -> WorkerProcess:
        """Start a worker the caller has already counted in `starting`; it comes back busy."""
        shared = self._shared
        began = time.monotonic()
        try:
            worker = WorkerProcess.start(memory_mb=self.memory_mb, file_mb=self.file_mb, seccomp=self._seccomp,
                                         namespaces=self._namespaces, network=self.network,
                                         filesystem=self._filesystem, scratch_mb=self.scratch_mb,
                                         max_threads=self.max_threads, max_files=self.max_files,
                                         max_result_bytes=self.max_result_bytes)
        except BaseException:
            with shared.changed:
                shared.starting -= 1
                shared.changed.notify_all()
            raise
        with shared.changed:
            shared.starting -= 1
            shared.start_seconds = time.monotonic() - began
            shared.changed.notify_all()
            self.workers_started += 1
            self.isolation = worker.isolation
            if self._warn_unconfined:
                warn_if_unconfined(worker.isolation)
            if shared.closed:
                worker.kill()
                raise SandboxError("the sandbox pool is closed")
            shared.busy.add(worker)
        return worker

    def _checkin(self, worker: WorkerProcess) -> None:
        shared = self._shared
        with shared.lock:
            shared.busy.discard(worker)
            keep = not worker.dead and not shared.closed
            if keep:
                shared.idle.append(worker)
            shared.changed.notify_all()
        if not keep:
            worker.kill()

    def _check(self, job: Job) -> None:
        batch = _Batch(job, job.wire(self.cpu_seconds), [], 1)
        worker = self._checkout()
        try:
            worker.send(batch.frame(0, 0), time.monotonic() + SEND_TIMEOUT_SECONDS)
            self._collect(worker, batch, 0, 0, None)
        except WorkerGone as gone:
            raise CodeLoadError(f"the sandbox worker failed: {gone.reason}") from None
        except _Lost as lost:
            raise CodeLoadError(lost.message) from None
        finally:
            self._checkin(worker)

    # -- one pool thread -------------------------------------------------------------------
    def _drive(self, batch: _Batch, bridge_call: Callable | None) -> None:
        """Pull frames from the batch and run them on one worker, replacing it when it dies."""
        worker: WorkerProcess | None = None
        losses = 0
        retry: list[tuple[int, int]] = []  # spans to run again after a worker was lost, in order
        upcoming: tuple[int, int, bytes] | None = None
        try:
            while not batch.cancel.is_set() and not batch.stop.is_set():
                if worker is None and not retry and upcoming is None:
                    # a worker first, then a frame: a thread that would have to start a
                    # worker waits for a busy one, or finds the frames all taken (see _checkout)
                    worker = self._checkout(batch)
                    if worker is None:
                        break
                if retry:
                    lo, hi = retry.pop(0)
                    frame = batch.frame(lo, hi)
                elif upcoming is not None:
                    (lo, hi, frame), upcoming = upcoming, None
                else:
                    span = batch.take()
                    if span is None:
                        break
                    lo, hi = span
                    frame = batch.frame(lo, hi)
                if worker is None:
                    worker = self._checkout()
                try:
                    sent = time.monotonic()
                    worker.send(frame, sent + SEND_TIMEOUT_SECONDS, batch.cancel)
                    if batch.prefetch and upcoming is None and (span := batch.take()) is not None:
                        # encode the next frame while the worker runs (one thread only: with
                        # more, a prefetched frame could not go to a worker that is free)
                        upcoming = (span[0], span[1], batch.frame(*span))
                    self._collect(worker, batch, lo, hi, bridge_call)
                    self._observe(batch.job, hi - lo, time.monotonic() - sent)
                    losses = 0
                    if worker.dead:
                        self._checkin(worker)
                        worker = None
                except _Lost as lost:
                    self._checkin(worker)
                    worker = None
                    batch.results[lost.index] = CallResult(False, None, lost.message)
                    losses = 1 if lost.index > lo else losses + 1
                    if batch.job.fail_fast:  # the failure is what the caller reports; stop here
                        batch.stop.set()
                        break
                    if losses >= MAX_CONSECUTIVE_LOSSES:
                        batch.broken = f"the sandbox worker failed on {losses} calls in a row (last: {lost.message})"
                        batch.stop.set()
                        break
                    retry[:0] = [s for s in ((lost.resume, lost.index), (lost.index + 1, hi)) if s[0] < s[1]]
                except WorkerGone as gone:  # died while we were sending: nothing ran yet
                    self._checkin(worker)
                    worker = None
                    losses += 1
                    if losses >= MAX_CONSECUTIVE_LOSSES:
                        batch.broken = f"the sandbox worker failed {losses} times in a row ({gone.reason})"
                        batch.stop.set()
                        break
                    retry.insert(0, (lo, hi))
        except CodeLoadError:
            batch.stop.set()
            raise
        except Cancelled:
            return
        finally:
            if worker is not None:
                self._checkin(worker)

    def _collect(self, worker: WorkerProcess, batch: _Batch, lo: int, hi: int, bridge_call: Callable | None) -> None:
        """Read one frame's results into ``batch.results``; raises _Lost or CodeLoadError.

        The worker's messages, in turn: results (``res``), a grader's model call to answer
        (``bridge``), the code loaded (``loaded``), the frame's end (``done``) or a load failure
        (``fatal``). A worker that dies or stalls meanwhile is killed and the frame's calls from
        the first unanswered one are handed back (`_lost`).
        """
        job = batch.job
        limit_ns = int((job.timeout + grace_seconds(job.timeout)) * 1e9)
        expected, loaded = lo, False
        last_event = time.monotonic_ns()  # the slot may still hold an older frame's start time
        bridge_counts: dict[int, int] = {}
        while True:
            try:
                message = _next_message(worker, batch, limit_ns, last_event)
                last_event = time.monotonic_ns()
                op = message[0]
                if op == "res":
                    expected = _take_results(message, batch, expected, hi)
                elif op == "bridge":
                    started = max(worker.progress()[1], last_event) / 1e9
                    answer_bridge(worker, job, message, expected, bridge_counts, bridge_call, started, batch.cancel)
                    last_event = time.monotonic_ns()
                elif op == "loaded":
                    loaded = True
                elif op == "done":
                    if message[1:] != [expected] or (expected != hi and not job.fail_fast):
                        raise WorkerGone("protocol error: frame ended early")
                    return
                elif op == "fatal":
                    raise _load_error(message)
                else:
                    raise WorkerGone(f"protocol error: unknown message {op!r}")
            except WorkerGone as gone:
                _lost(worker, job, gone, loaded, expected, hi)
                return  # every call of the frame had answered; the dead worker is replaced later


def _next_message(worker: WorkerProcess, batch: _Batch, limit_ns: int, last_event: int) -> Any:
    """The worker's next message; WorkerGone("stalled") once it has been silent past its calls' time."""
    while True:
        try:
            return worker.recv(time.monotonic() + STALL_CHECK_SECONDS, batch.cancel)
        except WorkerGone as gone:
            if gone.reason != "deadline":
                raise
            if time.monotonic_ns() - max(worker.progress()[1], last_event) <= limit_ns:
                continue  # silent but within its time: a slow call, not a stuck one
            raise WorkerGone("stalled") from None


def _take_results(message: list, batch: _Batch, expected: int, hi: int) -> int:
    """A ``res`` message's results into ``batch.results`` from `expected` on; the next index expected."""
    results, fail_fast = batch.results, batch.job.fail_fast
    entries = message[2] if len(message) == 3 else None
    if message[1] != expected or type(entries) is not list or expected + len(entries) > hi:
        raise WorkerGone("protocol error: results out of order")
    for entry in entries:
        if type(entry) is not list or len(entry) != 2:
            result = results[expected] = _printed_result(entry)
        elif entry[0] == 1:
            results[expected] = CallResult(True, entry[1])
            expected += 1
            continue
        else:
            result = results[expected] = CallResult(False, None, _error_text(entry[1]))
        if not result.ok and fail_fast:
            batch.stop.set()
        expected += 1
    return expected


def _load_error(message: list) -> CodeLoadError:
    """A ``fatal`` message: the code did not load (a syntax error, a missing function, ...)."""
    error = message[1] if len(message) > 1 and isinstance(message[1], dict) else {}
    line = error.get("line") if isinstance(error.get("line"), int) else None
    return CodeLoadError(_error_text(error), line=line, missing=error.get("type") == "MissingFunction")


def _lost(worker: WorkerProcess, job: Job, gone: WorkerGone, loaded: bool, expected: int, hi: int) -> None:
    """The worker died or stalled: kill it, then raise what the frame lost (returns only if nothing)."""
    index = worker.progress()[0]  # the call in flight, from the shared slot
    worker.kill()
    reason = gone.reason
    if reason == "stalled":
        what = "loading the code" if not loaded else "the call"
        reason = f"{what} timed out after {job.timeout:g} s (the worker stopped responding and was killed)"
    reason += worker.crash_note(job.code.filename)
    if not loaded:
        raise CodeLoadError(f"the code broke the sandbox worker while loading: {reason}") from None
    if expected >= hi:
        return  # every call of the frame had answered
    if not expected <= index < hi:  # died between calls, or a slot user code scribbled on
        index = min(expected, hi - 1)
    raise _Lost(index, expected, reason) from None


def _printed_result(entry: Any) -> CallResult:
    """A result entry with a third element: the text the call printed (see worker.py)."""
    if type(entry) is not list or len(entry) != 3 or type(entry[2]) is not str:
        raise WorkerGone("protocol error: malformed result")
    if entry[0] == 1:
        return CallResult(True, entry[1], log=entry[2])
    return CallResult(False, None, _error_text(entry[1]), log=entry[2])


def _error_text(error: Any) -> str:
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    return "failed (the worker sent no message)"
