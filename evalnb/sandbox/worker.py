"""The sandbox worker: the long-lived child process that runs user code (preprocessors, graders).

The pool starts it as ``python -I <this file> CONFIG``. It imports only the standard library
(its siblings protocol.py, limits.py, seccomp.py and context.py are loaded by file path, never
through the evalnb package), so it is ready in a few tens of milliseconds. It then:

1. moves the protocol off stdin/stdout onto private descriptors, so anything user code prints
   (or a C library writes to fd 1) goes to stderr and cannot corrupt a frame; Python-level
   ``sys.stdout``/``sys.stderr`` writes during a call are kept instead (the last ``LOG_CHARS``
   characters travel with that call's result, for its sample's ``log``);
2. limits itself (rlimits, the seccomp filter, Python-level guards) before any user code runs;
3. loads each job's code once (cached by content hash) and runs batches of calls. Results go
   out in batches; before each call the worker writes its index and start time into a shared
   progress slot, so the parent always knows which call is in flight, even after a crash.
   A SIGALRM ticker raises inside a call that outlives its timeout, which keeps the worker
   warm; the parent kills the worker if even that fails.
"""

from __future__ import annotations

import _thread
import json
import mmap
import os
import signal
import sys
import time
from collections import OrderedDict
from typing import Any


def _sibling(name: str) -> Any:
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_evalnb_sandbox_{name}", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


if __package__:
    from . import context, landlock, limits, namespaces, protocol, seccomp
else:  # started as a script inside the sandbox
    protocol, limits, seccomp, context, namespaces, landlock = (
        _sibling(n) for n in ("protocol", "limits", "seccomp", "context", "namespaces", "landlock")
    )

encode = protocol.encode
dumps = protocol.dumps
TICK_SECONDS = 0.05
FLUSH_RESULTS = 256  # results per frame at most
FLUSH_SECONDS = 0.01  # and at least this often while calls complete
MAX_RESULT_BYTES = 16 * 1024 * 1024  # what one call may send back, counted as below (config: max_result_bytes)
CONTAINER_BYTES = 64  # a JSON object or array costs the parent about this much more than its bytes
MAX_REQUEST_BYTES = 8 * 1024 * 1024  # one ctx.*_create request, as JSON
CODE_CACHE_SIZE = 16
USER_MODULE_NAME = "evalnb_user_code"
LOG_CHARS = 4096  # what one call printed, its last this many characters, goes back with its result


class CallTimeout(BaseException):
    """Raised inside user code when its time is up (a BaseException, so ``except Exception`` won't hide it)."""


class _State:
    """The call in progress, as the SIGALRM ticker, the ctx bridge and the result buffer see it."""

    in_call = False
    in_io = False
    fired = False
    deadline = 0.0
    timeout = 120.0
    cpu_limit: float | None = None
    cpu_start = 0.0
    index = 0
    request_id = 0
    memory_mb: int | None = None
    max_result_bytes = MAX_RESULT_BYTES
    bridged = False  # the current call made a model call: flush its result right away
    results: Results | None = None
    slot: memoryview | None = None  # (call index, start ns) shared with the parent
    log_chars = 0

    def __init__(self) -> None:
        self.log: list[str] = []  # text the current call wrote to sys.stdout / sys.stderr (see _Capture)


STATE = _State()
_BRIDGE_LOCK = _thread.allocate_lock()  # user threads calling ctx helpers take turns on the pipe


def _on_alarm(signum: int, frame: object) -> None:
    st = STATE
    if not st.in_call or st.fired or st.in_io:
        return
    if time.monotonic() >= st.deadline:
        st.fired = True
        raise CallTimeout(f"timed out after {_seconds(st.timeout)}")
    if st.cpu_limit is not None and time.process_time() - st.cpu_start > st.cpu_limit:
        st.fired = True
        raise CallTimeout(f"exceeded the CPU time limit of {_seconds(st.cpu_limit)}")


def _seconds(value: float) -> str:
    return f"{value:g} s"


