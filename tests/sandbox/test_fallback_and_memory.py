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
import ctypes, os, struct

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
    # the calls newer kernels added (6.13: *xattrat, 6.17: file_setattr), raw, on a second file
    other = item["other"].encode()
    try:  # chattr's way: an ioctl on an open file (Landlock lets the worker open only what it keeps)
        fd = os.open(item["third"], os.O_RDONLY)
    except OSError as exc:
        tried["ioctl FS_IOC_SETFLAGS"] = "open: " + type(exc).__name__
    else:
        flags = ctypes.c_long(0)
        libc.ioctl(fd, ctypes.c_ulong(0x80086601), ctypes.byref(flags))  # FS_IOC_GETFLAGS
        flags.value |= 0x20  # FS_APPEND_FL
        attempt("ioctl FS_IOC_SETFLAGS", lambda: libc.ioctl(fd, ctypes.c_ulong(0x40086602), ctypes.byref(flags)))
        os.close(fd)
    acl = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, 7, 0xFFFFFFFF) for tag in (1, 4, 0x20))
    value = ctypes.create_string_buffer(acl, len(acl))
    args = ctypes.create_string_buffer(struct.pack("<QII", ctypes.addressof(value), len(acl), 0), 16)
    attempt("setxattrat acl", lambda: libc.syscall(463, -100, other, 0, b"system.posix_acl_access", args, 16))
    attempt("removexattrat", lambda: libc.syscall(466, -100, other, 0, b"trusted.evalnb"))
    fsx = ctypes.create_string_buffer(struct.pack("<QIIII", 0x8, 0, 0, 0, 0), 24)  # FS_XFLAG_IMMUTABLE
    attempt("file_setattr immutable", lambda: libc.syscall(469, -100, other, fsx, 24, 0))
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


def _attributes(path: Path) -> tuple:
    """Extended attributes (ACLs included) and inode flags (immutable, append-only)."""
    import fcntl

    flags = bytearray(8)
    with open(path, "rb") as f:
        fcntl.ioctl(f.fileno(), 0x80086601, flags)  # FS_IOC_GETFLAGS
    return {name: os.getxattr(path, name) for name in os.listxattr(path)}, bytes(flags), stat.S_IMODE(path.stat().st_mode)


def _clear_flags(path: Path) -> None:
    import fcntl

    with open(path, "rb") as f:
        flags = bytearray(8)
        fcntl.ioctl(f.fileno(), 0x80086601, flags)  # FS_IOC_GETFLAGS
        value = int.from_bytes(flags, "little") & ~(0x10 | 0x20)  # not immutable, not append-only
        fcntl.ioctl(f.fileno(), 0x40086602, value.to_bytes(8, "little"))  # FS_IOC_SETFLAGS


NEW_CALLS = ("setxattrat acl", "removexattrat", "file_setattr immutable", "ioctl FS_IOC_SETFLAGS")


@pytest.mark.skipif(not ROOT, reason="needs root: the fallback keeps the caller's uid, and only root may chown")
@pytest.mark.parametrize("filesystem", [True, False], ids=["landlock", "no landlock"])
@pytest.mark.parametrize("seccomp", [True, False], ids=["filtered", "control"])
def test_as_root_without_namespaces_a_grader_changes_no_file_of_the_callers(tmp_path, seccomp, filesystem):
    """Without Landlock too (``filesystem=False``): the grader may then open the file, so the
    ``FS_IOC_SETFLAGS`` ioctl is tried as well; the filter alone refuses it."""
    path = _root_owned_file(tmp_path)
    other = path.with_name("config.py")
    other.write_text("TOKEN_FILE = '~/.netrc'\n")
    other.chmod(0o644)
    os.setxattr(other, "trusted.evalnb", b"kept")
    third = path.with_name("models.py")
    third.write_text("")
    third.chmod(0o644)
    before, other_before, third_before = _state(path), _attributes(other), _attributes(third)
    try:
        with SandboxPool(1, namespaces=False, seccomp=seccomp, filesystem=filesystem) as pool:
            job = Job(UserCode(CHANGE_FILE, "attack.py"), names=("grade",), nargs=2)
            (res,) = pool.run_sync(job, [[{}, {"path": str(path), "other": str(other), "third": str(third)}]])
            assert not pool.isolation.get("own_user_namespace")
        other_after, third_after = _attributes(other), _attributes(third)
    finally:
        _clear_flags(other)
        _clear_flags(third)
    assert res.ok, res.error
    tried = res.value["judge"]
    if seccomp:
        assert _state(path) == before, tried
        assert other_after == other_before and third_after == third_before, tried
        assert all(tried[k] == "errno 1" for k in NEW_CALLS[:3]), tried
        assert tried["ioctl FS_IOC_SETFLAGS"] == ("open: PermissionError" if filesystem else "errno 1"), tried
        assert "os.chmod is not allowed in the evalnb sandbox" in tried["os.chmod"], tried
        assert all(tried[k] == "errno 1" for k in ("libc chmod", "libc chown", "libc utimes", "libc symlink",
                                                   "libc rename")), tried  # fmt: skip
    else:  # the control: the same grader with the filter off changes mode, owner and time
        mode, uid, _, mtime, _ = _state(path.with_name("settings.py.moved") if not path.exists() else path)
        assert (mode, uid, mtime) != before[:2] + (before[3],), tried
        assert tried["os.chmod"] == "done" and tried["os.chown"] == "done", tried
        assert other_after != other_before, tried  # ACL (mode), attribute removed, flags set
        assert all(tried[k] in ("done", "errno 38") for k in NEW_CALLS[:3]), tried  # 38: older kernel
        assert tried["ioctl FS_IOC_SETFLAGS"] == ("open: PermissionError" if filesystem else "done"), tried
        assert third_after != third_before or filesystem, tried


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


