"""Graders never see your keys: tried the way an attacker would, with keys where users have them.

The caller (a stand-in for a notebook kernel) is started by a launcher (a stand-in for
``jupyter lab``) with a key exported in its initial environment, holds a file with a key
open, sets one more key from Python and keeps one in a variable. Its grader
(``helpers/key_probe.py``) reads every ``/proc/<pid>/environ`` and ``/proc/<pid>/mem`` it
can see and the caller's and launcher's by pid, tries ``pidfd_getfd``, ``process_vm_readv``
and ``ptrace``, its own environment and files, and the network. It must find nothing; with
the protections switched off, the same probe finds the keys (so the probe really works).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import evalnb
from helpers import key_probe

HELPERS = Path(key_probe.__file__).parent
LINUX = sys.platform.startswith("linux")
pytestmark = pytest.mark.skipif(not LINUX, reason="namespaces and seccomp are Linux-only")


def _fragments() -> list[str]:
    return [secrets.token_hex(12) for _ in range(4)]


def _attack(tmp: Path, mode: str, python: str, *, user: int | None = None, extra_env: dict | None = None,
            pythonpath: str | None = None) -> tuple[dict, list[str]]:
    """Run the launcher -> caller -> grader chain; returns (the probe's output, the fragments)."""
    fragments = _fragments()
    (tmp / "fragments.json").write_text(json.dumps(fragments))
    (tmp / "key.txt").write_text(f"OPENAI_API_KEY=sk-file-{fragments[1]}\n")
    for name, text in (("caller.py", key_probe.CALLER), ("launcher.py", key_probe.LAUNCHER)):
        (tmp / name).write_text(text)
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "OPENAI_API_KEY": f"sk-env-{fragments[0]}",  # exported before the "notebook server" started
        "PROBE_KEY_FILE": str(tmp / "key.txt"),
        "PROBE_HELPERS": str(HELPERS if pythonpath is None else Path(pythonpath) / "helpers"),
        "PROBE_WORK": str(tmp),
        "EVALNB_HOME": str(tmp / "home"),
        **(extra_env or {}),
    }
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    out = tmp / "out.json"
    subprocess.run([python, str(tmp / "launcher.py"), str(tmp / "caller.py"), mode, str(tmp / "fragments.json"),
                    str(out)], env=env, cwd=tmp, check=True, timeout=240, user=user, group=user,
                   extra_groups=[] if user is not None else None)  # fmt: skip
    return json.loads(out.read_text()), fragments


def _assert_confined(judge: dict, *, network: bool = False) -> None:
    routes = judge["routes"]
    assert judge["found"] == [], judge["found"]
    assert routes["visible_pids"] == 1  # only the worker itself
    assert routes["own_memory"]["canary"] and routes["own_memory"]["bytes"] > 1_000_000  # the scanner works
    assert routes["pidfd_open"] == ["no other process to try"] or set(routes["pidfd_open"]) <= {"EPERM", "ESRCH"}
    assert set(routes["process_vm_readv"]) <= {"EPERM", "ESRCH"}
    assert set(routes["ptrace"]) <= {"EPERM", "ESRCH"}
    assert routes["network"] == "connected" if network else routes["network"] != "connected"


def test_a_grader_in_a_real_run_finds_no_key(tmp_path):
    output, _ = _attack(tmp_path, "run", sys.executable)
    assert output["status"] == ["completed"] and output["leaks"] == [0.0], output
    (judge,) = output["judge"]
    _assert_confined(judge)


def test_a_task_opted_into_the_network_reaches_it_and_still_no_key(tmp_path):
    output, _ = _attack(tmp_path, "run", sys.executable, extra_env={"PROBE_ALLOW_NETWORK": '["probe"]'})
    (judge,) = output["judge"]
    _assert_confined(judge, network=True)


def test_with_the_protections_off_the_same_probe_finds_every_key(tmp_path):
    """The control: namespaces and the filter off, the same chain, the same probe."""
    output, fragments = _attack(tmp_path, "pool", sys.executable, extra_env={"PROBE_UNCONFINED": "1"},
                                pythonpath=str(HELPERS.parent))
    found = output["value"]["judge"]["found"]
    where = {fragment: [f.split(":")[0] for f in found if f.endswith(fragment)] for fragment in fragments}
    assert any(w.endswith("/environ") for w in where[fragments[0]]), found  # exported before the server
    assert any(w.startswith("pidfd_getfd") for w in where[fragments[1]]), found  # the open key file
    assert any(w.endswith("/mem") for w in where[fragments[2]]), found  # set with os.environ[...] = ...
    assert any(w.endswith("/mem") for w in where[fragments[3]]), found  # a key in a variable
    assert output["value"]["judge"]["routes"]["visible_pids"] > 1


def _plain_python() -> str | None:
    """An interpreter another user may run (the test's own may live under /root)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to start a caller as another user")
def test_as_an_ordinary_user_the_user_namespace_confines_the_grader(tmp_path):
    """Linux user mode: the caller runs as `nobody` (uid 65534), the worker enters a user
    namespace to get its own PID and mount namespaces, and the same probe finds nothing."""
    python = _plain_python()
    if python is None:
        pytest.skip("no system python3 that another user can run (CI installs Debian's)")
    work = Path(tempfile_dir := os.path.join("/tmp", f"evalnb-userns-{secrets.token_hex(4)}"))
    try:
        work.mkdir(mode=0o755)
        shutil.copytree(Path(evalnb.__file__).parent, work / "lib" / "evalnb",
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(HELPERS, work / "lib" / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
        run_dir = work / "run"
        run_dir.mkdir()
        for path in [work, *work.rglob("*")]:
            mode = stat.S_IMODE(path.stat().st_mode)
            path.chmod(mode | 0o755 if path.is_dir() else mode | 0o644)
        run_dir.chmod(0o777)
        output, fragments = _attack(run_dir, "pool", python, user=65534, pythonpath=str(work / "lib"))
    finally:
        shutil.rmtree(tempfile_dir, ignore_errors=True)
    assert output["ok"], output
    isolation = output["isolation"]
    assert isolation["namespaces"] and isolation["user"] and isolation["proc"], isolation
    _assert_confined(output["value"]["judge"])
