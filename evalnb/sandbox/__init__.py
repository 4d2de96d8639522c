"""Worker processes for user code (preprocessors and graders), never run in the caller's process.

``SandboxPool`` owns the workers; ``run_preprocessor`` applies a task's preprocessor to rows;
``preprocess`` is the seam ``suite/items.py`` calls. The wire format is in ``protocol.py``, the
child's loop in ``worker.py`` (with the grader's ``ctx`` in ``context.py``) and its confinement
in ``namespaces.py``, ``filesystem.py`` (its own root), ``landlock.py`` (the fallback),
``seccomp.py`` and ``limits.py``; ``process.py`` and ``pool.py`` are the
parent's side, ``isolation.py`` and ``report.py`` say what holds.
"""

from __future__ import annotations

from .isolation import SandboxIsolationWarning
from .job import CallResult, CodeLoadError, Job, UserCode, spec_value, user_code_from_spec
from .pool import SandboxPool
from .preprocessing import arun_preprocessor, check_preprocessor, default_pool, preprocess, run_preprocessor
from .report import sandbox_isolation

__all__ = [
    "CallResult",
    "CodeLoadError",
    "Job",
    "SandboxIsolationWarning",
    "SandboxPool",
    "UserCode",
    "arun_preprocessor",
    "check_preprocessor",
    "default_pool",
    "preprocess",
    "run_preprocessor",
    "sandbox_isolation",
    "spec_value",
    "user_code_from_spec",
]