ABOVE_HIGHEST = r"""
import ctypes, json, os, struct, sys
from evalnb.sandbox import seccomp
path, highest = sys.argv[1], int(sys.argv[2])
if highest:
    assert seccomp.install(highest=highest) is None
libc = ctypes.CDLL(None, use_errno=True)
value = ctypes.create_string_buffer(b"x", 1)
args = ctypes.create_string_buffer(struct.pack("<QII", ctypes.addressof(value), 1, 0), 16)
result = libc.syscall(463, -100, path.encode(), 0, b"user.evalnb", args, 16)  # setxattrat
print(json.dumps({"result": result, "errno": ctypes.get_errno(), "xattrs": os.listxattr(path)}))
"""


@pytest.mark.parametrize("highest", [462, 0], ids=["filtered", "control"])
def test_calls_above_the_highest_the_filter_knows_answer_enosys(tmp_path, highest):
    """The rule for calls newer than the filter, tried on setxattrat (463) with the rule's
    boundary lowered to 462: ENOSYS, nothing changed; the control (no filter) sets the attribute."""
    import subprocess

    path = tmp_path / "settings.py"
    path.write_text("")
    done = subprocess.run([sys.executable, "-c", ABOVE_HIGHEST, str(path), str(highest)], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    if out["result"] != 0 and out["errno"] == 38 and not highest:
        pytest.skip("this kernel has no setxattrat (6.13+)")
    if highest:
        assert (out["result"], out["errno"], out["xattrs"]) == (-1, 38, []), out
    else:
        assert out["result"] == 0 and out["xattrs"] == ["user.evalnb"], out


SOCKETPAIRS = r'''
import array, os, resource, socket, time

def grade(sample, item):
    if not item.get("fill"):
        return 1
    if item.get("raise_limit"):  # the control: no filter, so the soft limit may rise to the hard one
        resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    held, total, chunk = [], 0, b"x" * 65536
    carrier = socket.socketpair()
    carrier[0].setblocking(False)
    while total < item["fill"] * 2**20:
        a, b = socket.socketpair()
        try:  # bigger buffers: refused by the filter
            a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
        except OSError:
            pass
        a.setblocking(False)
        try:
            while True:
                total += a.send(chunk)
        except BlockingIOError:
            pass
        if item.get("in_flight"):  # send both ends to itself and close them: held in flight
            try:
                carrier[0].sendmsg([b"f"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [a.fileno(), b.fileno()]))])
            except BlockingIOError:
                carrier = socket.socketpair()
                carrier[0].setblocking(False)
                held.append(carrier)
                carrier[0].sendmsg([b"f"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [a.fileno(), b.fileno()]))])
            a.close(); b.close()
        else:
            held.append((a, b))
    time.sleep(1.0)  # held while the caller looks at the machine's memory
    return {"scores": {"score": 1}, "judge": {"held_mb": total // 2**20}}
'''


def _mem_available_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    raise LookupError("MemAvailable")


def _peak_drop_mb(run) -> tuple:
    """Run ``run()``; what it returned and the peak drop of the machine's MemAvailable in MB."""
    baseline, peak, done = _mem_available_kb(), [0], threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], baseline - _mem_available_kb())
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        return run(), peak[0] // 1024
    finally:
        done.set()
        watcher.join()


