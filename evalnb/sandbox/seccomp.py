"""A kernel-level (seccomp-BPF) filter a worker installs on itself before running user code.

Why: rlimits cannot stop a fork bomb when running as root (RLIMIT_NPROC is not enforced for
root and counts every process of a user otherwise), and Python-level patches can be bypassed
with ctypes. A seccomp filter cannot be removed once installed and is inherited by threads.

What it refuses (EPERM): creating processes (fork, vfork, clone without CLONE_THREAD),
exec, signalling, tracing or reaching into any process other than the worker itself
(ptrace, process_vm_readv/writev, pidfd_open/pidfd_getfd, process_madvise, kcmp, and
``kill(0, ...)``, which would reach the worker's process group), raising rlimits, clearing
the parent-death signal (``prctl(PR_SET_PDEATHSIG)``, and the uid/gid changes that clear
it), mounting or leaving the worker's namespaces (mount, umount, the new mount API,
pivot_root, chroot, setns, unshare, open_by_handle_at), sockets (``socket`` for every family,
or every family but AF_INET/AF_INET6 for a task opted into the network: no unix socket such as
ssh-agent's or Docker's, no netlink, no vsock; ``socketpair`` stays), the kernel keyrings, io_uring,
bpf, perf events, userfaultfd, memory outside every cap (``memfd_create``, System V
``shmget``, and sizing socket or pipe buffers: ``SO_SNDBUF``/``SO_RCVBUF`` and their FORCE
forms, ``F_SETPIPE_SZ``, so what a descriptor holds stays at the default and RLIMIT_NOFILE
bounds the total), and on x86-64 a handful of host-administration calls
(reboot, module loading, clock setting, swap, acct). Without a user namespace of its own
(the fallback), also every change of a file's mode, owner, times, extended attributes
(``setxattrat`` too: a POSIX ACL is a chmod by another name) or flags (``file_setattr``, the
``FS_IOC_SETFLAGS``/``FS_IOC_FSSETXATTR`` ioctls: immutable, append-only), ``mknod``,
``link``/``symlink`` and ``rename``. Every call numbered above the highest this filter knows
(``_HIGHEST_KNOWN``) answers ENOSYS, so a call a later kernel adds is refused until it has been
looked at, and the C library falls back as on an older kernel. Threads still work: clone3 answers
ENOSYS so libc falls back to clone, whose flags the filter can inspect. Supported on Linux x86-64 and aarch64; elsewhere
``install`` returns a reason and the worker relies on rlimits and Python-level guards.
This module imports only the standard library because the worker loads it by path.
"""

from __future__ import annotations

import os
import struct
import sys

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS = 1, 38
_CLONE_THREAD = 0x00010000
_X32_BIT = 0x40000000

