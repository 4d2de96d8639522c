"""Executors: where a run's model calls happen, behind one interface (``base.py``: the
protocol and how to write one). This process (``local.py``), Ray workers (``ray_driver.py`` on
the driver, ``ray_worker.py`` in each worker) or the provider's Batch API (``batch.py``);
``registry.py`` turns what a user passed (or a stored run recorded) into one.

Nothing here imports the engine (``runner.engine``): an executor sees the run only through its
`RunContext` (``runner.run_context``), which tests/test_layout.py checks.
"""
