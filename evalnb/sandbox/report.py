"""`evalnb.sandbox_isolation()`: start a worker as a run would and say what confines it."""

from __future__ import annotations

import sys
from typing import Any

from .job import Job, UserCode
from .pool import SandboxPool

__all__ = ["sandbox_isolation"]

_NOOP = Job(UserCode("def call(x):\n    return None\n", "<isolation check>"), names=("call",), nargs=1)


def sandbox_isolation(*, network: bool = False) -> dict[str, Any]:
    """Start a worker as a run would and say what confines it, in plain terms.

    Keys: ``platform``; ``namespaces`` (own PID, mount and IPC namespaces with a fresh
    ``/proc``: no other process visible), ``user_namespace`` (used to get them as a non-root
    user), ``capabilities`` (whether user code keeps any); ``network`` ("none" or "open");
    ``seccomp`` (the kernel filter: no new processes, no reaching into others); ``limits``
    (address space and file size caps, MB); ``python_guards``; ``problems`` (why something
    is missing) and ``raw`` (the worker's own report).
    """
    with SandboxPool(1, network=network) as pool:
        pool.run_sync(_NOOP, [[None]])
        raw = dict(pool.isolation or {})
    problems = {k.removesuffix("_error"): v for k, v in raw.items() if k.endswith("_error")}
    confined = bool(raw.get("namespaces"))
    return {
        "platform": sys.platform,
        "namespaces": confined,
        "user_namespace": bool(raw.get("user")),
        "capabilities": "none" if confined and raw.get("capabilities") is False else "kept",
        "network": "none" if confined and not raw.get("network") else "open",
        "seccomp": bool(raw.get("seccomp")),
        "limits": raw.get("rlimits") or {},
        "python_guards": bool(raw.get("python_guards")),
        "problems": problems,
        "raw": raw,
    }
