"""Landlock: the files a worker keeps when it cannot have a root of its own (no namespaces).

Why: where user namespaces are forbidden (some containers, ``EVALNB_SANDBOX_NAMESPACES=0``)
``filesystem.py`` cannot build the worker's root. Landlock (Linux 5.13+, unprivileged, the
restriction cannot be lifted and is inherited by threads) gets most of it: the worker may
read and execute only ``filesystem.read_only_paths`` (no ``/proc`` at all, so no other
process's environment either), read and write only its own folder and a few devices, and
with kernel ABI 4+ connect or bind no TCP port unless its task is opted into the network;
with ABI 6+ it cannot reach abstract unix sockets or signal processes outside itself. What
it cannot do: a private ``/tmp`` (the worker folder stands in for it), a different uid.
Standard library only: the worker loads this module by path.
"""

from __future__ import annotations

import os
import struct
import sys

_CREATE, _ADD_RULE, _RESTRICT = 444, 445, 446  # the same numbers on x86-64 and aarch64
_VERSION = 1  # LANDLOCK_CREATE_RULESET_VERSION
_PATH_BENEATH = 1
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1, 2, 4, 8
_FS_BITS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
_NET_TCP = 1 | 2  # bind, connect
_SCOPES = 1 | 2  # abstract unix sockets, signals
_O_PATH, _O_CLOEXEC = 0o10000000, 0o2000000
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


def abi() -> int:
    """The kernel's Landlock ABI version, 0 when it has none (or it is turned off)."""
    if not sys.platform.startswith("linux"):
        return 0
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION))
    return max(0, int(version))


def restrict(*, read_only: list[str], writable: list[str], network: bool) -> dict:
    """Confine this process (and its future threads); returns what holds, or ``landlock_error``."""
    version = abi()
    if version < 1:
        return {"landlock": False, "landlock_error": "this kernel has no Landlock (Linux 5.13+, lsm=landlock)"}
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fs_bits = _FS_BITS_BY_ABI.get(version, (1 << 16) - 1)
    handled_net = _NET_TCP if version >= 4 and not network else 0
    scoped = _SCOPES if version >= 6 else 0
    attr = struct.pack("=QQQ", fs_bits, handled_net, scoped)
    size = 8 if version < 4 else (16 if version < 6 else 24)
    ruleset = libc.syscall(_CREATE, attr[:size], ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return {"landlock": False, "landlock_error": f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}"}
    try:
        read = _EXECUTE | _READ_FILE | _READ_DIR
        rules = [(p, read) for p in read_only] + [(p, fs_bits) for p in writable]
        rules += [(p, _READ_FILE | _WRITE_FILE) for p in _DEVICES if os.path.exists(p)]
        for path, access in rules:
            try:
                fd = os.open(path, _O_PATH | _O_CLOEXEC)
            except OSError:
                continue
            try:
                if not os.path.isdir(path):
                    access &= _EXECUTE | _WRITE_FILE | _READ_FILE | (1 << 14) | (1 << 15)  # what a file can take
                rule = struct.pack("=Qi", access & fs_bits, fd)
                if libc.syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_PATH_BENEATH), rule, ctypes.c_uint32(0)) != 0:
                    return {"landlock": False, "landlock_error": f"landlock_add_rule {path}: {os.strerror(ctypes.get_errno())}"}
            finally:
                os.close(fd)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS, required first
            return {"landlock": False, "landlock_error": "prctl(PR_SET_NO_NEW_PRIVS) failed"}
        if libc.syscall(_RESTRICT, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return {"landlock": False, "landlock_error": f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}"}
    finally:
        os.close(ruleset)
    return {"landlock": version, "landlock_network": bool(handled_net) or network, "landlock_scoped": bool(scoped)}
