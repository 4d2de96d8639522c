"""Plotly figures for evalnb results: metric by model, paired differences, agreement, failures,
cost against score, and a judge's confusion table against people.

Every figure takes the DataFrames of a run (``metrics``, ``scores``, ``samples``) or the tables
of ``evalnb.results.comparison`` and ``RunResult.diff``, uses ``plotly_white``, gives each model the same colour everywhere
(``model_colors``, keyed by sorted model names) and is deterministic, so saved notebook outputs
compare exactly under nbval. pandas and plotly are imported only when a figure is built.
"""

from __future__ import annotations

from evalnb.plots._agreement import agreement_view
from evalnb.plots._confusion import judge_confusion
from evalnb.plots._diff import diff_forest
from evalnb.plots._metrics import compare, metric_by_model, per_task
from evalnb.plots._paired import paired_forest
from evalnb.plots._samples import extraction_failures, latency_vs_score, tokens_vs_score
from evalnb.plots._style import PALETTE, model_colors

__all__ = [
    "PALETTE",
    "agreement_view",
    "compare",
    "diff_forest",
    "extraction_failures",
    "judge_confusion",
    "latency_vs_score",
    "metric_by_model",
    "model_colors",
    "paired_forest",
    "per_task",
    "tokens_vs_score",
]
