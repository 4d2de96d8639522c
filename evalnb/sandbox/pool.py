"""The pool of sandbox workers that serves a run: batching, fault recovery, the model bridge.

A big batch of calls is cut into frames that pool threads pull from a shared cursor, one
worker per thread, so fast and slow calls balance out. Each worker answers with one result
frame per call, so when a worker dies or stalls, exactly the call in flight is failed and the
rest of its frame goes to a fresh worker. Threads (not asyncio pipes) do the I/O, which keeps
the pool independent of any event loop: it works from a notebook's running loop, from
``asyncio.run`` and from the sync wrappers alike.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import math
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import SandboxError
from . import protocol
from ._sync import run_sync
from .job import CallResult, CodeLoadError, Job
from .process import POLL_SECONDS, Cancelled, WorkerGone, WorkerProcess

Bridge = Callable[[str, dict], Awaitable[dict] | dict]
"""``bridge(kind, request) -> reply``: kind is "responses" or "embeddings"; given by the runner."""

MAX_FRAME_CALLS = 2000
MAX_CONSECUTIVE_LOSSES = 3
SEND_TIMEOUT_SECONDS = 60.0
BRIDGE_KINDS = ("responses", "embeddings")


def grace_seconds(timeout: float) -> float:
    """How long past a call's timeout the parent waits before killing a silent worker."""
    return 1.0 + 0.05 * timeout