@pytest.mark.parametrize("in_flight", [False, True], ids=["held", "in flight"])
@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "no namespaces"])
def test_a_grader_filling_socketpair_buffers_fails_its_sample_and_the_machine_keeps_its_memory(namespaces, in_flight):
    """256 descriptors, buffers at their default size; as root without namespaces the worker
    also loses CAP_SYS_RESOURCE, which would lift the kernel's count of descriptors in flight."""

    def run() -> list:
        with SandboxPool(1, namespaces=namespaces) as pool:
            job = Job(UserCode(SOCKETPAIRS, "socketpairs.py"), names=("grade",), nargs=2)
            return pool.run_sync(job, [[{}, {"fill": 1536, "in_flight": in_flight}], [{}, {}]])

    results, dropped_mb = _peak_drop_mb(run)
    assert not results[0].ok, results[0]
    assert "Too many open files" in results[0].error or "Too many references" in results[0].error, results[0].error
    assert results[1].ok and results[1].value == 1  # the run goes on
    assert dropped_mb < 600, dropped_mb


def test_with_the_filter_off_and_the_limit_raised_socketpairs_hold_the_memory():
    """The control: no descriptor cap and no filter (the grader raises its soft limit to the
    hard one and sizes its buffers); it holds 1.5 GB."""

    def run() -> list:
        with SandboxPool(1, namespaces=False, seccomp=False, max_files=None) as pool:
            job = Job(UserCode(SOCKETPAIRS, "socketpairs.py"), names=("grade",), nargs=2)
            return pool.run_sync(job, [[{}, {"fill": 1536, "raise_limit": True}]])

    (result,), dropped_mb = _peak_drop_mb(run)
    assert result.ok and result.value["judge"]["held_mb"] >= 1536, result
    assert dropped_mb >= 1000, dropped_mb


SCRATCH_FILES = r'''
import os, time

def grade(sample, item):
    if not item.get("fill"):
        return 1
    chunk, written, i = b"x" * 2**24, 0, 0
    while written < item["fill"] * 2**20:  # files of 256 MB: under the file size cap
        with open(os.path.join(os.environ["TMPDIR"], f"f{i}"), "wb") as f:
            for _ in range(16):
                written += f.write(chunk)
        i += 1
    time.sleep(1.0)
    return {"scores": {"score": 1}, "judge": {"written_mb": written // 2**20, "folder": os.getcwd()}}
'''

SCRATCH_CALLER = r"""
import json, sys
from evalnb.sandbox import Job, SandboxPool, UserCode
with SandboxPool(1, namespaces=False, scratch_mb=int(sys.argv[2])) as pool:
    job = Job(UserCode(sys.argv[1], "scratch.py"), names=("grade",), nargs=2)
    results = pool.run_sync(job, [[{}, {"fill": 1536}], [{}, {}]])
print(json.dumps([{"ok": r.ok, "error": r.error, "value": r.value} for r in results]))
"""


def _fill_scratch(scratch_mb: int) -> tuple[list, int]:
    """A caller with ``TMPDIR=/dev/shm`` runs the 1.5 GB grader without namespaces; the peak
    growth of the machine's Shmem in MB."""
    import subprocess

    def run() -> list:
        env = {**os.environ, "TMPDIR": "/dev/shm"}
        done = subprocess.run([sys.executable, "-c", SCRATCH_CALLER, SCRATCH_FILES, str(scratch_mb)], env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return [_Result(r) for r in json.loads(done.stdout.strip().splitlines()[-1])]

    return _fill_through_memfd(run)


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm")
def test_without_namespaces_and_tmpdir_on_tmpfs_a_grader_filling_its_scratch_fails_its_sample():
    results, grown_mb = _fill_scratch(512)
    assert not results[0].ok and "scratch folder held more than its 512 MB cap" in results[0].error, results[0]
    assert results[1].ok and results[1].value == 1  # the run goes on, in a new worker
    assert grown_mb < 600, grown_mb


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm")
def test_control_with_the_scratch_cap_lifted_the_grader_writes_its_files():
    results, _ = _fill_scratch(4096)
    assert results[0].ok and results[0].value["judge"]["written_mb"] >= 1536, results[0]
