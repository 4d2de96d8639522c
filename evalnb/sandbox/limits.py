"""Environment scrubbing (parent side) and the limits a worker puts on itself before user code.

The parent builds the worker's environment from an allow-list, so API keys, tokens and
credentials never reach user code. The worker then applies rlimits and Python-level guards
(and the kernel-level filter in ``seccomp.py``) to itself. Applying them in the worker rather
than in ``preexec_fn`` keeps process start-up safe in a threaded parent such as a Jupyter
kernel. This module imports only the standard library because the worker loads it by path.
"""

from __future__ import annotations

import os

KEPT_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
"""The only variables copied from the parent; everything else (keys, tokens...) is dropped."""

_ONE_THREAD = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def scrubbed_env(workdir: str) -> dict[str, str]:
    """A minimal environment for a worker whose home and temp folder are ``workdir``.

    Math libraries are held to one thread each: the pool already runs one worker per core,
    and a BLAS that starts a thread per core can exceed the address-space limit on big hosts.
    """
    env = {key: os.environ[key] for key in KEPT_ENV_KEYS if key in os.environ}
    env.setdefault("PATH", os.defpath)
    env.setdefault("LANG", "C.UTF-8")
    env.update(HOME=workdir, TMPDIR=workdir, TMP=workdir, TEMP=workdir)
    env.update({key: "1" for key in _ONE_THREAD})
    return env


DESCRIPTORS = 256
"""RLIMIT_NOFILE of a worker. Each descriptor can hold kernel memory no other cap counts (a
socketpair's queued data: a grader held 1.5 GB through 20,000 of them); with buffer sizes left
at their defaults (the filter refuses SO_SNDBUF, SO_RCVBUF and F_SETPIPE_SZ) and descriptors in
flight over a unix socket counted against this limit too, 256 of them hold tens of MB at most.
The worker needs a handful (its protocol pipes, stderr, a grader's files or sqlite)."""


def apply_rlimits(memory_mb: int | None, file_mb: int | None, *, threads: int | None = None,
                  descriptors: int | None = DESCRIPTORS) -> dict[str, int | None]:  # fmt: skip
    """Cap address space, file size, open files, core dumps and (``threads``) tasks; soft = hard, so they stay.

    ``threads`` is RLIMIT_NPROC, which counts the threads of the worker's uid in its user
    namespace: give it only when the worker has a user namespace of its own (elsewhere it
    counts every process of the user, and root is exempt).
    """
    import resource

    def cap(which: int, value: int) -> None:
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY and hard < value:
            value = hard
        resource.setrlimit(which, (value, value))

    if memory_mb:
        cap(resource.RLIMIT_AS, memory_mb * 1024 * 1024)
    if file_mb:
        cap(resource.RLIMIT_FSIZE, file_mb * 1024 * 1024)
    cap(resource.RLIMIT_CORE, 0)
    if descriptors:
        cap(resource.RLIMIT_NOFILE, descriptors)
    if threads:
        cap(resource.RLIMIT_NPROC, threads)
    return {"memory_mb": memory_mb, "file_mb": file_mb, "threads": threads, "descriptors": descriptors}


class ProcessCreationBlocked(PermissionError):
    """Raised by the patched process APIs inside a worker."""


