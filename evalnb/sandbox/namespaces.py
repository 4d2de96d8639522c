"""Linux namespaces for a worker: no other process of the machine visible, no network.

Why: a grader copied from someone else runs on the machine that holds your keys. Without
namespaces it can read ``/proc/<parent>/environ`` (a key exported before ``jupyter lab``),
``/proc/<parent>/mem`` (a key set later with ``os.environ[...]``) or copy the parent's open
files with ``pidfd_getfd``. In its own PID namespace with a fresh ``/proc`` there is no
parent to read: the worker is process 1 of a namespace that holds nothing else.

How (``enter``): the worker process calls ``unshare`` for new PID, mount, IPC and (unless
the task opted in) network namespaces, plus a user namespace when it is not root (that is
what lets an ordinary user create the others). Only the *next* child lands in the new PID
namespace, so the worker forks once: the child goes on as the worker (PID 1 there), builds
its own root with a fresh ``/proc`` (``filesystem.py``; or only mounts a fresh ``/proc``
when the own root is off), and gives up privilege: root's worker becomes uid 65534 with no
groups, then every worker enters one more user namespace that maps only its own uid and
empties its capability sets, bounding set included, so user code keeps no capability over
those namespaces (it cannot unmount anything to uncover the machine's files) nor over any
file, and ``RLIMIT_NPROC`` counts its threads alone (root is never held to it, uid 65534 in
a namespace of its own is). The original process stays behind, holds nothing, waits, and
exits the way the worker did, so the parent's view (pid, exit code, the signal that killed
it) is unchanged. The seccomp filter then forbids ``mount``, ``unshare``, ``setns`` and the
rest, and sets ``no_new_privs``.

One consequence of being PID 1: a signal the worker sends itself with no handler installed
(``os.kill(os.getpid(), SIGTERM)``) is ignored by the kernel; faults and the parent's kill
still end it. This module imports only the standard library: the worker loads it by path.
"""

from __future__ import annotations

import os
import sys

if __package__:
    from . import filesystem as fs
else:  # loaded by path in the worker: its sibling the same way
    import importlib.util as _util

    _spec = _util.spec_from_file_location("_evalnb_sandbox_filesystem", os.path.join(os.path.dirname(__file__), "filesystem.py"))
    fs = _util.module_from_spec(_spec)  # type: ignore[arg-type]
    _spec.loader.exec_module(fs)  # type: ignore[union-attr]

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 1, 4, 24, 47, 4
_PR_SET_NO_NEW_PRIVS, _PR_GET_NO_NEW_PRIVS = 38, 39
WORKER_UID = 65534
"""The uid (and gid) a root caller's worker runs as: it owns no file of the machine."""


def unavailable(reason: str) -> dict:
    """What is in force without namespaces: nothing of theirs, and the network is open."""
    return {"namespaces": False, "namespaces_error": reason, "network": True}


def enter(*, network: bool, keep_fds: tuple[int, ...], filesystem: dict | None = None) -> dict:
    """Move this worker into new namespaces; returns what is in force (in the worker).

    On success this returns in a forked child; the calling process never returns (it waits
    for the child and exits as it did). ``keep_fds`` are the fds the worker needs: the
    waiter closes them, so the parent sees end-of-file the moment the worker dies. On
    failure nothing has changed and the dict says why (the caller then runs unconfined).
    ``filesystem`` (``workdir``, ``scratch_mb``): give the worker a root of its own (see
    ``filesystem.py``); None keeps the machine's files in view.
    """
    if not sys.platform.startswith("linux"):
        return unavailable(f"namespaces are Linux-only (platform {sys.platform})")
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | (0 if network else CLONE_NEWNET)
    as_user = uid != 0
    if as_user:
        flags |= CLONE_NEWUSER
    if libc.unshare(flags) != 0:
        return unavailable(_why(ctypes.get_errno(), as_user))
    if as_user:
        _map_ids(0, uid, 0, gid)  # root inside, for the mounts below; dropped again after them
    alive_r, alive_w = os.pipe()  # the waiter holds the write end: EOF means it is gone
    child = os.fork()
    if child:
        os.close(alive_r)
        _wait_and_mirror(child, keep_fds)  # never returns
    os.close(alive_w)
    _stay_with_waiter(libc, alive_r)
    info = {"namespaces": True, "pid": True, "ipc": True, "network": network, "user": as_user}
    info["mount"] = libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) == 0
    info["filesystem"] = False
    # root's worker gives up root: it runs as an uid that owns no file of the machine
    owner = (0, 0) if as_user else (WORKER_UID, WORKER_UID)
    user = (uid, gid) if as_user else (WORKER_UID, WORKER_UID)  # what user code will see (see below)
    if filesystem is not None and info["mount"]:
        try:
            info["read_only"] = fs.pivot(libc, root=filesystem["workdir"], workdir=filesystem["workdir"],
                                         scratch_mb=int(filesystem["scratch_mb"]), network=network, owner=owner,
                                         user=user)
            info["filesystem"] = info["proc"] = True
            info["scratch_mb"] = int(filesystem["scratch_mb"])
        except (fs.SetupError, OSError) as exc:
            info["filesystem_error"] = f"building the worker's own root failed ({exc})"
    if not info["filesystem"]:
        proc = info["mount"] and libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) == 0
        info["proc"] = proc
        if not proc:
            # /proc still shows the machine's processes: not isolated, whatever else holds
            info["namespaces"] = False
            info["namespaces_error"] = f"mounting a fresh /proc failed: {os.strerror(ctypes.get_errno())}"
    if not as_user:
        hidden = None if info["filesystem"] else _unreachable_for_others()
        if hidden is None:
            info["uid_dropped"] = _become(libc, WORKER_UID, WORKER_UID)
            _stay_with_waiter(libc, alive_r)  # a uid change clears the parent-death signal
        else:
            info["uid_dropped"] = False
            info["uid_error"] = (f"the worker stays root (without capabilities): uid {WORKER_UID} could not read "
                                 f"its interpreter's files in {hidden}")
    os.close(alive_r)
    # One more user namespace with only our own uid: user code keeps no capability over the
    # mount and PID namespaces (and none over files), and its thread count is its own.
    current_uid, current_gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER) == 0 and _map_ids(user[0], current_uid, user[1], current_gid):
        info["own_user_namespace"] = True
    else:
        info["own_user_namespace"] = False
    info["capabilities"] = not _drop_capabilities(libc)
    return info


