"""Which process owns a run, and whether that process is still alive.

A run in progress records its owner (pid, hostname, a boot id and the process start time).
A later process may take the run over only when that owner is provably gone: the machine
rebooted, the pid no longer exists, or the pid now belongs to a different process.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Owner:
    """Identity of a process, stable for its lifetime and unique across pid reuse."""

    pid: int
    host: str
    token: str  # "<boot id>:<process start time>", or "" where the OS does not say


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _proc_stat(pid: int) -> tuple[str, str]:
    """(state letter, start time in clock ticks since boot) from /proc (Linux); ("", "") if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "", ""
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = stat.rsplit(")", 1)[-1].split()
    return (fields[0], fields[19]) if len(fields) > 19 else ("", "")


def process_token(pid: int) -> str:
    """The token `Owner.token` would hold for `pid` right now ("" if unknown)."""
    start = _proc_stat(pid)[1]
    return f"{_boot_id()}:{start}" if start else ""


def current_owner() -> Owner:
    """This process."""
    pid = os.getpid()
    return Owner(pid=pid, host=socket.gethostname(), token=process_token(pid))


def _pid_exists(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OSError:
        return False
    return True


def owner_alive(pid: int | None, host: str | None, token: str | None) -> bool:
    """Is the recorded owner still running? Unknown hosts count as alive (we cannot tell).

    A zombie/reused pid is told apart by its start time; a different boot id means the
    machine restarted since, so the owner is dead.
    """
    if pid is None:
        return False
    if host and host != socket.gethostname():
        return True
    if token:
        boot = token.split(":", 1)[0]
        if boot and _boot_id() and boot != _boot_id():
            return False
    if not _pid_exists(pid):
        return False
    state, start = _proc_stat(pid)
    if state in ("Z", "X"):
        return False  # exited, waiting to be reaped
    if token and start and process_token(pid) != token:
        return False  # the pid now belongs to another process
    return True
