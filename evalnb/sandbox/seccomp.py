"""A kernel-level (seccomp-BPF) filter a worker installs on itself before running user code.

Why: rlimits cannot stop a fork bomb when running as root (RLIMIT_NPROC is not enforced for
root and counts every process of a user otherwise), and Python-level patches can be bypassed
with ctypes. A seccomp filter cannot be removed once installed and is inherited by threads.

What it refuses (EPERM): creating processes (fork, vfork, clone without CLONE_THREAD),
exec, signalling or tracing any process other than the worker itself, raising rlimits, and
on x86-64 a handful of host-administration calls (mount, reboot, module loading, clock
setting, namespaces, bpf). Threads still work: clone3 answers ENOSYS so libc falls back to
clone, whose flags the filter can inspect. Supported on Linux x86-64 and aarch64; elsewhere
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
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "pidfd_send_signal": (424, 424), "setrlimit": (160, 164),
}  # fmt: skip
_ADMIN_X86_64 = (  # mount/reboot/modules/clocks/namespaces/bpf... only checked on x86-64
    155, 159, 161, 163, 164, 165, 166, 167, 168, 169, 170, 171, 175, 176, 227, 246, 272, 298,
    305, 308, 313, 320, 321, 323,
)
_SELF_ONLY = {  # allowed only when the first argument is the worker's own pid (or 0 for kill)
    "kill": (62, 129), "tkill": (200, 130), "tgkill": (234, 131),
    "rt_sigqueueinfo": (129, 138), "rt_tgsigqueueinfo": (297, 240),
}  # fmt: skip
_CLONE, _CLONE3, _PRLIMIT64 = (56, 220), (435, 435), (302, 261)
_ARCHES = {"x86_64": (0, 0xC000003E), "amd64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7), "arm64": (1, 0xC00000B7)}


def _program(arch: str, own_pid: int) -> list[tuple[int, object, object, int]]:
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
    denied = [nrs[col] for nrs in _DENIED.values() if nrs[col] is not None]
    if col == 0:
        denied += list(_ADMIN_X86_64)
    prog += [(_JEQ, "deny", 0, nr) for nr in denied]
    prog.append((_JEQ, "enosys", 0, _CLONE3[col]))
    prog.append((_JEQ, "clone", 0, _CLONE[col]))
    prog.append((_JEQ, "prlimit", 0, _PRLIMIT64[col]))
    prog += [(_JEQ, "self", 0, nrs[col]) for nrs in _SELF_ONLY.values()]
    prog.append((_RET, 0, 0, _ALLOW))
    labels = {
        "clone": [(_LD_W_ABS, 0, 0, 16), (_JSET, "allow", "deny", _CLONE_THREAD)],
        # prlimit64(pid, resource, new, old): reading is fine, setting is not (new != NULL)
        "prlimit": [(_LD_W_ABS, 0, 0, 32), (_JEQ, 0, "deny", 0), (_LD_W_ABS, 0, 0, 36), (_JEQ, "allow", "deny", 0)],
        "self": [(_LD_W_ABS, 0, 0, 16), (_JEQ, "allow", 0, own_pid), (_JEQ, "allow", "deny", 0)],
        "deny": [(_RET, 0, 0, _ERRNO | _EPERM)],
        "enosys": [(_RET, 0, 0, _ERRNO | _ENOSYS)],
        "allow": [(_RET, 0, 0, _ALLOW)],
    }
    positions: dict[str, int] = {}
    for name, block in labels.items():
        positions[name] = len(prog)
        prog += block

    def offset(target: object, index: int) -> int:
        return positions[target] - index - 1 if isinstance(target, str) else int(target)  # type: ignore[call-overload]

    return [(code, offset(jt, i), offset(jf, i), k) for i, (code, jt, jf, k) in enumerate(prog)]


def install() -> str | None:
    """Install the filter on the calling process; returns None on success, else the reason."""
    if not sys.platform.startswith("linux"):
        return f"seccomp is Linux-only (platform {sys.platform})"
    arch = os.uname().machine.lower()
    if arch not in _ARCHES:
        return f"no seccomp filter for architecture {arch}"
    import ctypes

    program = _program(arch, os.getpid())
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