def _stay_with_waiter(libc: object, alive_r: int) -> None:
    """SIGKILL this worker when the waiter dies; exit now if it already has."""
    import select

    libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)  # type: ignore[attr-defined]
    if select.select([alive_r], [], [], 0)[0]:  # the waiter died before the line above
        os._exit(0)


def _unreachable_for_others() -> str | None:
    """A folder of the interpreter that another uid cannot reach (e.g. a Python under /root), or None."""
    import stat
    import sysconfig

    for path in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"], os.path.dirname(os.path.abspath(__file__))}:
        probe = path
        while True:
            try:
                mode = os.stat(probe).st_mode
            except OSError:
                return probe
            if not mode & stat.S_IXOTH or not mode & stat.S_IROTH and probe == path:
                return probe
            parent = os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
    return None


def _become(libc: object, uid: int, gid: int) -> bool:
    """Root's worker turns into ``uid``/``gid`` with no groups (the kernel clears its capabilities)."""
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError:
        return False
    libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)  # type: ignore[attr-defined]  # so it may write its own uid_map
    return os.getuid() == uid


def _drop_capabilities(libc: object) -> bool:
    """Empty the bounding, ambient, effective, permitted and inheritable sets; True if they are."""
    import ctypes

    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # type: ignore[attr-defined]
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # type: ignore[attr-defined]
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # type: ignore[attr-defined]  # also when the filter is off
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable}, all zero
    capset = 126 if os.uname().machine.lower() in ("x86_64", "amd64") else 91
    if libc.syscall(capset, ctypes.byref(header), ctypes.byref(data)) != 0:  # type: ignore[attr-defined]
        return False
    try:
        with open("/proc/self/status") as f:
            status = dict(line.split(":", 1) for line in f if line.startswith("Cap"))
    except OSError:
        return False
    empty = all(int(status[k].strip(), 16) == 0 for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb") if k in status)
    return empty and libc.prctl(_PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1  # type: ignore[attr-defined]


def _why(code: int, as_user: bool) -> str:
    """``unshare`` failed: say why in terms of what to change."""
    import errno

    if code == errno.EPERM:
        who = "user namespaces for ordinary users" if as_user else "namespaces"
        return f"this kernel or container does not allow {who} (unshare: EPERM)"
    if code == errno.ENOSPC:
        return "the namespace limit is reached (sysctl user.max_*_namespaces; unshare: ENOSPC)"
    if code == errno.EINVAL:
        return "this kernel lacks a namespace kind evalnb needs (unshare: EINVAL)"
    return f"unshare failed: {os.strerror(code)}"


def _map_ids(uid: int, outer_uid: int, gid: int, outer_gid: int) -> bool:
    """Map one uid and gid of the new user namespace to the ones outside it."""
    try:
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {outer_uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {outer_gid} 1")
    except OSError:
        return False
    return True


def _wait_and_mirror(child: int, fds: tuple[int, ...]) -> None:
    """The waiter: drop every fd the worker uses, wait for it, then end the same way."""
    import signal

    for fd in (0, 1, 2, *fds):
        try:
            os.close(fd)
        except OSError:
            pass
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(1)
    if os.WIFSIGNALED(status):
        import resource

        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the worker's crash, not a core of ours
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)
