"""Where a worker's folder lives, and how much a worker without a root of its own may put in it.

Why: with namespaces a worker's ``/tmp``, ``HOME`` and ``/dev/shm`` are one tmpfs of
``scratch_mb`` that the kernel caps. Without them (the fallback) the scratch is a plain folder
the parent makes, and a plain folder has no size: with ``TMPDIR=/dev/shm`` (or a ``/tmp`` that
is tmpfs) a grader held 1.5 GB of the machine's memory in files there. So (1) the folder is
made on a disk-backed filesystem when the temp folder is tmpfs or ramfs (``/var/tmp``, else
the user's cache folder): what a grader writes there is page cache the kernel can write out and
drop, not memory it must keep; and (2) the parent counts the folder (`usage`) while it waits on
the worker, every ``CHECK_SECONDS`` at most, and kills a worker whose folder holds more than
its ``scratch_mb``: that sample fails saying why and the run goes on. Where no disk-backed
folder exists, (2) still holds, with an overshoot of what a grader writes between two checks.
"""

from __future__ import annotations

import os
import tempfile

CHECK_SECONDS = 0.1
ENTRY_BYTES = 1024  # what one file or folder costs beside its data (an inode, a directory entry)
_MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")


def filesystem_type(path: str) -> str | None:
    """The type of the filesystem ``path`` is on (``/proc/self/mountinfo``), or None."""
    real = os.path.realpath(path)
    best, kind = "", None
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split(" ")
                point = fields[4].encode().decode("unicode_escape") if "\\" in fields[4] else fields[4]
                after = fields[fields.index("-") + 1] if "-" in fields else None
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, after
    except (OSError, ValueError, IndexError):
        return None
    return kind


def workdir_base() -> str:
    """The folder worker folders are made in: the temp folder, unless it is held in memory."""
    default = tempfile.gettempdir()
    if filesystem_type(default) not in _MEMORY_FILESYSTEMS:
        return default
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for candidate in ("/var/tmp", os.path.join(cache, "evalnb", "sandbox")):
        try:
            os.makedirs(candidate, exist_ok=True)
        except OSError:
            continue
        if os.access(candidate, os.W_OK | os.X_OK) and filesystem_type(candidate) not in _MEMORY_FILESYSTEMS:
            return candidate
    return default


def usage(folder: str, stop_above: int | None = None) -> int:
    """Bytes the files under ``folder`` hold (their allocated blocks: a sparse file counts
    what it stores), plus ``ENTRY_BYTES`` for each entry; symlinks are not followed. Counting
    stops once past ``stop_above`` (a folder of a million files is not walked to its end)."""
    total = 0
    stack = [folder]
    while stack:
        try:
            with os.scandir(stack.pop()) as listing:
                for entry in listing:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += ENTRY_BYTES + info.st_blocks * 512
                    if stop_above is not None and total > stop_above:
                        return total
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return total
