"""The collector settings a run changes (evalnb._gc) come back exactly as they were."""

import gc
import threading

from evalnb._gc import RUN_GEN0_THRESHOLD, fewer_collections, gc_paused


def test_fewer_collections_freezes_and_restores():
    before = gc.get_threshold()
    frozen_before = gc.get_freeze_count()
    with fewer_collections():
        assert gc.get_threshold()[0] >= RUN_GEN0_THRESHOLD
        assert gc.get_threshold()[1:] == before[1:]
        assert gc.get_freeze_count() > frozen_before  # the heap that existed is skipped
        with fewer_collections():  # a second run in the same process (another thread, say)
            assert gc.get_threshold()[0] >= RUN_GEN0_THRESHOLD
        assert gc.get_threshold()[0] >= RUN_GEN0_THRESHOLD  # the outer run still holds it
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_fewer_collections_restores_after_an_error():
    before = gc.get_threshold()
    try:
        with fewer_collections():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_cycles_made_during_a_run_are_still_collected():
    class Node:
        pass

    with fewer_collections():
        a, b = Node(), Node()
        a.other, b.other = b, a
        alive = [gc.get_referrers]  # noqa: F841 - keep something else allocated
        del a, b
        assert gc.collect() >= 2  # an explicit collection still finds the cycle


def test_gc_paused_overlapping_threads_reenable_only_at_the_end():
    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()

    def hold():
        with gc_paused():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=hold)
    t.start()
    inside.wait(5)
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's pause is still on
    release.set()
    t.join(5)
    assert gc.isenabled()


def test_gc_paused_keeps_a_disabled_collector_disabled():
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


# ---- freeze_at_exit: a process that ran evalnb skips the shutdown collections -----------------
_EXIT_PROBE = """
import atexit, gc, sys
# registered first, so it runs after evalnb's hook (atexit is last-in, first-out)
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count(), flush=True))
import evalnb._gc as g
before = atexit._ncallbacks()
g.freeze_at_exit()
g.freeze_at_exit()  # once per process
print("hooks added:", atexit._ncallbacks() - before, flush=True)
"""

_RUN_PROBE = """
import atexit, gc, json, sys
from pathlib import Path
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count(), flush=True))
import evalnb
from evalnb.testing import LocalModelServer
folder = Path(sys.argv[1])
(folder / "rows.jsonl").write_text("".join(json.dumps({"q": str(i), "a": str(i)}) + "\\n" for i in range(5)))
suite = evalnb.Suite.from_dict({"tasks": [{"id": "t", "type": "qa",
    "dataset": {"path": str(folder / "rows.jsonl"), "format": "jsonl"},
    "prompt_template": "{{q}}", "target_template": "{{a}}", "metrics": [{"id": "exact_match"}],
    "grader": {"metric_id": "exact_match", "source": "def grade(sample, item):\\n    return float(sample['extracted_output'] == item['target'])\\n"}}]})
with LocalModelServer(lambda request: "3") as server:
    result = evalnb.run(suite, [evalnb.Model("m", base_url=server.base_url, api="chat")], progress=False)
print("accuracy:", float(result.metrics["mean"].iloc[0]), flush=True)
"""


def _probe(code: str, *args: str, **env: str) -> str:
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_freeze_at_exit_is_off_in_a_process_evalnb_does_not_own():
    out = _probe(_EXIT_PROBE)  # a user's script or a notebook kernel
    assert "hooks added: 0" in out
    assert "frozen at exit: 0" in out


def test_freeze_at_exit_registers_once_when_asked_and_freezes_the_heap_at_exit():
    out = _probe(_EXIT_PROBE, EVALNB_FAST_EXIT="1")
    assert "hooks added: 1" in out
    frozen = int(out.split("frozen at exit:")[1].split()[0])
    assert frozen > 1000  # the interpreter's own heap at least


def test_the_evalnb_command_owns_its_process_unless_told_not_to():
    owned = "import evalnb._gc as g\ng.own_this_process()\n"
    out = _probe(_EXIT_PROBE.replace("import evalnb._gc as g\n", owned))
    assert "hooks added: 1" in out
    out = _probe(_EXIT_PROBE.replace("import evalnb._gc as g\n", owned), EVALNB_FAST_EXIT="0")
    assert "hooks added: 0" in out and "frozen at exit: 0" in out