class _Capture:
    """``sys.stdout`` and ``sys.stderr`` of the worker: what a call writes is kept for its result.

    A write is an append to a list (trimmed to the last ``LOG_CHARS`` now and then), so a call
    that prints nothing costs one truth test. Outside a call (loading code, threads user code
    left behind) text goes on to the real stderr, as before.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        st = STATE
        if not st.in_call:
            return self._stream.write(text)
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        st.log.append(text)
        st.log_chars += len(text)
        if st.log_chars > 4 * LOG_CHARS:
            kept = "".join(st.log)[-LOG_CHARS:]
            st.log = [kept]
            st.log_chars = len(kept)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not STATE.in_call:
            self._stream.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:  # encoding, errors, fileno, buffer, ...
        return getattr(self._stream, name)


def _take_log() -> str | None:
    """What the call that just ended printed (its last LOG_CHARS characters), or None."""
    st = STATE
    if not st.log:
        return None
    text = "".join(st.log)
    st.log = []
    st.log_chars = 0
    return text[-LOG_CHARS:]


class Channel:
    """Blocking frame I/O on the private protocol descriptors."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        self.buffer = protocol.FrameBuffer()

    def send(self, frame: bytes) -> None:
        view = memoryview(frame)
        while view:
            view = view[os.write(self.write_fd, view) :]

    def recv(self) -> list | None:
        while True:
            payload = self.buffer.next_payload()
            if payload is not None:
                return json.loads(payload)
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                return None
            self.buffer.feed(chunk)


class Results:
    """Buffered result entries of one "run" frame, sent as ["res", first_index, [...]] frames."""

    def __init__(self, channel: Channel, start: int) -> None:
        self.channel, self.start = channel, start
        self.parts: list[bytes] = []
        self.flushed_at = time.monotonic()

    def add(self, part: bytes) -> None:
        self.parts.append(part)
        if len(self.parts) >= FLUSH_RESULTS or time.monotonic() - self.flushed_at >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            payload = b'["res",%d,[%s]]' % (self.start, b",".join(self.parts))
            self.start += len(self.parts)
            self.parts = []
            self.channel.send(protocol.frame(payload))
        self.flushed_at = time.monotonic()


def _bridge(channel: Channel, kind: str, request: dict) -> dict:
    st = STATE
    with _BRIDGE_LOCK:
        st.bridged = True
        if st.results is not None:
            st.results.flush()  # finished calls are acknowledged before any model call is made
        st.request_id += 1
        request_id = st.request_id
        try:
            frame = encode(["bridge", st.index, request_id, kind, request])
        except (TypeError, ValueError) as exc:
            raise TypeError(f"ctx.{kind}_create arguments must be JSON values ({exc})") from None
        if len(frame) > MAX_REQUEST_BYTES:
            raise ValueError(f"ctx.{kind}_create request is {len(frame)} bytes of JSON; the limit is {MAX_REQUEST_BYTES}")
        st.in_io = True  # a timeout must not interrupt a half-read frame; it fires right after
        try:
            channel.send(frame)
            while True:
                message = channel.recv()
                if message is None:
                    os._exit(0)
                if message[0] == "reply" and message[1] == request_id:
                    break  # replies to calls that already timed out are skipped
        finally:
            st.in_io = False
    if not message[2]:
        raise context.ModelCallError(str(message[3]))
    return message[3]


def _describe(exc: BaseException, filename: str, what: str) -> dict:
    """The last traceback line plus the user-code line number, as the parent will show it."""
    if isinstance(exc, CallTimeout):
        return {"type": "Timeout", "message": f"{what} {exc}", "line": None}
    name = type(exc).__name__
    try:
        text = str(exc)
    except Exception:
        text = ""
    line = None
    if isinstance(exc, SyntaxError) and exc.filename == filename:
        line, text = exc.lineno, exc.msg
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    if isinstance(exc, MemoryError) and not text:
        text = f"out of memory (the sandbox limit is {STATE.memory_mb} MB)"
    if isinstance(exc, SystemExit):
        text = f"{what} called sys.exit({'' if exc.code is None else repr(exc.code)})"
    message = f"{name}: {text}" if text else name
    if line is not None:
        message += f" (line {line})"
    return {"type": name, "message": message[:4000], "line": line}


def _guarded(fn: Any, args: list, index: int = -1) -> tuple[bool, Any]:
    """Run one user call under the ticker; never lets an exception escape."""
    st = STATE
    st.fired = False
    started = time.monotonic_ns()
    if st.slot is not None:
        st.slot[1] = started  # start first, then index: a reader never pairs a new index with an old start
        st.slot[0] = index
    st.deadline = started / 1e9 + st.timeout
    if st.cpu_limit is not None:
        st.cpu_start = time.process_time()
    st.in_call = True
    try:
        try:
            value = fn(*args)
        finally:
            st.in_call = False
        return True, value
    except BaseException as exc:  # noqa: BLE001 - user code may raise anything
        st.in_call = False
        return False, exc


_CODE: OrderedDict[str, dict] = OrderedDict()


