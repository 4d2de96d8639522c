"""What user code prints in the sandbox comes back with that call's result (`CallResult.log`)."""

from __future__ import annotations

import pytest

from evalnb.sandbox import Job, SandboxPool, UserCode
from evalnb.sandbox.worker import LOG_CHARS

CODE = """
import sys
print("loading the module")          # not any call's output

def quiet(x):
    return x

def chatty(x):
    print("got", x)
    sys.stderr.write(f"warn {x}\\n")
    sys.stdout.write("done\\n")
    return x

def raises(x):
    print("about to fail on", x)
    raise ValueError(f"bad {x}")

def flood(x):
    for i in range(x):
        print(f"line {i:06d}")
    return x

def stalls(x):
    import time
    print("before the stall")
    while True:
        time.sleep(0.01)
"""


def job(name: str, **kw) -> Job:
    return Job(UserCode(CODE, "<logs>"), (name,), nargs=1, **kw)


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(1) as p:
        yield p


def test_each_call_gets_what_it_printed_to_stdout_and_stderr_in_order(pool):
    results = pool.run_sync(job("chatty"), [[1], [2]])
    assert [r.value for r in results] == [1, 2]
    assert [r.log for r in results] == ["got 1\nwarn 1\ndone\n", "got 2\nwarn 2\ndone\n"]


def test_a_call_that_prints_nothing_has_no_log_and_module_output_is_not_a_calls(pool):
    (first,) = pool.run_sync(job("quiet"), [["x"]])  # the module printed while loading
    assert first.ok and first.value == "x" and first.log is None


def test_a_call_that_raises_keeps_what_it_printed(pool):
    ok, bad = pool.run_sync(job("raises"), [[1], [2]])
    assert not ok.ok and "ValueError: bad 1" in ok.error
    assert ok.log == "about to fail on 1\n" and bad.log == "about to fail on 2\n"


def test_only_the_last_few_kb_are_kept(pool):
    (result,) = pool.run_sync(job("flood"), [[5000]])  # 5000 lines of 12 characters: ~60 KB
    assert result.ok
    assert len(result.log) == LOG_CHARS
    assert result.log.endswith("line 004999\n")
    assert "line 000000" not in result.log


def test_a_call_that_times_out_keeps_what_it_printed():
    with SandboxPool(1) as pool:
        (result,) = pool.run_sync(job("stalls", timeout=1), [[0]])
    assert not result.ok and "timed out" in result.error
    assert result.log == "before the stall\n"