class _Shared:
    """Pool state the finalizer may touch (it must not reference the pool itself)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[WorkerProcess] = []
        self.busy: set[WorkerProcess] = set()
        self.closed = False
        self.owner_pid = os.getpid()


def _shutdown(shared: _Shared, executor: ThreadPoolExecutor) -> None:
    if os.getpid() != shared.owner_pid:  # a forked child must not kill its parent's workers
        return
    with shared.lock:
        shared.closed = True
        idle, busy = list(shared.idle), list(shared.busy)
        shared.idle.clear()
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

    def take(self) -> tuple[int, int] | None:
        with self.lock:
            if self.stop.is_set() or self.next_index >= len(self.calls):
                return None
            lo = self.next_index
            self.next_index = min(lo + self.step, len(self.calls))
            return lo, self.next_index

    def frame(self, lo: int, hi: int) -> bytes:
        return protocol.encode_lenient(["run", self.wire_job, lo, self.calls[lo:hi]])


class _Lost(Exception):
    def __init__(self, index: int, message: str, progressed: bool):
        super().__init__(message)
        self.index, self.message, self.progressed = index, message, progressed


class SandboxPool:
    """Long-lived worker processes that run user code; safe to share across tasks of a run.

    ``size`` workers at most (default: CPU count), each limited to ``memory_mb`` of address
    space and, if given, ``cpu_seconds`` of CPU per call. Use as a (async) context manager or
    call :meth:`close`; leftover workers are killed when the pool is collected or at exit.
    """

    def __init__(
        self,
        size: int | None = None,
        *,
        memory_mb: int = 2048,
        cpu_seconds: int | None = None,
        file_mb: int = 1024,
        seccomp: bool = True,
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
        self.workers_started = 0
        self.isolation: dict[str, Any] | None = None
        self._shared = _Shared()
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
        step = max(1, min(MAX_FRAME_CALLS, math.ceil(len(calls) / (self.size * 8))))
        batch = _Batch(job, job.wire(self.cpu_seconds), calls, step)
        bridge_call = _bridge_caller(bridge, loop) if bridge is not None else None
        threads = min(self.size, math.ceil(len(calls) / step))
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

    async def check(self, job: Job) -> None:
        """Load the job's code in a worker and find its function; raises CodeLoadError if that fails."""
        self._check_open()
        await asyncio.get_running_loop().run_in_executor(self._executor, self._check, job)

    def run_sync(self, job: Job, calls: Sequence[list], *, bridge: Bridge | None = None) -> list[CallResult]:
        """:meth:`run` for plain (non-async) code; works inside a running loop too."""
        return run_sync(lambda: self.run(job, calls, bridge=bridge))

    async def warm(self, count: int | None = None) -> None:
        """Start workers ahead of time so the first batch does not wait for them."""
        count = self.size if count is None else min(count, self.size)
        loop = asyncio.get_running_loop()
        workers = await asyncio.gather(*[loop.run_in_executor(self._executor, self._checkout) for _ in range(count)])
        for worker in workers:
            self._checkin(worker)

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
        """Pids of the live workers (for tests and diagnostics)."""
        with self._shared.lock:
            return [w.pid for w in [*self._shared.idle, *self._shared.busy] if not w.dead]

    # -- workers -------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._shared.closed:
            raise SandboxError("the sandbox pool is closed")

    def _checkout(self) -> WorkerProcess:
        shared = self._shared
        with shared.lock:
            self._check_open()
            while shared.idle:
                worker = shared.idle.pop()
                if worker.proc.poll() is None:
                    shared.busy.add(worker)
                    return worker
                worker.kill()
        worker = WorkerProcess.start(memory_mb=self.memory_mb, file_mb=self.file_mb, seccomp=self._seccomp)
        with shared.lock:
            self.workers_started += 1
            self.isolation = worker.isolation
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
        retry: tuple[int, int] | None = None
        upcoming: tuple[int, int, bytes] | None = None
        try:
            while not batch.cancel.is_set() and not batch.stop.is_set():
                if retry is not None:
                    (lo, hi), retry = retry, None
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
                    worker.send(frame, time.monotonic() + SEND_TIMEOUT_SECONDS, batch.cancel)
                    if upcoming is None and (span := batch.take()) is not None:
                        upcoming = (span[0], span[1], batch.frame(*span))  # encode while the worker runs
                    self._collect(worker, batch, lo, hi, bridge_call)
                    losses = 0
                except _Lost as lost:
                    self._checkin(worker)
                    worker = None
                    batch.results[lost.index] = CallResult(False, None, lost.message)
                    losses = 1 if lost.progressed else losses + 1
                    if batch.job.fail_fast:
                        batch.stop.set()
                    elif losses >= MAX_CONSECUTIVE_LOSSES:
                        batch.broken = f"the sandbox worker failed on {losses} calls in a row (last: {lost.message})"
                        batch.stop.set()
                    elif lost.index + 1 < hi:
                        retry = (lost.index + 1, hi)
                    if batch.stop.is_set():
                        break
                except WorkerGone as gone:  # died while we were sending: nothing ran yet
                    self._checkin(worker)
                    worker = None
                    losses += 1
                    if losses >= MAX_CONSECUTIVE_LOSSES:
                        batch.broken = f"the sandbox worker failed {losses} times in a row ({gone.reason})"
                        batch.stop.set()
                        break
                    retry = (lo, hi)
        except CodeLoadError:
            batch.stop.set()
            raise
        except Cancelled:
            return
        finally:
            if worker is not None:
                self._checkin(worker)

    def _collect(self, worker: WorkerProcess, batch: _Batch, lo: int, hi: int, bridge_call: Callable | None) -> None:
        """Read one frame's results into ``batch.results``; raises _Lost or CodeLoadError."""
        job, results = batch.job, batch.results
        timeout = job.timeout
        grace = grace_seconds(timeout)
        expected, loaded = lo, False
        started = time.monotonic()
        bridge_counts: dict[int, int] = {}
        while True:
            try:
                message = worker.recv(started + timeout + grace, batch.cancel)
                op = message[0]
                if op == "ok" or op == "err":
                    if len(message) != 3 or message[1] != expected or expected >= hi:
                        raise WorkerGone(f"protocol error: unexpected result frame for call {message[1]!r}")
                    if op == "ok":
                        results[expected] = CallResult(True, message[2])
                    else:
                        results[expected] = CallResult(False, None, _error_text(message[2]))
                        if job.fail_fast:
                            batch.stop.set()
                    expected += 1
                    started = time.monotonic()
                elif op == "bridge":
                    self._answer_bridge(worker, job, message, expected, bridge_counts, bridge_call, started, batch)
                elif op == "loaded":
                    loaded = True
                    started = time.monotonic()
                elif op == "done":
                    if message[1:] != [expected] or (expected != hi and not job.fail_fast):
                        raise WorkerGone("protocol error: frame ended early")
                    return
                elif op == "fatal":
                    error = message[1] if len(message) > 1 and isinstance(message[1], dict) else {}
                    line = error.get("line") if isinstance(error.get("line"), int) else None
                    raise CodeLoadError(_error_text(error), line=line, missing=error.get("type") == "MissingFunction")
                else:
                    raise WorkerGone(f"protocol error: unknown message {op!r}")
            except WorkerGone as gone:
                worker.kill()
                reason = gone.reason
                if reason == "deadline":
                    what = "loading the code" if not loaded else "the call"
                    reason = f"{what} timed out after {timeout:g} s (the worker stopped responding and was killed)"
                reason += worker.crash_note(job.code.filename)
                if not loaded:
                    raise CodeLoadError(f"the code broke the sandbox worker while loading: {reason}") from None
                raise _Lost(expected, reason, progressed=expected > lo) from None

    def _answer_bridge(
        self, worker: WorkerProcess, job: Job, message: list, expected: int, counts: dict[int, int],
        bridge_call: Callable | None, started: float, batch: _Batch,
    ) -> None:  # fmt: skip
        """Make (or refuse) one model call for the worker; the parent's limits are the real ones."""
        if len(message) != 5 or message[1] != expected or not isinstance(message[2], int):
            raise WorkerGone("protocol error: malformed bridge request")
        _, index, request_id, kind, request = message
        used = counts.get(index, 0)
        ok, body = False, ""
        if not job.model_access:
            body = f"ctx.{kind}_create is disabled: this grader has model_access 'none'"
        elif used >= job.max_model_calls:
            body = f"max_model_calls ({job.max_model_calls}) reached for this grader execution"
        elif kind not in BRIDGE_KINDS or not isinstance(request, dict):
            body = f"unknown model call {kind!r}"
        elif bridge_call is None:
            body = "no model bridge is configured for this run"
        else:
            counts[index] = used + 1
            remaining = started + job.timeout - time.monotonic()
            try:
                reply = bridge_call(kind, request, remaining, batch.cancel)
                if not isinstance(reply, dict):
                    raise TypeError(f"the bridge returned {type(reply).__name__}, not a dict")
                if kind == "responses" and reply.get("output_text") is None:
                    reply = {**reply, "output_text": output_text(reply)}
                frame = protocol.encode_lenient(["reply", request_id, True, reply])
                ok = True
            except Cancelled:
                worker.kill()
                raise
            except TimeoutError:
                body = f"the model call did not finish within the grader's timeout ({job.timeout:g} s)"
            except Exception as exc:  # noqa: BLE001 - any bridge failure goes back to user code
                body = f"{type(exc).__name__}: {exc}"
        if not ok:
            frame = protocol.encode(["reply", request_id, False, body])
        worker.send(frame, time.monotonic() + SEND_TIMEOUT_SECONDS, batch.cancel)