def _load(code: dict) -> dict | BaseException:
    """The namespace of the job's code (cached by key), or the exception loading raised."""
    key = code["key"]
    namespace = _CODE.get(key)
    if namespace is not None:
        _CODE.move_to_end(key)
        return namespace
    namespace = {"__name__": USER_MODULE_NAME, "__builtins__": __builtins__, "__file__": code["filename"]}

    def run_module() -> None:
        exec(compile(code["source"], code["filename"], "exec"), namespace)

    ok, error = _guarded(run_module, [])
    printed = _take_log()
    if printed:  # output while loading goes where it went before: the worker's stderr
        sys.__stderr__.write(printed)
    if not ok:
        return error
    _CODE[key] = namespace
    while len(_CODE) > CODE_CACHE_SIZE:
        _CODE.popitem(last=False)
    return namespace


def _accepts(fn: Any, nargs: int) -> bool:
    """Whether fn takes one more positional argument than ``nargs`` (a trailing ctx)."""
    code = getattr(fn, "__code__", None)
    if code is not None and not hasattr(fn, "__self__"):
        return code.co_argcount > nargs or bool(code.co_flags & 0x04)  # CO_VARARGS
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) > nargs or any(p.kind == p.VAR_POSITIONAL for p in params)


def _run(channel: Channel, job: dict, start: int, calls: list) -> None:
    st = STATE
    code = job["code"]
    filename = code["filename"]
    st.timeout = float(job["timeout"])
    st.cpu_limit = job.get("cpu_seconds")
    signal.signal(signal.SIGALRM, _on_alarm)  # re-installed per batch in case user code replaced it
    signal.setitimer(signal.ITIMER_REAL, TICK_SECONDS, TICK_SECONDS)
    try:
        namespace = _load(code)
        if isinstance(namespace, BaseException):
            channel.send(encode(["fatal", _describe(namespace, filename, "loading the code")]))
            return
        names = job["names"]
        fn = next((namespace[n] for n in names if callable(namespace.get(n))), None)
        if fn is None:
            message = f"defines none of the accepted functions: {', '.join(names)}"
            channel.send(encode(["fatal", {"type": "MissingFunction", "message": message, "line": None}]))
            return
        channel.send(encode(["loaded"]))
        fn_name = getattr(fn, "__name__", names[0])
        ctx_info = job.get("ctx")
        use_ctx = ctx_info is not None and _accepts(fn, int(job["nargs"]))
        access, limit = bool(job.get("model_access")), int(job.get("max_model_calls") or 0)

        def send(kind: str, request: dict) -> dict:
            return _bridge(channel, kind, request)

        fail_fast = bool(job.get("fail_fast"))
        unpack = _grade_unpacker(job["unpack"]) if job.get("unpack") else None
        results = st.results = Results(channel, start)
        index = start
        for args in calls:
            st.index = index
            if unpack is not None:
                args = unpack(args)
            if use_ctx:
                args.append(context.Context(ctx_info, send, access, limit))
            st.bridged = False
            ok, value = _guarded(fn, args, index)
            log = _take_log() if st.log else None
            if ok:
                part = _result_part(value, fn_name, log)
            else:
                part = _error_part(_describe(value, filename, fn_name), log)
            value = args = None  # type: ignore[assignment]
            results.add(part)
            if st.bridged:
                results.flush()  # never let a call that made model calls be re-run after a crash
            index += 1
            if not ok and fail_fast:
                break
        results.flush()
        channel.send(encode(["done", index]))
    finally:
        st.results = None
        signal.setitimer(signal.ITIMER_REAL, 0, 0)


def _grade_unpacker(spec: dict) -> Any:
    """Expand the compact ``[flags, sample_values, row, extras]`` form of a grade call.

    The parent sends each dataset row once: the item is ``{**row, **extras, "row": row}``
    (or ``extras`` itself when ``row`` is null), and flag bits say that the sample's
    dataset_row / prompt / target are the item's row / prompt / target.
    """
    keys = spec["sample_keys"]

    def unpack(args: list) -> list:
        flags, values, row, extras = args
        if row is None:
            item = extras
        else:
            item = dict(row)
            item.update(extras)
            item["row"] = row
        sample = dict(zip(keys, values))
        if flags & 1:
            sample["dataset_row"] = row
        if flags & 2:
            sample["prompt"] = item["prompt"]
        if flags & 4:
            sample["target"] = item["target"]
        return [sample, item]

    return unpack


