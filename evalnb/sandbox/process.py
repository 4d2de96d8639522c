"""Parent-side handle on one sandbox worker process: start, frame I/O with deadlines, kill.

All I/O here is blocking and meant for one pool thread at a time; the pool turns it into
asyncio. Every byte from the worker is treated as untrusted JSON.
"""

from __future__ import annotations

import json
import mmap
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import protocol, scratch
from .limits import scrubbed_env

WORKER_SCRIPT = str(Path(__file__).with_name("worker.py"))
START_TIMEOUT_SECONDS = 30.0
STDERR_TAIL_BYTES = 4096
POLL_SECONDS = 0.1  # how often a blocked read looks at the cancel flag

WORKDIR_PREFIX = "evalnb-sandbox-"
_swept = False

# Workers are started from one long-lived thread: the kernel's parent-death signal fires
# when the *thread* that started a process exits, and pool threads come and go.
_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalnb-sandbox-spawn")


class WorkerGone(Exception):
    """The worker died, stalled past its deadline or broke the protocol; it has been killed."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Cancelled(Exception):
    """The caller gave up on the batch; the worker has been killed."""


def sweep_stale_workdirs() -> list[str]:
    """Remove worker temp folders whose owning process is gone (it was killed before cleanup)."""
    removed = []
    roots = {Path(tempfile.gettempdir()), Path(scratch.workdir_base())}
    for path in (p for root in roots for p in root.glob(f"{WORKDIR_PREFIX}*-*")):
        owner = path.name[len(WORKDIR_PREFIX) :].split("-", 1)[0]
        if not owner.isdigit() or int(owner) == os.getpid():
            continue
        try:
            os.kill(int(owner), 0)
            continue  # the owner still runs (or the pid was reused): leave it
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(str(path))
    return removed


class WorkerProcess:
    """One running worker; create with :meth:`start`."""

    def __init__(self, proc: subprocess.Popen, workdir: str, slot: mmap.mmap) -> None:
        self.proc = proc
        self._slot_map = slot
        self._slot = memoryview(slot).cast("q")
        self.pid = proc.pid
        self.workdir = workdir
        self.isolation: dict = {}
        self.scratch_bytes: int | None = None  # counted by the parent (no root of its own): see scratch.py
        self._scratch_checked = 0.0
        self._read_fd = proc.stdout.fileno()  # type: ignore[union-attr]
        self._write_fd = proc.stdin.fileno()  # type: ignore[union-attr]
        os.set_blocking(self._write_fd, False)
        self._frames = protocol.FrameBuffer()
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._stderr_thread = threading.Thread(
            target=self._drain_stderr, daemon=True, name=f"evalnb-sandbox-stderr-{self.pid}"
        )
        self._stderr_thread.start()
        self.dead = False

    @classmethod
    def start(
        cls,
        *,
        memory_mb: int | None,
        file_mb: int | None,
        seccomp: bool = True,
        namespaces: bool = True,
        network: bool = False,
        filesystem: bool = True,
        scratch_mb: int = 512,
        max_threads: int | None = 256,
        max_files: int | None = 256,
        max_result_bytes: int | None = None,
    ) -> WorkerProcess:
        """Start a worker in a fresh temp folder and wait for its "ready" frame.

        ``namespaces``: confine it where the OS allows (see ``namespaces.py``); ``network``:
        keep the machine's network (otherwise its network namespace has none); ``filesystem``:
        give it a root of its own (``filesystem.py``, or ``landlock.py`` without namespaces)
        with ``scratch_mb`` of private ``/tmp``; ``max_threads``: its threads at most (where it
        has a user namespace of its own); ``max_files``: its open descriptors at most (see
        ``limits.DESCRIPTORS``; None: the parent's limit); ``max_result_bytes``: what one call may return.
        """
        global _swept
        if not _swept:
            _swept = True
            sweep_stale_workdirs()
        workdir = tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-", dir=scratch.workdir_base())
        with tempfile.TemporaryFile() as slot_file:  # unlinked: only the two mappings remain
            slot_file.truncate(protocol.SLOT_BYTES)
            slot = mmap.mmap(slot_file.fileno(), protocol.SLOT_BYTES)
            slot_fd = slot_file.fileno()
            config = {"parent_pid": os.getpid(), "memory_mb": memory_mb, "file_mb": file_mb,
                      "seccomp": seccomp, "namespaces": namespaces, "network": network,
                      "slot_fd": slot_fd, "workdir": workdir, "filesystem": filesystem, "scratch_mb": scratch_mb,
                      "max_threads": max_threads, "max_files": max_files, "max_result_bytes": max_result_bytes}  # fmt: skip
            argv = [sys.executable, "-I", WORKER_SCRIPT, json.dumps(config)]

            def spawn() -> subprocess.Popen:
                return subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=workdir,
                    env=scrubbed_env(workdir), start_new_session=True, close_fds=True, pass_fds=(slot_fd,), bufsize=0,
                )  # fmt: skip

            try:
                proc = _spawner.submit(spawn).result()
            except BaseException:
                slot.close()
                shutil.rmtree(workdir, ignore_errors=True)
                raise
        worker = cls(proc, workdir, slot)
        try:
            message = worker.recv(time.monotonic() + START_TIMEOUT_SECONDS)
            if message[0] != "ready" or len(message) < 3 or not isinstance(message[2], dict):
                raise WorkerGone(f"unexpected first frame {message[0]!r}")
        except WorkerGone as exc:
            worker.kill()
            from ..errors import SandboxError

            raise SandboxError(f"the sandbox worker failed to start: {exc.reason}{worker.stderr_note()}") from None
        worker.isolation = message[2]
        if not worker.isolation.get("filesystem"):
            worker.scratch_bytes = (int(scratch_mb) if scratch_mb and scratch_mb > 0 else 512) * 1024 * 1024  # no usable size: the default
            worker.isolation["scratch_folder"] = workdir
        return worker

    def progress(self) -> tuple[int, int]:
        """(index of the call in progress or last started, its start in monotonic ns); -1 = loading."""
        return self._slot[0], self._slot[1]

    # -- frame I/O ---------------------------------------------------------------------
    def send(self, frame: bytes, deadline: float, cancel: threading.Event | None = None) -> None:
        view = memoryview(frame)
        while view:
            try:
                view = view[os.write(self._write_fd, view) :]
                continue
            except BlockingIOError:
                pass
            except (BrokenPipeError, OSError):
                self._lost("the worker closed its input")
            self._wait(self._write_fd, writable=True, deadline=deadline, cancel=cancel)

    def recv(self, deadline: float, cancel: threading.Event | None = None) -> list:
        """The next message, or WorkerGone when the worker dies or misses ``deadline``."""
        while True:
            try:
                payload = self._frames.next_payload()
                if payload is not None:
                    return protocol.decode(payload)
            except protocol.ProtocolError as exc:
                self._lost(f"protocol error: {exc}")
            self._wait(self._read_fd, writable=False, deadline=deadline, cancel=cancel)
            try:
                chunk = os.read(self._read_fd, 1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                self._lost(self.exit_description())
            self._frames.feed(chunk)

    def _wait(self, fd: int, *, writable: bool, deadline: float, cancel: threading.Event | None) -> None:
        while True:
            if self.scratch_bytes is not None:
                self._check_scratch()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerGone("deadline")  # the caller turns this into a timeout message
            if cancel is not None and cancel.is_set():
                self.kill()
                raise Cancelled()
            wait = min(remaining, POLL_SECONDS)
            ready = select.select([], [fd], [], wait)[1] if writable else select.select([fd], [], [], wait)[0]
            if ready:
                return

    def _check_scratch(self) -> None:
        """Kill a worker whose folder holds more than its scratch cap (at most every CHECK_SECONDS)."""
        now = time.monotonic()
        if now - self._scratch_checked < scratch.CHECK_SECONDS:
            return
        self._scratch_checked = now
        held = scratch.usage(self.workdir, stop_above=self.scratch_bytes)
        if held > self.scratch_bytes:  # type: ignore[operator]
            self._lost(f"the worker's scratch folder held more than its {self.scratch_bytes // 2**20} MB cap "  # type: ignore[operator]
                       "(scratch_mb; without namespaces the parent counts it); the worker was killed")

    def _lost(self, reason: str) -> None:
        self.kill()
        raise WorkerGone(reason)

    # -- life cycle --------------------------------------------------------------------
    def exit_description(self) -> str:
        """Why the worker's output ended: its exit code or the signal that killed it."""
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "the worker closed its output"
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            hint = " (possibly out of memory)" if -code == signal.SIGKILL else ""
            return f"the sandbox worker was killed by {name}{hint}"
        return f"the sandbox worker exited with code {code}"

    def stderr_note(self, limit: int = 600) -> str:
        """The end of what the worker wrote to stderr, for error messages (may be empty)."""
        self._stderr_thread.join(timeout=0.2)
        text = b"".join(self._stderr).decode("utf-8", "replace").strip()
        if not text:
            return ""
        return f"; stderr: ...{text[-limit:]}" if len(text) > limit else f"; stderr: {text}"

    def crash_note(self, filename: str) -> str:
        """The faulthandler summary of a crash (error line and the user-code frames), if any.

        Ordinary prints from earlier calls are left out: they would point at the wrong call.
        """
        self._stderr_thread.join(timeout=0.2)
        text = b"".join(self._stderr).decode("utf-8", "replace")
        start = text.rfind("Fatal Python error:")
        if start < 0:
            return ""
        lines = text[start:].splitlines()
        marker = f'File "{filename}", '
        frames = [line.strip().replace(marker, "") for line in lines if marker in line]
        note = lines[0].removeprefix("Fatal Python error: ").strip()
        return f" ({note}; in user code at {' <- '.join(frames)})" if frames else f" ({note})"

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        try:
            while chunk := os.read(fd, 65536):
                self._stderr.append(chunk)
                self._stderr_size += len(chunk)
                while self._stderr_size > STDERR_TAIL_BYTES and len(self._stderr) > 1:
                    self._stderr_size -= len(self._stderr.popleft())
        except (OSError, ValueError):
            pass

    def close(self, grace: float = 0.5) -> None:
        """Ask the worker to exit, then make sure it (and its process group) is gone."""
        if not self.dead:
            try:
                self.send(protocol.encode(["exit"]), time.monotonic() + grace)
                self.proc.wait(timeout=grace)
            except (WorkerGone, Cancelled, subprocess.TimeoutExpired, OSError):
                pass
        self.kill()

    def kill(self) -> None:
        """SIGKILL the worker's whole process group, reap it and remove its temp folder."""
        if not self.dead:
            self.dead = True
            if self.proc.returncode is None:  # not reaped yet, so the pid is still ours
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                try:
                    self.proc.kill()
                except OSError:
                    pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._stderr_thread.join(timeout=1)
        streams = [self.proc.stdin, self.proc.stdout]
        if not self._stderr_thread.is_alive():  # never close an fd another thread is reading
            streams.append(self.proc.stderr)
        for stream in streams:
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        shutil.rmtree(self.workdir, ignore_errors=True)
