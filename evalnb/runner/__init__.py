"""Runs: the entry points (``api.py``), the plan of a run (``run_plan.py``), the engine that
runs it (``engine.py``), the item planner that decides a stretch of items at a time what is
kept, copied, cached or called (``item_planner.py``), the run as an executor sees it
(``run_context.py``), the executors that make the calls (``executors/``: this process, Ray workers or the provider's Batch API, behind the
interface in ``executors/base.py``), the grading pipeline (``grading_pipeline.py``),
progress display (``progress.py``), graders' model calls (``bridge.py``: the judge cache,
records and cost), the cost budget (``budget.py``) and ``estimate`` (``preflight.py``: what a
run would send and cost, before it runs). A sample is an `evalnb.sample.Sample` throughout.

The package is ``runner``, not ``run``: ``evalnb.run`` is the function users call.
"""

from __future__ import annotations

from evalnb.runner.api import arun, cancel, load_run, resume, run, runs

__all__ = ["arun", "cancel", "load_run", "resume", "run", "runs"]