def output_text(reply: dict) -> str:
    """Concatenate the ``output_text`` parts of a Responses reply (what the SDK property does)."""
    parts: list[str] = []
    for item in reply.get("output") or []:
        if isinstance(item, dict) and item.get("type", "message") == "message":
            for content in item.get("content") or []:
                if isinstance(content, dict) and content.get("type") == "output_text":
                    parts.append(str(content.get("text") or ""))
    return "".join(parts)


def _error_text(error: Any) -> str:
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    return "failed (the worker sent no message)"


def _bridge_caller(bridge: Bridge, loop: asyncio.AbstractEventLoop) -> Callable[..., dict]:
    """A blocking ``call(kind, request, timeout, cancel)`` for pool threads; the bridge runs on ``loop``."""

    async def invoke(kind: str, request: dict) -> dict:
        reply = bridge(kind, request)
        return await reply if inspect.isawaitable(reply) else reply  # type: ignore[return-value]

    def call(kind: str, request: dict, timeout: float, cancel: threading.Event) -> dict:
        deadline = time.monotonic() + timeout
        future = asyncio.run_coroutine_threadsafe(invoke(kind, request), loop)
        while True:  # wait in slices so a cancelled batch does not sit out a slow model call
            remaining = deadline - time.monotonic()
            if remaining <= 0 or cancel.is_set():
                future.cancel()
                if cancel.is_set():
                    raise Cancelled()
                raise TimeoutError()
            try:
                return future.result(timeout=min(remaining, POLL_SECONDS))
            except concurrent.futures.TimeoutError:
                continue

    return call
