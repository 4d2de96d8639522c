"""Hostile and broken grader code: each fault fails only its own sample, the rest of the batch is
graded correctly, and the caller's process is untouched. Real worker processes, no mocks."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from evalnb.scoring.grading import Grader
from evalnb.sandbox import SandboxPool
from evalnb.sandbox.pool import grace_seconds

FAULTS = r'''
import os, signal, sys, ctypes

class Weird:
    pass

def grade(sample, item):
    o = sample["output_text"]
    if o == "loop":
        while True:
            pass
    if o == "sleep":
        import time
        time.sleep(1000)
    if o == "exit1":
        os._exit(1)
    if o == "alloc_bytes":
        return len(b"x" * 10**10)
    if o == "alloc_bytearray":
        return len(bytearray(10**10))
    if o == "fork_bomb":
        while True:
            os.fork()
    if o == "fork_via_subprocess":
        import subprocess
        subprocess.run(["sh", "-c", "echo hi"])
    if o == "ignore_alarm":
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        signal.setitimer(signal.ITIMER_REAL, 0)
        while True:
            pass
    if o == "sys_exit":
        sys.exit()
    if o == "keyboard":
        raise KeyboardInterrupt
    if o == "base_exception":
        raise BaseException("bye")
    if o == "not_json":
        return Weird()
    if o == "a_set":
        return {"scores": {"score": 1}, "judge": {1, 2}}
    if o == "circular":
        x = []
        x.append(x)
        return x
    if o == "print":
        print("ok" * 100000)
        sys.stdout.flush()
        os.write(1, b"\x00\x00\x00\x05junk")   # raw bytes on fd 1 must not reach the protocol
        print("to stderr", file=sys.stderr)
    if o == "segfault":
        ctypes.string_at(0)
    if o == "kill_parent":
        os.kill(os.getppid(), signal.SIGKILL)
    if o == "raise":
        raise ValueError("bad sample")
    return sample["output_text"] == item["target"]
'''


def line_of(snippet: str) -> int:
    """Line number (in FAULTS) of the first line containing ``snippet``."""
    return next(n for n, line in enumerate(FAULTS.splitlines(), 1) if snippet in line)


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(2) as p:
        yield p


def grade(pool: SandboxPool, outputs: list[str], *, timeout: float = 1, source: str = FAULTS):
    grader = Grader({"source": source, "timeout_seconds": timeout}, task_id="faults", pool=pool)
    samples = [{"output_text": o, "sample_index": i} for i, o in enumerate(outputs)]
    return grader.grade_samples_sync(samples, [{"target": "good"}] * len(outputs), model="m")


def interleave(fault: str, count: int = 3) -> list[str]:
    """good, fault, bad, good, ... so each fault sits between samples with known scores."""
    out: list[str] = []
    for _ in range(count):
        out += ["good", fault, "bad"]
    return out + ["good"]


def assert_rest_graded(outputs: list[str], grades, fault: str) -> list[str]:
    errors = []
    for output, g in zip(outputs, grades):
        if output == fault:
            assert g.failed, (fault, g)
            assert g.scores == {}
            errors.append(g.error)
        else:
            assert not g.failed, (output, g)
            assert g.scores == {"score": 1.0 if output == "good" else 0.0}
    return errors


@pytest.fixture(scope="module")
def fork_is_blocked(pool):
    """Probe with one guarded fork (the child exits at once) before any fork bomb runs."""
    probe = "import os, ctypes\ndef grade(sample, item):\n" \
            "    libc = ctypes.CDLL(None)\n    pid = libc.fork()\n    if pid == 0:\n        os._exit(0)\n" \
            "    try:\n        os.fork()\n    except PermissionError:\n        return pid == -1\n    return False\n"  # fmt: skip
    grades = grade(pool, ["x"], source=probe)
    if grades[0].scores != {"score": 1.0}:
        pytest.skip(f"process creation is not blocked here ({grades[0]}); not running fork bombs")


@pytest.mark.parametrize(
    "fault, expected",
    [
        ("raise", f"ValueError: bad sample (line {line_of('bad sample')})"),
        ("exit1", "the sandbox worker exited with code 1"),
        ("alloc_bytes", "MemoryError"),
        ("alloc_bytearray", "MemoryError"),
        ("fork_bomb", "not allowed in the evalnb sandbox"),
        ("fork_via_subprocess", "not allowed in the evalnb sandbox"),
        ("sys_exit", "SystemExit: grade called sys.exit()"),
        ("keyboard", "KeyboardInterrupt"),
        ("base_exception", "BaseException: bye"),
        ("not_json", "not JSON (Weird"),
        ("a_set", "not JSON (dict: Object of type set"),
        ("circular", "Circular reference"),
        ("segfault", f"killed by SIGSEGV (Segmentation fault; in user code at line {line_of('string_at')} in grade)"),
        ("kill_parent", "os.kill of another process is not allowed"),
    ],
)
def test_fault_fails_only_its_sample(pool, fault, expected, request):
    if fault.startswith("fork"):
        request.getfixturevalue("fork_is_blocked")
    my_pid = os.getpid()
    outputs = interleave(fault)
    grades = grade(pool, outputs)
    errors = assert_rest_graded(outputs, grades, fault)
    assert len(errors) == 3 and all(expected in e for e in errors), errors
    assert os.getpid() == my_pid


def test_printing_does_not_corrupt_the_protocol(pool):
    outputs = interleave("print")
    grades = grade(pool, outputs)
    for output, g in zip(outputs, grades):
        assert not g.failed, g
        assert g.scores == {"score": 1.0 if output == "good" else 0.0}


def test_infinite_loop_times_out_and_the_worker_stays_warm(pool):
    grade(pool, ["good"] * 4)  # both workers up
    started_workers = pool.workers_started
    started = time.monotonic()
    grade(pool, ["good", "good", "bad", "good", "good"])  # the same batch without faults: this machine's pace now
    baseline = time.monotonic() - started
    started = time.monotonic()
    outputs = ["good", "loop", "bad", "sleep", "good"]
    grades = grade(pool, outputs)
    elapsed = time.monotonic() - started
    assert grades[1].error == "grade timed out after 1 s"
    assert grades[3].error == "grade timed out after 1 s"
    assert [g.scores for g in grades[::2]] == [{"score": 1.0}, {"score": 0.0}, {"score": 1.0}]
    assert pool.workers_started == started_workers  # the in-worker timer interrupted the call
    # Both timeouts fired on time: sooner than the parent's backstop could have ended even one
    # of them on each worker (timeout + grace), measured beyond the same batch's own cost so
    # that a loaded machine does not fail it (a fixed 4 s bound flaked in a clean clone).
    backstop = 1 + grace_seconds(1)
    assert elapsed - baseline < 2 * backstop, (elapsed, baseline)


def test_ignored_alarm_is_stopped_by_the_parent_backstop(pool):
    started = time.monotonic()
    outputs = ["good", "ignore_alarm", "bad", "good"]
    grades = grade(pool, outputs)
    elapsed = time.monotonic() - started
    assert "timed out after 1 s (the worker stopped responding and was killed)" in grades[1].error
    assert [g.scores for g in (grades[0], grades[2], grades[3])] == [{"score": 1.0}, {"score": 0.0}, {"score": 1.0}]
    assert elapsed < 5  # timeout 1 s + grace 1.05 s + a fresh worker


def test_a_grader_that_always_crashes_gives_up_after_three_workers():
    source = "import os\ndef grade(sample, item):\n    os._exit(3)\n"
    with SandboxPool(1) as p:
        grades = grade(p, ["x"] * 50, source=source)
        assert p.workers_started == 3
    assert all(g.error == "the sandbox worker exited with code 3" for g in grades[:3])
    assert all(g.error.startswith("not run: the sandbox worker failed on 3 calls in a row") for g in grades[3:])


def test_caller_process_survives_every_fault_at_once(pool, fork_is_blocked):
    """All faults in one batch, spread over both workers: the parent and its threads are fine."""
    my_pid, threads_before = os.getpid(), threading.active_count()
    alarm_handler = signal.getsignal(signal.SIGALRM)
    faults = ["raise", "exit1", "alloc_bytes", "fork_bomb", "sys_exit", "keyboard", "not_json", "segfault", "kill_parent", "loop"]
    outputs = []
    for f in faults:
        outputs += ["good", f, "bad"]
    grades = grade(pool, outputs)
    for output, g in zip(outputs, grades):
        if output in faults:
            assert g.failed, output
        else:
            assert g.scores == {"score": 1.0 if output == "good" else 0.0}
    assert os.getpid() == my_pid
    assert signal.getsignal(signal.SIGALRM) is alarm_handler  # the worker's timer never touched ours
    assert threading.active_count() <= threads_before + pool.size + 2


ORPHAN = """
import os, signal, sys, threading, time
from evalnb.sandbox import Job, SandboxPool, UserCode
pool = SandboxPool(2)
spin = "import signal\\ndef f(x):\\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\\n    while True:\\n        pass\\n"
job = Job(UserCode(spin, "<t>"), ("f",), nargs=1, timeout=600)
threading.Thread(target=pool.run_sync, args=(job, [[1], [2]]), daemon=True).start()
while len(pool.worker_pids()) < 2:
    time.sleep(0.05)