def _result_part(value: Any, fn_name: str, log: str | None = None) -> bytes:
    """``[1, value]`` as JSON, or ``[0, error]`` when the value is not JSON or too large;
    with a third element, ``log``, when the call printed something."""
    try:
        part = dumps([1, value] if log is None else [1, value, log])
    except Exception as exc:  # noqa: BLE001 - TypeError, ValueError (circular), RecursionError, MemoryError
        message = f"{fn_name} returned a value that is not JSON ({type(value).__name__}: {exc})"
        return _error_part({"type": "NotJSON", "message": message, "line": None}, log)
    size = len(part)
    if size > 65536:  # small values cannot amplify much; big ones are weighed as the parent will hold them
        size += CONTAINER_BYTES * (part.count(b"{") + part.count(b"["))
    if size > STATE.max_result_bytes:
        what = f"{len(part)} bytes of JSON" if size == len(part) else (
            f"{len(part)} bytes of JSON with {(size - len(part)) // CONTAINER_BYTES} objects and arrays "
            f"(about {size} bytes once read)")
        message = (f"{fn_name} returned {what}; the sandbox limit for what one call returns (scores, judge, "
                   f"log) is {STATE.max_result_bytes} bytes")
        return _error_part({"type": "ResultTooLarge", "message": message, "line": None}, log)
    return part


def _error_part(error: dict, log: str | None) -> bytes:
    return dumps([0, error] if log is None else [0, error, log])


def _take_protocol_fds() -> Channel:
    """Move the protocol to private fds; fd 0 becomes /dev/null and fd 1 joins stderr."""
    read_fd, write_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return Channel(read_fd, write_fd)


def main(argv: list[str]) -> None:
    config = json.loads(argv[1])
    seccomp.set_parent_death_signal(int(config["parent_pid"]))
    slot_fd = config.get("slot_fd")
    # First of all, before anything of the parent's could be looked at: into namespaces (on
    # success this continues in a forked child, see namespaces.py).
    network = bool(config.get("network"))
    workdir = config.get("workdir") or os.getcwd()
    own_root = {"workdir": workdir, "scratch_mb": config.get("scratch_mb") or 512} if config.get("filesystem", True) else None
    if config.get("namespaces", True):
        keep = (slot_fd,) if slot_fd is not None else ()
        began = time.perf_counter()
        isolation: dict[str, Any] = namespaces.enter(network=network, keep_fds=keep, filesystem=own_root)
        # what confining cost this worker (its CPU time is the part a busy machine does not inflate)
        isolation["setup_ms"] = round((time.perf_counter() - began) * 1000, 2)
        isolation["setup_cpu_ms"] = round(time.process_time() * 1000, 2)  # the forked worker's CPU, all of it setup
    else:
        isolation = namespaces.unavailable("turned off (EVALNB_SANDBOX_NAMESPACES=0 or namespaces=False)")
    channel = _take_protocol_fds()
    if slot_fd is not None:
        STATE.slot = memoryview(mmap.mmap(slot_fd, protocol.SLOT_BYTES)).cast("q")
        os.close(slot_fd)
    STATE.memory_mb = config.get("memory_mb")
    STATE.max_result_bytes = int(config.get("max_result_bytes") or MAX_RESULT_BYTES)
    threads = config.get("max_threads") if isolation.get("own_user_namespace") else None
    isolation["rlimits"] = limits.apply_rlimits(config.get("memory_mb"), config.get("file_mb"), threads=threads,
                                                descriptors=config.get("max_files", limits.DESCRIPTORS))
    if own_root is not None and not isolation.get("filesystem"):
        # no root of its own (no namespaces, or building it failed): Landlock, where the kernel has it
        isolation.update(landlock.restrict(read_only=namespaces.fs.read_only_paths(network=network),
                                           writable=[workdir], network=network))
    fallback = not isolation.get("own_user_namespace")
    isolation["python_guards"] = bool(limits.block_process_apis())
    if config.get("seccomp", True):
        if fallback and sys.platform.startswith("linux"):  # with the filter: it refuses capset after
            isolation["read_capabilities_only"] = limits.keep_read_capabilities_only()
        limits.explain_refused_calls(fallback=fallback)
        reason = seccomp.install(network=network, fallback=fallback)
    else:
        reason = "disabled by the parent"
    isolation["seccomp"] = reason is None
    if reason is not None:
        isolation["seccomp_error"] = reason
    import faulthandler

    faulthandler.enable()  # a segfault in user code leaves a Python traceback on stderr
    sys.stdout, sys.stderr = _Capture(sys.stdout), _Capture(sys.stderr)
    channel.send(encode(["ready", os.getpid(), isolation]))
    while True:
        message = channel.recv()
        if message is None or message[0] == "exit":
            break
        if message[0] == "run":
            _run(channel, message[1], message[2], message[3])
    os._exit(0)  # do not wait for threads user code may have left running


if __name__ == "__main__":
    main(sys.argv)
