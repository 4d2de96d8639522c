"""Runs: the entry points (``api.py``), the plan of calls (``plan.py``), the engine that makes
them with concurrency, retries and resume (``engine.py``), the grading pipeline
(``grading.py``), progress display (``progress.py``), graders' model calls (``bridge.py``: the
judge cache, records and cost), the cost budget (``budget.py``) and ``estimate``
(``preflight.py``: what a run would send and cost, before it runs).

The package is ``runner``, not ``run``: ``evalnb.run`` is the function users call.
"""

from __future__ import annotations

from evalnb.runner.api import arun, load_run, resume, run, runs

__all__ = ["arun", "load_run", "resume", "run", "runs"]