time.sleep(0.3)                             # both workers are now spinning in user code
print(os.getpid(), " ".join(map(str, pool.worker_pids())), flush=True)
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)    # no atexit, no finalizers: the kernel must clean up
"""


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_workers_do_not_outlive_their_parent(tmp_path, how):
    """Busy workers, no close(): normal exit runs the finalizer; SIGKILL relies on the parent-death signal."""
    import subprocess
    import sys

    script = tmp_path / "orphan.py"
    script.write_text(ORPHAN)
    # a temp folder of its own: other evalnb processes on the machine sweep dead owners' folders in /tmp
    private = tmp_path / "tmp"
    private.mkdir()
    env = {**os.environ, "TMPDIR": str(private)}
    out = subprocess.run([sys.executable, str(script), how], capture_output=True, text=True, timeout=60, env=env,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # fmt: skip
    child, *pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2, out.stderr
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)
    owned = _workdirs_of(child, private)
    if how == "exit":
        assert owned == []  # the finalizer removed them
    else:
        assert len(owned) == 2  # a SIGKILLed parent cannot clean up ...
        sweep = "from evalnb.sandbox.process import sweep_stale_workdirs; sweep_stale_workdirs()"
        subprocess.run([sys.executable, "-c", sweep], env=env, check=True, timeout=60)  # ... so the next pool does
        assert _workdirs_of(child, private) == []


def _workdirs_of(pid: int, folder: os.PathLike) -> list[str]:
    import glob

    from evalnb.sandbox.process import WORKDIR_PREFIX

    return glob.glob(os.path.join(folder, f"{WORKDIR_PREFIX}{pid}-*"))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_crash_after_buffered_results_fails_only_the_crashing_call(pool, tmp_path):
    """Results are batched, so a crash can lose finished calls' results: those calls run again
    on a fresh worker, and only the call named by the progress slot is failed."""
    log = tmp_path / "runs.log"
    source = f"""
