"""Linux namespaces for a worker: no other process of the machine visible, no network.

Why: a grader copied from someone else runs on the machine that holds your keys. Without
namespaces it can read ``/proc/<parent>/environ`` (a key exported before ``jupyter lab``),
``/proc/<parent>/mem`` (a key set later with ``os.environ[...]``) or copy the parent's open
files with ``pidfd_getfd``. In its own PID namespace with a fresh ``/proc`` there is no
parent to read: the worker is process 1 of a namespace that holds nothing else.

How (``enter``): the worker process calls ``unshare`` for new PID, mount, IPC and (unless
the task opted in) network namespaces, plus a user namespace when it is not root (that is
what lets an ordinary user create the others). Only the *next* child lands in the new PID
namespace, so the worker forks once: the child goes on as the worker (PID 1 there), mounts
a fresh ``/proc`` in its private mount namespace, then enters one more user namespace that
maps only its own uid, so user code keeps no capability over those namespaces (it cannot
unmount the fresh ``/proc`` to uncover the machine's). The original process stays behind,
holds nothing, waits, and exits the way the worker did, so the parent's view (pid, exit
code, the signal that killed it) is unchanged. The seccomp filter then forbids ``mount``,
``unshare``, ``setns`` and the rest.

One consequence of being PID 1: a signal the worker sends itself with no handler installed
(``os.kill(os.getpid(), SIGTERM)``) is ignored by the kernel; faults and the parent's kill
still end it. This module imports only the standard library: the worker loads it by path.
"""

from __future__ import annotations

import os
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
_PR_SET_PDEATHSIG = 1


def unavailable(reason: str) -> dict:
    """What is in force without namespaces: nothing of theirs, and the network is open."""
    return {"namespaces": False, "namespaces_error": reason, "network": True}


def enter(*, network: bool, keep_fds: tuple[int, ...]) -> dict:
    """Move this worker into new namespaces; returns what is in force (in the worker).

    On success this returns in a forked child; the calling process never returns (it waits
    for the child and exits as it did). ``keep_fds`` are the fds the worker needs: the
    waiter closes them, so the parent sees end-of-file the moment the worker dies. On
    failure nothing has changed and the dict says why (the caller then runs unconfined).
    """
    if not sys.platform.startswith("linux"):
        return unavailable(f"namespaces are Linux-only (platform {sys.platform})")
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
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
    libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)  # SIGKILL when the waiter dies (cleared by fork)
    import select

    if select.select([alive_r], [], [], 0)[0]:  # the waiter died before the line above
        os._exit(0)
    os.close(alive_r)
    info = {"namespaces": True, "pid": True, "ipc": True, "network": network, "user": as_user}
    info["mount"] = libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) == 0
    proc = info["mount"] and libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) == 0
    info["proc"] = proc
    if not proc:
        # /proc still shows the machine's processes: not isolated, whatever else holds
        info["namespaces"] = False
        info["namespaces_error"] = f"mounting a fresh /proc failed: {os.strerror(ctypes.get_errno())}"
    # One more user namespace with only our own uid: user code keeps no capability over the
    # mount and PID namespaces (and, for root, none over other users' files).
    inside_uid, inside_gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER) == 0 and _map_ids(uid, inside_uid, gid, inside_gid):
        info["capabilities"] = False
    else:
        info["capabilities"] = True
    return info


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
