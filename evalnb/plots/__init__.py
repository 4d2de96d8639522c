"""Plotly figures for evalnb results: metric by model, paired differences, agreement, failures,
cost against score, a judge's confusion table against people, and pairwise win rates and rankings.

Every figure takes the DataFrames of a run (``metrics``, ``scores``, ``samples``) or the tables
of ``evalnb.results.comparison`` and ``RunResult.diff``, uses ``plotly_white``, gives each model the same colour everywhere
(``model_colors``, keyed by sorted model names) and is deterministic, so saved notebook outputs
compare exactly under nbval. pandas and plotly are imported only when a figure is built. Each
figure is an `evalnb.plots.Figure`: it displays with an offline chart and an SVG picture too, so
exported notebooks show it (`as_figure(fig)` does the same for a figure of your own). Frames of a run
with prompt variants (a non-empty ``variant`` column) are drawn by candidate, "model · variant",
as `RunResult.compare` names them.
"""

from __future__ import annotations

from evalnb.plots._agreement import agreement_view
from evalnb.plots._confusion import judge_confusion
from evalnb.plots._diff import diff_forest
from evalnb.plots._metrics import compare, metric_by_model, per_task
from evalnb.plots._pairwise import ranking, win_rates
from evalnb.plots._paired import paired_forest
from evalnb.plots._samples import extraction_failures, latency_vs_score, tokens_vs_score
from evalnb.plots._style import PALETTE, model_colors

__all__ = [
    "Figure",
    "PALETTE",
    "agreement_view",
    "as_figure",
    "compare",
    "diff_forest",
    "extraction_failures",
    "figure_svg",
    "judge_confusion",
    "latency_vs_score",
    "metric_by_model",
    "model_colors",
    "paired_forest",
    "per_task",
    "ranking",
    "tokens_vs_score",
    "win_rates",
]

_LAZY = {"Figure": "evalnb.plots.figure", "as_figure": "evalnb.plots.figure", "figure_svg": "evalnb.plots.svg"}


def __getattr__(name: str):
    """`Figure` and `as_figure` (your own figure, displayed like evalnb's), `figure_svg`: imported
    on first use, so ``import evalnb.plots`` does not load plotly."""
    if name not in _LAZY:
        raise AttributeError(f"module 'evalnb.plots' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(_LAZY[name]), name)
