"""`evalnb.sandbox_isolation()`: start a worker as a run would and say what confines it."""

from __future__ import annotations

import sys
from typing import Any

from .job import Job, UserCode
from .pool import SandboxPool

__all__ = ["sandbox_isolation"]

_UID = Job(UserCode("import os\ndef call(x):\n    return os.getuid()\n", "<isolation check>"), names=("call",), nargs=1)


def sandbox_isolation(*, network: bool = False) -> dict[str, Any]:
    """Start a worker as a run would and say what confines it, in plain terms.

    Keys: ``platform``; ``namespaces`` (own PID, mount and IPC namespaces with a fresh
    ``/proc``: no other process visible), ``user_namespace`` (used to get them as a non-root
    user), ``capabilities`` (whether user code keeps any); ``network`` ("none" or "open");
    ``files``: "own root" (a root of its own: read-only ``read_only`` and a private scratch),
    "landlock" (no namespaces: the same paths through Landlock, the worker folder writable) or
    "yours" (every file your user can read); ``uid`` (the uid user code runs as, outside
    its namespaces); ``sockets``: "none", "inet only" (a task opted into the network) or "any"
    (no filter); ``seccomp`` (the kernel filter: no new processes, no reaching into others);
    ``limits`` (address space, file size and scratch caps in MB, threads, open descriptors,
    what one call may return in bytes); ``python_guards``; ``problems`` (why something is
    missing) and ``raw`` (the worker's own report).
    """
    with SandboxPool(1, network=network) as pool:
        (uid,) = pool.run_sync(_UID, [[None]])
        raw = dict(pool.isolation or {})
        max_result = pool.max_result_bytes
    problems = {k.removesuffix("_error"): v for k, v in raw.items() if k.endswith("_error")}
    confined = bool(raw.get("namespaces"))
    return {
        "platform": sys.platform,
        "namespaces": confined,
        "user_namespace": bool(raw.get("user")),
        "capabilities": "none" if confined and raw.get("capabilities") is False else "kept",
        "network": "none" if confined and not raw.get("network") else "open",
        "files": "own root" if raw.get("filesystem") else "landlock" if raw.get("landlock") else "yours",
        "read_only": raw.get("read_only") or [],
        "uid": uid.value if uid.ok else None,
        "sockets": ("inet only" if network else "none") if raw.get("seccomp") else "any",
        "seccomp": bool(raw.get("seccomp")),
        "limits": {**(raw.get("rlimits") or {}), "scratch_mb": raw.get("scratch_mb"), "result_bytes": max_result},
        "python_guards": bool(raw.get("python_guards")),
        "problems": problems,
        "raw": raw,
    }
