"""`evalnb.sandbox_isolation()` says what holds, and a machine without namespaces is warned once.

The fallback is made for real: inside a user namespace whose `user.max_pid_namespaces` is 0,
the worker's `unshare` fails as it would in a container that forbids namespaces.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import evalnb

LINUX = sys.platform.startswith("linux")

_FALLBACK_PROBE = """
import json, warnings
import evalnb
from evalnb.sandbox import Job, SandboxPool, UserCode
warnings.simplefilter("always")
job = Job(UserCode("def f(x):\\n    return x\\n", "<t>"), names=("f",), nargs=1)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(2):  # two pools, as two runs would make
        with SandboxPool(1) as pool:
            assert pool.run_sync(job, [[1]])[0].value == 1
    report = evalnb.sandbox_isolation()
print(json.dumps({"warnings": [str(w.message) for w in caught if w.category is evalnb.SandboxIsolationWarning],
                  "report": report}))
"""


@pytest.mark.skipif(not LINUX, reason="Linux namespaces")
def test_on_this_machine_workers_are_confined():
    report = evalnb.sandbox_isolation()
    assert report["namespaces"] and report["network"] == "none" and report["seccomp"], report
    assert report["capabilities"] == "none" and report["problems"] == {}
    assert report["limits"] == {"memory_mb": 2048, "file_mb": 1024, "threads": 256, "descriptors": 256, "scratch_mb": 512,
                                "result_bytes": 16 * 1024 * 1024}
    assert report["files"] == "own root" and report["sockets"] == "none" and report["uid"] != 0
    assert not any(path == os.getcwd() or os.getcwd().startswith(path + "/") for path in report["read_only"])
    opened = evalnb.sandbox_isolation(network=True)
    assert opened["network"] == "open" and opened["sockets"] == "inet only" and opened["files"] == "own root"


def _no_namespaces_left() -> list[str]:
    """A shell prefix that runs its command where no PID namespace can be created."""
    return ["unshare", "--user", "--map-root-user", "sh", "-c",
            'echo 0 > /proc/sys/user/max_pid_namespaces && exec "$@"', "sh"]


@pytest.mark.skipif(not LINUX or shutil.which("unshare") is None, reason="needs util-linux unshare")
def test_without_namespaces_it_says_so_once_and_falls_back():
    done = subprocess.run([*_no_namespaces_left(), sys.executable, "-c", _FALLBACK_PROBE],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    if done.returncode != 0 and "max_pid_namespaces" in done.stderr:
        pytest.skip(f"cannot make a namespace-less environment here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(out["warnings"]) == 1, out["warnings"]  # once per process, not per pool
    assert "without Linux namespaces" in out["warnings"][0] and "namespace limit" in out["warnings"][0]
    report = out["report"]
    assert report["namespaces"] is False and report["network"] == "open"
    assert report["seccomp"] is True and report["sockets"] == "none"  # the filter still holds
    assert report["files"] == "landlock"  # and Landlock keeps the files (this kernel has it)
    assert "namespace limit is reached" in report["problems"]["namespaces"]


def test_turning_namespaces_off_is_reported(monkeypatch):
    monkeypatch.setenv("EVALNB_SANDBOX_NAMESPACES", "0")
    report = evalnb.sandbox_isolation()
    assert report["namespaces"] is False and report["network"] == "open"
    assert "EVALNB_SANDBOX_NAMESPACES=0" in report["problems"]["namespaces"]
    assert report["files"] == "landlock"


_READ_AND_WRITE = """
import os
def call(paths):
    out = {}
    try:
        out["read"] = open(paths[0]).read()
    except OSError as exc:
        out["read"] = type(exc).__name__
    try:
        open(paths[1], "w").write("planted")
    except OSError as exc:
        out["write"] = type(exc).__name__
    return out
"""


@pytest.mark.skipif(not LINUX, reason="Linux namespaces and Landlock")
@pytest.mark.parametrize("how", ["own root fails", "namespaces off"])
def test_where_the_own_root_cannot_be_built_landlock_keeps_your_files(tmp_path, monkeypatch, how):
    """A tmpfs the kernel refuses (a bad size) stands for a root that cannot be built."""
    from evalnb.sandbox import Job, SandboxPool, UserCode

    secret, planted = tmp_path / "secret.txt", tmp_path / "planted.txt"
    secret.write_text("the caller's secret")
    secret.chmod(0o644)
    kwargs = {"scratch_mb": -1} if how == "own root fails" else {"namespaces": False}
    job = Job(UserCode(_READ_AND_WRITE, "<t>"), names=("call",), nargs=1)
    with SandboxPool(1, **kwargs) as pool:
        (res,) = pool.run_sync(job, [[[str(secret), str(planted)]]])
        isolation = pool.isolation
    assert not isolation.get("filesystem") and isolation["landlock"], isolation
    assert res.value["read"] == "PermissionError" and not planted.exists(), res
    with SandboxPool(1, filesystem=False, **kwargs) as pool:  # the control: nothing keeps them
        (res,) = pool.run_sync(job, [[[str(secret), str(planted)]]])
    assert res.value["read"] == "the caller's secret" and planted.exists(), res
