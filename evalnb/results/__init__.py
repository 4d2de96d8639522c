"""Results: ``run_result.py`` (RunResult: samples, scores, metrics as DataFrames),
``comparison.py`` (paired tables between models) and ``stats.py`` (intervals and tests)."""

from __future__ import annotations

from evalnb.results.run_result import METRICS_COLUMNS, SAMPLE_COLUMNS, RunResult, metric_specs

__all__ = ["METRICS_COLUMNS", "SAMPLE_COLUMNS", "RunResult", "metric_specs"]