def block_process_apis() -> list[str]:
    """Replace the Python entry points that start processes or signal others with a clear error.

    This is a courtesy layer with readable messages; the kernel filter is the real barrier
    (ctypes can reach libc directly).
    """
    import _posixsubprocess

    def refuse(name: str):
        def blocked(*args: object, **kwargs: object) -> None:
            raise ProcessCreationBlocked(
                f"{name} is not allowed in the evalnb sandbox (user code cannot start processes)"
            )

        blocked.__name__ = name.rsplit(".", 1)[-1]
        return blocked

    names = [
        "fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "popen",
        "execv", "execve", "execl", "execle", "execlp", "execlpe", "execvp", "execvpe",
        "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe",
    ]  # fmt: skip
    patched = []
    for name in names:
        if hasattr(os, name):
            setattr(os, name, refuse(f"os.{name}"))
            patched.append(f"os.{name}")
    _posixsubprocess.fork_exec = refuse("subprocess")  # used by subprocess and multiprocessing
    patched.append("_posixsubprocess.fork_exec")

    own_pid = os.getpid()
    real_kill, real_killpg = os.kill, os.killpg

    def kill(pid: int, sig: int) -> None:
        if pid != own_pid:  # 0 would reach the process group
            raise ProcessCreationBlocked("os.kill of another process is not allowed in the evalnb sandbox")
        real_kill(pid, sig)

    def killpg(pgid: int, sig: int) -> None:
        if pgid != own_pid:
            raise ProcessCreationBlocked("os.killpg is not allowed in the evalnb sandbox")
        real_killpg(pgid, sig)

    os.kill, os.killpg = kill, killpg
    patched += ["os.kill", "os.killpg"]
    return patched


def explain_refused_calls(*, fallback: bool) -> list[str]:
    """Give the calls the kernel filter refuses a readable error (the filter says only EPERM).

    ``os.memfd_create``: its pages are held outside the address-space cap, so a grader could
    take the machine's memory with it. In the ``fallback`` (no user namespace of its own), the
    calls that change a file's mode, owner or times, links and renames.
    """
    import errno

    def refuse(name: str, why: str):
        def blocked(*args: object, **kwargs: object) -> None:
            raise PermissionError(errno.EPERM, f"{name} is not allowed in the evalnb sandbox ({why})")

        blocked.__name__ = name.rsplit(".", 1)[-1]
        return blocked

    patched = []
    if hasattr(os, "memfd_create"):
        os.memfd_create = refuse("os.memfd_create", "its memory would be outside the worker's memory cap")
        patched.append("os.memfd_create")
    if fallback:
        why = "without namespaces the worker may change no file's mode, owner, times or links"
        for name in ("chmod", "fchmod", "lchmod", "chown", "fchown", "lchown", "utime", "mknod", "link",
                     "symlink", "rename", "replace", "setxattr", "removexattr"):
            if hasattr(os, name):
                setattr(os, name, refuse(f"os.{name}", why))
                patched.append(f"os.{name}")
    return patched


_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


def keep_read_capabilities_only() -> bool:
    """Without a user namespace of its own a root worker keeps root's capabilities: drop all but
    the two that let it read the paths it keeps as it reads them now (``CAP_DAC_OVERRIDE``,
    ``CAP_DAC_READ_SEARCH``). Why: ``CAP_SYS_RESOURCE`` lifts the kernel's count of descriptors
    in flight over a unix socket (a grader held 1.5 GB in socketpairs it had sent to itself and
    closed, past RLIMIT_NOFILE) and the pipe size cap; ``CAP_SYS_ADMIN``, ``CAP_NET_ADMIN``,
    ``CAP_FOWNER`` and the rest have nothing to do in a grader. Must run before the filter, which
    refuses ``capset``. True when the effective and permitted sets hold nothing else (and the
    inheritable one, so the ambient set, nothing at all).
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    keep = (1 << _CAP_DAC_OVERRIDE) | (1 << _CAP_DAC_READ_SEARCH)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    current = (ctypes.c_uint32 * 6)()
    capget, capset = (125, 126) if os.uname().machine.lower() in ("x86_64", "amd64") else (90, 91)
    if libc.syscall(capget, ctypes.byref(header), ctypes.byref(current)) != 0:
        return False
    wanted = (ctypes.c_uint32 * 6)(current[0] & keep, current[1] & keep, 0, 0, 0, 0)
    if libc.syscall(capset, ctypes.byref(header), ctypes.byref(wanted)) != 0:
        return False
    after = (ctypes.c_uint32 * 6)()
    if libc.syscall(capget, ctypes.byref(header), ctypes.byref(after)) != 0:
        return False
    return after[0] & ~keep == 0 and after[1] & ~keep == 0 and not any(after[2:])