# name -> (x86_64, aarch64) syscall numbers; None where the call does not exist.
_DENIED = {
    "fork": (57, None), "vfork": (58, None), "execve": (59, 221), "execveat": (322, 281),
    # reaching into other processes
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "pidfd_send_signal": (424, 424), "pidfd_open": (434, 434), "pidfd_getfd": (438, 438),
    "process_madvise": (440, 440), "process_mrelease": (448, 448), "kcmp": (312, 272),
    # limits, credentials (a uid change clears the parent-death signal), capabilities
    "setrlimit": (160, 164), "setuid": (105, 146), "setgid": (106, 144), "setreuid": (113, 145),
    "setregid": (114, 143), "setresuid": (117, 147), "setresgid": (119, 149), "setfsuid": (122, 151),
    "setfsgid": (123, 152), "capset": (126, 91),
    # leaving or reshaping the worker's namespaces and mounts
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "setns": (308, 268), "unshare": (272, 97), "open_by_handle_at": (304, 265),
    "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430), "fsconfig": (431, 431),
    "fsmount": (432, 432), "fspick": (433, 433), "mount_setattr": (442, 442), "open_tree_attr": (467, 467),
    # kernel keyrings (secrets of other processes may live there), io_uring, bpf, perf
    "add_key": (248, 217), "request_key": (249, 218), "keyctl": (250, 219),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    # memory no cap counts: memfd pages and System V segments live outside the address space
    # (RLIMIT_AS) and, for SysV, outlive the worker where it has no IPC namespace of its own
    "memfd_create": (319, 279), "shmget": (29, 194),
}  # fmt: skip
# Refused only without a user namespace of its own (the fallback), where the worker keeps the
# caller's uid (or root) and Landlock, which does not cover them, is the only file barrier:
# changing modes, owners, times and extended attributes, device nodes, links and renames.
_FALLBACK_DENIED = {
    "chmod": (90, None), "fchmod": (91, 52), "fchmodat": (268, 53), "fchmodat2": (452, 452),
    "chown": (92, None), "fchown": (93, 55), "lchown": (94, None), "fchownat": (260, 54),
    "utime": (132, None), "utimes": (235, None), "futimesat": (261, None), "utimensat": (280, 88),
    "mknod": (133, None), "mknodat": (259, 33), "link": (86, None), "linkat": (265, 37),
    "symlink": (88, None), "symlinkat": (266, 36), "rename": (82, None), "renameat": (264, 38),
    "renameat2": (316, 276), "setxattr": (188, 5), "lsetxattr": (189, 6), "fsetxattr": (190, 7),
    "removexattr": (197, 14), "lremovexattr": (198, 15), "fremovexattr": (199, 16),
    "setxattrat": (463, 463), "removexattrat": (466, 466), "file_setattr": (469, 469),
}  # fmt: skip
# ioctl(fd, cmd) commands refused in the fallback: file flags (immutable, append-only) and the
# fsxattr flags, the ioctl forms of `chattr` (Landlock checks no ioctl on regular files)
_FALLBACK_IOCTLS = (0x40086602, 0x40046602, 0x401C5820)  # FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR
_IOCTL = (16, 29)
_HIGHEST_KNOWN = 469
"""The highest system call number this filter was written against (Linux 6.17, ``file_setattr``).
Every number above it answers ENOSYS: a call a later kernel adds (as 6.13 added ``setxattrat``,
a chmod by another name through POSIX ACLs) is refused until someone has looked at it, and
ENOSYS, what an older kernel says, makes the C library fall back to the older call."""
_ADMIN_X86_64 = (  # reboot/modules/clocks/swap/acct/hostnames... only checked on x86-64
    159, 163, 164, 167, 168, 169, 170, 171, 175, 176, 227, 246, 305, 313, 320,
)
_PRCTL = (157, 167)
_PR_SET_PDEATHSIG = 1
_SELF_ONLY = {  # allowed only when the first argument is the worker's own pid
    "kill": (62, 129), "tkill": (200, 130), "tgkill": (234, 131),
    "rt_sigqueueinfo": (129, 138), "rt_tgsigqueueinfo": (297, 240),
}  # fmt: skip
_CLONE, _CLONE3, _PRLIMIT64 = (56, 220), (435, 435), (302, 261)
_SOCKET = (41, 198)
# Kernel memory a grader could hold through a few hundred descriptors once it may size their
# buffers: socket buffers (SO_SNDBUF/SO_RCVBUF up to net.core.[wr]mem_max each, the FORCE forms
# without any cap for a process with CAP_NET_ADMIN, which a worker has in its own network
# namespace) and pipe buffers (F_SETPIPE_SZ). Left at their defaults, RLIMIT_NOFILE bounds them.
_SETSOCKOPT, _SOL_SOCKET, _BUFFER_OPTIONS = (54, 208), 1, (7, 8, 32, 33)  # SO_SNDBUF, SO_RCVBUF, *FORCE
_FCNTL, _F_SETPIPE_SZ = (72, 25), 1031
_AF_INET, _AF_INET6 = 2, 10
_ARCHES = {"x86_64": (0, 0xC000003E), "amd64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7), "arm64": (1, 0xC00000B7)}


def _program(arch: str, own_pid: int, network: bool = False, fallback: bool = False,
             highest: int = _HIGHEST_KNOWN) -> list[tuple[int, object, object, int]]:
    """The filter as (code, jump-if-true, jump-if-false, k); jumps may be label names."""
    col, audit_arch = _ARCHES[arch]
    prog: list[tuple[int, object, object, int]] = [
        (_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ, 1, 0, audit_arch),
        (_RET, 0, 0, _ERRNO | _EPERM),  # any other ABI (e.g. int 0x80 on x86-64)
        (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if col == 0:
        prog.append((_JGE, "deny", 0, _X32_BIT))  # the x32 ABI aliases every syscall
    prog.append((_JGE, "enosys", 0, highest + 1))  # calls newer than this filter
    denied = [nrs[col] for nrs in _DENIED.values() if nrs[col] is not None]
    if fallback:
        denied += [nrs[col] for nrs in _FALLBACK_DENIED.values() if nrs[col] is not None]
    if col == 0:
        denied += list(_ADMIN_X86_64)
    prog += [(_JEQ, "deny", 0, nr) for nr in denied]
    prog.append((_JEQ, "enosys", 0, _CLONE3[col]))
    prog.append((_JEQ, "clone", 0, _CLONE[col]))
    prog.append((_JEQ, "prlimit", 0, _PRLIMIT64[col]))
    prog.append((_JEQ, "prctl", 0, _PRCTL[col]))
    prog.append((_JEQ, "socket", 0, _SOCKET[col]))
    prog += [(_JEQ, "self", 0, nrs[col]) for nrs in _SELF_ONLY.values()]
    prog.append((_JEQ, "setsockopt", 0, _SETSOCKOPT[col]))
    prog.append((_JEQ, "fcntl", 0, _FCNTL[col]))
    if fallback:
        prog.append((_JEQ, "ioctl", 0, _IOCTL[col]))
    prog.append((_RET, 0, 0, _ALLOW))
    labels = {
        "clone": [(_LD_W_ABS, 0, 0, 16), (_JSET, "allow", "deny", _CLONE_THREAD)],
        # prlimit64(pid, resource, new, old): reading is fine, setting is not (new != NULL)
        "prlimit": [(_LD_W_ABS, 0, 0, 32), (_JEQ, 0, "deny", 0), (_LD_W_ABS, 0, 0, 36), (_JEQ, "allow", "deny", 0)],
        # prctl(option, ...): everything but PR_SET_PDEATHSIG (the parent-death signal stays)
        "prctl": [(_LD_W_ABS, 0, 0, 16), (_JEQ, "deny", "allow", _PR_SET_PDEATHSIG)],
        # kill(0, ...) would reach the worker's process group: only its own pid is allowed
        "self": [(_LD_W_ABS, 0, 0, 16), (_JEQ, "allow", "deny", own_pid)],
        # socket(family, ...): none at all, or AF_INET/AF_INET6 for a task opted into the network
        # (socketpair stays: asyncio's event loop wakes itself through one; it reaches nothing)
        "socket": [(_LD_W_ABS, 0, 0, 16), (_JEQ, "allow", 0, _AF_INET), (_JEQ, "allow", "deny", _AF_INET6)]
        if network else [(_RET, 0, 0, _ERRNO | _EPERM)],
        # setsockopt(fd, level, name, ...): no SOL_SOCKET buffer size (see _BUFFER_OPTIONS)
        "setsockopt": [(_LD_W_ABS, 0, 0, 24), (_JEQ, 0, "allow", _SOL_SOCKET), (_LD_W_ABS, 0, 0, 32),
                       *((_JEQ, "deny", 0, name) for name in _BUFFER_OPTIONS), (_RET, 0, 0, _ALLOW)],
        # fcntl(fd, cmd, ...): no F_SETPIPE_SZ
        "fcntl": [(_LD_W_ABS, 0, 0, 24), (_JEQ, "deny", "allow", _F_SETPIPE_SZ)],
        # ioctl(fd, cmd, ...) in the fallback: no file flags (see _FALLBACK_IOCTLS)
        "ioctl": [(_LD_W_ABS, 0, 0, 24), *((_JEQ, "deny", 0, cmd) for cmd in _FALLBACK_IOCTLS), (_RET, 0, 0, _ALLOW)],
        "deny": [(_RET, 0, 0, _ERRNO | _EPERM)],
        "enosys": [(_RET, 0, 0, _ERRNO | _ENOSYS)],
        "allow": [(_RET, 0, 0, _ALLOW)],
    }
    positions: dict[str, int] = {}
    for name, block in labels.items():
        positions[name] = len(prog)
        prog += block

    def offset(target: object, index: int) -> int:
        if not isinstance(target, str):
            return int(target)  # type: ignore[call-overload]
        jump = positions[target] - index - 1
        assert 0 <= jump < 256, f"seccomp jump to {target} out of range ({jump})"
        return jump

    return [(code, offset(jt, i), offset(jf, i), k) for i, (code, jt, jf, k) in enumerate(prog)]


def install(*, network: bool = False, fallback: bool = False, highest: int = _HIGHEST_KNOWN) -> str | None:
    """Install the filter on the calling process; returns None on success, else the reason.

    ``network``: the worker's task was opted into the network, so ``socket`` may make
    AF_INET/AF_INET6 sockets (never AF_UNIX, AF_NETLINK, AF_VSOCK or any other family).
    ``fallback``: the worker has no user namespace of its own (it runs as the caller, maybe
    root): also refuse chmod/chown/utime/xattr/flag changes, mknod, links and renames anywhere.
    ``highest``: calls numbered above it answer ENOSYS (lower only to test that rule on a
    kernel that has no calls above the default).
    """
    if not sys.platform.startswith("linux"):
        return f"seccomp is Linux-only (platform {sys.platform})"
    arch = os.uname().machine.lower()
    if arch not in _ARCHES:
        return f"no seccomp filter for architecture {arch}"
    import ctypes

    program = _program(arch, os.getpid(), network, fallback, highest)
    raw = b"".join(struct.pack("=HBBI", code, jt, jf, k) for code, jt, jf, k in program)
    buffer = ctypes.create_string_buffer(raw, len(raw))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program), ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
        return f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}"
    if libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(fprog), 0, 0) != 0:
        return f"prctl(PR_SET_SECCOMP) failed: {os.strerror(ctypes.get_errno())}"
    return None


def set_parent_death_signal(expected_parent: int) -> None:
    """Ask the kernel to SIGKILL this worker if its parent dies; exit now if it already has."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != expected_parent:
        os._exit(0)
