"""Results: ``run_result.py`` (RunResult: samples, scores, metrics as DataFrames; summarize, diff,
paired, paired_all), ``frames.py`` (the samples frame and the lean score frame, read from the
store a page at a time), ``metrics_table.py`` (the metrics rows of one task and model),
``report_views.py`` (the text report and HTML table), ``judging.py`` /
``costs.py`` / ``agreement.py`` (judge calls, costs, agreement with people), ``comparison.py``
(paired tables between models), ``diff.py`` (a run against a baseline), ``stats.py``
(intervals, tests, power), ``cluster_robust.py`` (CR1 errors), ``cluster_labels.py`` (which
cluster an item is in), ``pairing.py`` (items paired once, as arrays), ``bootstrap_limit.py``
(the interval a big float bootstrap converges to, computed), ``epochs.py`` (per-item
reduction, pass@k) and ``explain.py`` (comparisons in words)."""

from __future__ import annotations

from evalnb.results.explain import verdicts
from evalnb.results.run_result import METRICS_COLUMNS, SAMPLE_COLUMNS, RunResult, metric_specs

__all__ = ["METRICS_COLUMNS", "SAMPLE_COLUMNS", "RunResult", "metric_specs", "verdicts"]
