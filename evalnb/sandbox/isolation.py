"""What confines user code on this machine, said once when it is less than it should be.

Workers report what is in force when they start (``namespaces.py``, ``filesystem.py``,
``landlock.py``, ``seccomp.py``, ``limits.py``); the pool hands that report here. Where namespaces are unavailable (macOS, a
kernel or container that forbids them, or ``EVALNB_SANDBOX_NAMESPACES=0``) the first worker
that starts without them raises one `SandboxIsolationWarning` per process: graders can then
read other processes of your user, including a notebook server's environment (Landlock,
where the kernel has it, still keeps their files and ``/proc`` out of reach).
``EVALNB_SANDBOX_FILESYSTEM=0`` turns the worker's own root (and Landlock) off.
``evalnb.sandbox_isolation()`` (``report.py``) starts a worker and says what holds.
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import Any

__all__ = ["SandboxIsolationWarning", "filesystem_wanted", "namespaces_wanted", "warn_if_unconfined"]

_warned = False
_lock = threading.Lock()


class SandboxIsolationWarning(UserWarning):
    """Sandbox workers run without namespaces: other processes (and their keys) are visible."""


def namespaces_wanted() -> bool:
    """Namespaces are on unless ``EVALNB_SANDBOX_NAMESPACES`` says 0/off/false/no."""
    return os.environ.get("EVALNB_SANDBOX_NAMESPACES", "").strip().lower() not in ("0", "off", "false", "no")


def filesystem_wanted() -> bool:
    """A worker gets a root of its own unless ``EVALNB_SANDBOX_FILESYSTEM`` says 0/off/false/no."""
    return os.environ.get("EVALNB_SANDBOX_FILESYSTEM", "").strip().lower() not in ("0", "off", "false", "no")


def warn_if_unconfined(isolation: dict[str, Any]) -> None:
    """Warn once per process when a worker that should be confined is not."""
    global _warned
    if isolation.get("namespaces"):
        return
    with _lock:
        if _warned:
            return
        _warned = True
    reason = isolation.get("namespaces_error") or "unknown reason"
    warnings.warn(
        f"evalnb's sandbox runs graders and preprocessors without Linux namespaces ({reason}): "
        "they can see other processes of your user, and so read keys from their environment "
        "(e.g. one exported before starting Jupyter). Run untrusted graders in a container. "
        "evalnb.sandbox_isolation() shows what is in force.",
        SandboxIsolationWarning,
        stacklevel=2,
    )