import os
def grade(sample, item):
    with open({str(log)!r}, "a") as f:
        f.write(f"{{sample['sample_index']}}\\n")
    if sample["output_text"] == "exit1":
        os._exit(1)
    return sample["output_text"] == item["target"]
"""
    outputs = ["good", "bad"] * 20 + ["exit1"] + ["good"] * 9
    with SandboxPool(1, filesystem=False) as p:  # the grader counts its runs in a file of ours
        grades = grade(p, outputs, source=source)
    assert [g.error for g in grades if g.failed] == ["the sandbox worker exited with code 1"]
    assert grades[40].failed
    assert [g.scores for g in grades[:40]] == [{"score": 1.0}, {"score": 0.0}] * 20
    assert all(g.scores == {"score": 1.0} for g in grades[41:])
    runs = [int(x) for x in log.read_text().split()]
    assert runs.count(40) == 1  # the crashing call is not retried
    assert set(runs) == set(range(50))


def test_calls_that_made_model_calls_are_never_repeated(pool, tmp_path):
    from evalnb.scoring.grading import Grader

    calls = []

    async def bridge(kind, request):
        calls.append(request["input"])
        return {"output_text": "ok"}

    source = """
import os
def grade(sample, item, ctx):
    i = sample["sample_index"]
    if i % 3 == 0:
        ctx.responses_create(input=i)
    if i == 10:
        os._exit(1)
    return 1
"""
    with SandboxPool(1) as p:
        g = Grader({"contract": "model_backed", "source": source}, task_id="t", pool=p, bridge=bridge)
        samples = [{"output_text": "x", "sample_index": i} for i in range(14)]
        grades = g.grade_samples_sync(samples, [{}] * 14, model="m")
    assert [i for i, gr in enumerate(grades) if gr.failed] == [10]
    assert sorted(calls) == [0, 3, 6, 9, 12]  # each judge call made exactly once


def test_idle_worker_is_not_mistaken_for_a_stalled_one():
    """The progress slot keeps the last call's start time while idle; a new frame must not trip it."""
    with SandboxPool(1) as p:
        first = grade(p, ["good", "bad"], timeout=1)
        time.sleep(2.5)  # longer than timeout + grace
        second = grade(p, ["good", "bad"], timeout=1)
        assert p.workers_started == 1
    assert [g.scores for g in first + second] == [{"score": 1.0}, {"score": 0.0}] * 2