def test_a_run_in_a_users_process_leaves_no_exit_freeze(tmp_path):
    out = _probe(_RUN_PROBE, str(tmp_path), EVALNB_HOME=str(tmp_path / "home"))
    assert "accuracy: 0.2" in out  # the run really ran: one of five rows answers "3"
    assert "frozen at exit: 0" in out


def test_a_run_keeps_the_exit_freeze_when_asked(tmp_path):
    out = _probe(_RUN_PROBE, str(tmp_path), EVALNB_HOME=str(tmp_path / "home"), EVALNB_FAST_EXIT="1")
    assert int(out.split("frozen at exit:")[1].split()[0]) > 1000


_CALLER_STATE_PROBE = """
import gc, json, sys
from pathlib import Path
import evalnb
from evalnb.testing import LocalModelServer
folder = Path(sys.argv[1])
(folder / "rows.jsonl").write_text("".join(json.dumps({"q": str(i), "a": str(i)}) + "\\n" for i in range(5)))
suite = evalnb.Suite.from_dict({"tasks": [{"id": "t", "type": "qa",
    "dataset": {"path": str(folder / "rows.jsonl"), "format": "jsonl"},
    "prompt_template": "{{q}}", "grader": {"source": "def grade(sample, item):\\n    return 1\\n"}}]})
keep = [[i] for i in range(1000)]
gc.freeze()                       # the caller's own frozen objects
gc.set_threshold(1234, 11, 12)
gc.disable() if sys.argv[2] == "disabled" else None
def frozen(obj):  # frozen objects sit in the permanent generation, which get_objects() skips
    return not any(o is obj for o in gc.get_objects())
before = [frozen(keep), list(gc.get_threshold()), gc.isenabled()]
count = gc.get_freeze_count()
with LocalModelServer(lambda request: "3") as server:
    result = evalnb.run(suite, [evalnb.Model("m", base_url=server.base_url, api="chat")], progress=False)
after = [frozen(keep), list(gc.get_threshold()), gc.isenabled()]
print(json.dumps({"before": before, "after": after, "status": result.status,
                  "count": count, "count_after": gc.get_freeze_count()}))
"""


def test_a_run_leaves_the_callers_collector_exactly_as_it_found_it(tmp_path):
    """gc.freeze() of the caller's, a custom threshold, a disabled collector: all still there."""
    for state in ("enabled", "disabled"):
        folder = tmp_path / state
        folder.mkdir()
        out = _probe(_CALLER_STATE_PROBE, str(folder), state, EVALNB_HOME=str(folder / "home"))
        report = __import__("json").loads(out.strip().splitlines()[-1])
        assert report["status"] == "completed"
        assert report["before"][0] and report["count"] > 1000  # the caller really froze its heap
        assert report["after"] == report["before"], report  # still frozen, same threshold and state
        assert report["count_after"] > report["count"] * 0.9  # (objects freed since leave the count)


# ---- quiet_import: a big import during a run is neither traversed nor left behind ----------
def test_quiet_import_inside_a_run_freezes_what_it_made_with_the_collector_off():
    from evalnb._gc import quiet_import

    class Module:
        pass

    with fewer_collections():
        frozen_before = gc.get_freeze_count()
        with quiet_import():
            assert not gc.isenabled()  # no collection traverses the new objects
            made = [Module() for _ in range(5_000)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen_before + 5_000  # they joined the frozen heap
        assert gc.get_count()[0] < 5_000
    assert gc.get_freeze_count() == 0  # the run's end thaws everything
    assert len(made) == 5_000


def test_quiet_import_outside_a_run_freezes_nothing():
    from evalnb._gc import quiet_import

    with quiet_import():
        assert not gc.isenabled()
        made = [object() for _ in range(100)]
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert len(made) == 100


def test_quiet_import_that_fails_restores_the_collector():
    from evalnb._gc import quiet_import

    with fewer_collections():
        try:
            with quiet_import():
                raise ImportError("no such module")
        except ImportError:
            pass
        assert gc.isenabled()
    assert gc.get_freeze_count() == 0
