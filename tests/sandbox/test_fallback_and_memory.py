"""Without namespaces nothing outside the worker changes; memory outside the caps is refused (issue 31).

As root with namespaces off (``EVALNB_SANDBOX_NAMESPACES=0``: the worker keeps uid 0), a
grader chmods, chowns and re-times a root-owned 0644 file of the caller's, through ``os`` and
through libc directly; the file's mode, owner and mtime are unchanged. A grader fills 1.5 GB
through ``memfd_create`` (Python's and the raw syscall): its sample fails with a message that
says why, the next sample is graded, and the machine's ``Shmem`` (``/proc/meminfo``, judged
from outside while it runs) grows less than 600 MB. Each with the control: the same grader
with the filter off changes the file and holds the memory.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from evalnb.sandbox import Job, SandboxPool, UserCode

LINUX = sys.platform.startswith("linux")
ROOT = LINUX and os.getuid() == 0
SYSTEM_PYTHON = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)), None)
pytestmark = pytest.mark.skipif(not LINUX, reason="seccomp is Linux-only")

CHANGE_FILE = r'''
import ctypes, os

def grade(sample, item):
    path = item["path"]
    libc = ctypes.CDLL(None, use_errno=True)
    tried = {}
    def attempt(name, fn):
        try:
            result = fn()
            tried[name] = "done" if not result else "errno %d" % ctypes.get_errno()
        except OSError as exc:
            tried[name] = str(exc)
    attempt("os.chmod", lambda: os.chmod(path, 0o777))
    attempt("os.chown", lambda: os.chown(path, 65534, 65534))
    attempt("os.utime", lambda: os.utime(path, (0, 0)))
    attempt("libc chmod", lambda: libc.chmod(path.encode(), 0o777))
    attempt("libc chown", lambda: libc.chown(path.encode(), 65534, 65534))
    attempt("libc utimes", lambda: libc.utimes(path.encode(), None))
    attempt("libc symlink", lambda: libc.symlink(b"/etc/passwd", (path + ".link").encode()))
    attempt("libc rename", lambda: libc.rename(path.encode(), (path + ".moved").encode()))
    return {"scores": {"score": 1}, "judge": tried}
'''

MEMFD = r'''
import ctypes, os, time

def grade(sample, item):
    if not item.get("fill"):
        return 1
    chunk, fds, written = b"x" * (64 * 1024 * 1024), [], 0
    while written < item["fill"] * 1024 * 1024:  # files of 256 MB each: under the file size cap
        try:
            fd = os.memfd_create("fill")
        except OSError:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.syscall(319 if os.uname().machine == "x86_64" else 279, b"fill", 0)  # the raw call
            if fd < 0:
                raise  # the readable error of os.memfd_create
        fds.append(fd)
        for _ in range(4):
            written += os.write(fd, chunk)
    time.sleep(1.0)  # held while the caller looks at the machine's memory
    for fd in fds:
        os.close(fd)
    return {"scores": {"score": 1}, "judge": {"written_mb": written // (1024 * 1024)}}
'''


def _root_owned_file(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    folder.chmod(0o755)
    path = folder / "settings.py"
    path.write_text("KEY_FILE = '~/.netrc'\n")
    path.chmod(0o644)
    os.utime(path, (1_700_000_000, 1_700_000_000))
    return path


def _state(path: Path) -> tuple:
    info = path.stat()
    return stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, int(info.st_mtime), sorted(os.listdir(path.parent))


@pytest.mark.skipif(not ROOT, reason="needs root: the fallback keeps the caller's uid, and only root may chown")
@pytest.mark.parametrize("seccomp", [True, False], ids=["filtered", "control"])
def test_as_root_without_namespaces_a_grader_changes_no_file_of_the_callers(tmp_path, seccomp):
    path = _root_owned_file(tmp_path)
    before = _state(path)
    with SandboxPool(1, namespaces=False, seccomp=seccomp) as pool:
        job = Job(UserCode(CHANGE_FILE, "attack.py"), names=("grade",), nargs=2)
        (res,) = pool.run_sync(job, [[{}, {"path": str(path)}]])
        assert not pool.isolation.get("own_user_namespace")
    assert res.ok, res.error
    tried = res.value["judge"]
    if seccomp:
        assert _state(path) == before, tried
        assert "os.chmod is not allowed in the evalnb sandbox" in tried["os.chmod"], tried
        assert all(tried[k] == "errno 1" for k in ("libc chmod", "libc chown", "libc utimes", "libc symlink",
                                                   "libc rename")), tried  # fmt: skip
    else:  # the control: the same grader with the filter off changes mode, owner and time
        mode, uid, _, mtime, _ = _state(path.with_name("settings.py.moved") if not path.exists() else path)
        assert (mode, uid, mtime) != before[:2] + (before[3],), tried
        assert tried["os.chmod"] == "done" and tried["os.chown"] == "done", tried


def _shmem_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1])
    raise LookupError("Shmem")


NOBODY_CALLER = r"""
import json, sys
from evalnb.sandbox import Job, SandboxPool, UserCode
with SandboxPool(1) as pool:
    job = Job(UserCode(sys.argv[1], "memfd.py"), names=("grade",), nargs=2)
    results = pool.run_sync(job, [[{}, {"fill": 1536}], [{}, {}]])
