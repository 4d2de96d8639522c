"""Runs: the entry points (``api.py``), the plan of calls (``plan.py``), the engine that makes
them with concurrency, retries and resume (``engine.py``), the grading pipeline
(``grading.py``), progress display (``progress.py``), graders' model calls (``bridge.py``: the
judge cache, records and cost), the cost budget (``budget.py``), ``estimate``
(``preflight.py``: what a run would send and cost, before it runs), the planner that decides
a stretch of items at a time what is kept, copied, cached or called (``planner.py``), and the
executors that make the calls: this process (``executors.py``) or Ray workers
(``ray_executor.py`` on the driver, ``ray_worker.py`` in each worker).

The package is ``runner``, not ``run``: ``evalnb.run`` is the function users call.
"""

from __future__ import annotations

from evalnb.runner.api import arun, load_run, resume, run, runs

__all__ = ["arun", "load_run", "resume", "run", "runs"]