print(json.dumps([{"ok": r.ok, "error": r.error, "value": r.value} for r in results]))
"""


class _Result:
    def __init__(self, raw: dict) -> None:
        self.ok, self.error, self.value = raw["ok"], raw["error"], raw["value"]


def _as_nobody(base: Path) -> list:
    """The same two calls in a caller running as `nobody` (a system python3, evalnb copied where it can read)."""
    import shutil
    import subprocess

    import evalnb

    lib = base / "lib"
    shutil.copytree(Path(evalnb.__file__).parent, lib / "evalnb", ignore=shutil.ignore_patterns("__pycache__"))
    for path in [base, *base.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    done = subprocess.run([SYSTEM_PYTHON, "-c", NOBODY_CALLER, MEMFD], env={"PYTHONPATH": str(lib), "PATH": os.defpath},
                          cwd="/", user=65534, group=65534, extra_groups=[], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [_Result(r) for r in json.loads(done.stdout.strip().splitlines()[-1])]


def _fill_through_memfd(run=None, **pool_options) -> tuple[list, int]:
    """Run the memfd grader (1.5 GB) and a plain one; the peak growth of the machine's Shmem in MB."""
    baseline, peak, done = _shmem_kb(), [0], threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _shmem_kb() - baseline)
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        if run is not None:
            results = run()
        else:
            with SandboxPool(1, **pool_options) as pool:
                job = Job(UserCode(MEMFD, "memfd.py"), names=("grade",), nargs=2)
                results = pool.run_sync(job, [[{}, {"fill": 1536}], [{}, {}]])
    finally:
        done.set()
        watcher.join()
    return results, peak[0] // 1024


@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "no namespaces"])
def test_a_grader_filling_memory_through_memfd_fails_its_sample_and_the_machine_keeps_its_memory(namespaces):
    results, grown_mb = _fill_through_memfd(namespaces=namespaces)
    assert not results[0].ok and "memfd_create is not allowed in the evalnb sandbox" in results[0].error, results[0]
    assert "memory cap" in results[0].error
    assert results[1].ok and results[1].value == 1  # the next sample is graded: the run goes on
    assert grown_mb < 600, grown_mb


@pytest.mark.skipif(not ROOT or SYSTEM_PYTHON is None, reason="needs root and a system python3 for `nobody`")
def test_as_nobody_memfd_is_refused_too():
    import secrets
    import shutil

    base = Path(f"/tmp/evalnb-memfd-{secrets.token_hex(4)}")  # a folder `nobody` can enter
    base.mkdir()
    try:
        results, grown_mb = _fill_through_memfd(lambda: _as_nobody(base))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert not results[0].ok and "memfd_create is not allowed in the evalnb sandbox" in results[0].error, results[0]
    assert results[1].ok and results[1].value == 1
    assert grown_mb < 600, grown_mb


def test_with_the_filter_off_memfd_holds_the_memory():
    """The control: no filter, no address-space cap at stake; the grader holds 1.5 GB of Shmem."""
    results, grown_mb = _fill_through_memfd(seccomp=False, namespaces=False)
    assert results[0].ok and results[0].value["judge"]["written_mb"] >= 1536, results[0]
    assert grown_mb >= 1400, grown_mb
