"""Forest plot of a `RunResult.diff` table: what changed against the baseline, and how surely."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalnb.results.comparison import require_columns
from evalnb.plots._style import (
    BOTTOM_PX,
    TOP_PX,
    by_candidate,
    category_axis,
    ci_errors,
    ci_text,
    esc,
    finish,
    is_missing,
    model_colors,
    num,
    opt,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import plotly.graph_objects as go

DIFF_FOREST_COLUMNS = ("task_id", "model", "metric", "n_pairs", "mean_diff", "ci_low", "ci_high", "mde")


def diff_forest(diff_df: pd.DataFrame) -> go.Figure:
    """One row per (task, model, metric): the change against the baseline with its 95% interval.

    Each model has its colour; the label above a point counts the items fixed and broken (and
    gives McNemar's p for 0/1 metrics); a grey band of ± mde around zero marks differences
    too small for this many items to tell from noise.
    """
    import plotly.graph_objects as go

    require_columns(diff_df, DIFF_FOREST_COLUMNS, "diff")
    diff_df = by_candidate(diff_df)  # a run with variants: one row and colour per "model · variant"
    if diff_df.empty:
        raise ValueError("diff table is empty: nothing to plot")
    records = diff_df.to_dict("records")
    several_metrics = len({r["metric"] for r in records}) > 1
    labels = [_label(r, several_metrics) for r in records]
    colors = model_colors(r["model"] for r in records)
    fig = go.Figure()
    for model in dict.fromkeys(r["model"] for r in records):
        rows = [(label, r) for label, r in zip(labels, records) if r["model"] == model]
        mean = [r["mean_diff"] for _, r in rows]
        fig.add_trace(go.Scatter(
            name=str(model), mode="markers+text", x=[opt(m) for m in mean], y=[label for label, _ in rows],
            marker={"color": colors[str(model)], "size": 10},
            error_x={**ci_errors(mean, [r["ci_low"] for _, r in rows], [r["ci_high"] for _, r in rows]),
                     "color": colors[str(model)]},
            text=[_counts(r) for _, r in rows], textposition="top center", cliponaxis=False,
            textfont={"size": 11, "color": "#555555"},
            hovertext=[_hover(r) for _, r in rows], hovertemplate="%{hovertext}<extra></extra>",
        ))
    for label, r in zip(labels, records):
        if is_missing(r["mean_diff"]):
            fig.add_annotation(x=0, y=label, text="no paired items", showarrow=False, xanchor="left", xshift=6,
                               font={"color": "#888888"})
        elif not is_missing(r["mde"]) and r["mde"] > 0:
            fig.add_shape(type="rect", xref="x", yref="y", x0=-r["mde"], x1=r["mde"], y0=label, y1=label,
                          line={"color": "rgba(136,136,136,0.35)", "width": 14}, layer="below")
    fig.add_vline(x=0, line={"color": "#888888", "dash": "dash", "width": 1})
    category_axis(fig, labels)
    metric = records[0]["metric"] if not several_metrics else "score"
    return finish(
        fig,
        title=f"Change against the baseline: {esc(metric)}",
        x_title=f"mean difference in {esc(metric)} (this run − baseline), 95% CI; grey: ± mde",
        y_title=None,
        height=len(labels) * 52 + TOP_PX + BOTTOM_PX,
        labels=[label + " (n=0000)" for label in labels],
    )


def _label(row: dict[str, Any], with_metric: bool) -> str:
    parts = [esc(row["task_id"]), esc(row["model"])] + ([esc(row["metric"])] if with_metric else [])
    return " · ".join(parts) + f" (n={num(row['n_pairs'], 'g')})"


def _counts(row: dict[str, Any]) -> str:
    if is_missing(row.get("n_fixed")) or is_missing(row["mean_diff"]):
        return ""
    text = f"+{int(row['n_fixed'])} fixed / −{int(row['n_broken'])} broken"
    p = row.get("mcnemar_p")
    return text if is_missing(p) else f"{text}, p={num(p, '.2g')}"


def _hover(row: dict[str, Any]) -> str:
    lines = [
        f"<b>{esc(row['task_id'])} · {esc(row['model'])}</b> ({esc(row['metric'])})",
        f"difference = {num(row['mean_diff'], '+.4g')}",
        ci_text(row["ci_low"], row["ci_high"]),
        f"n pairs = {num(row['n_pairs'], 'g')}",
    ]
    if "mean_baseline" in row and "mean" in row:
        lines.append(f"baseline = {num(row['mean_baseline'])}, now = {num(row['mean'])}")
    if not is_missing(row.get("mde")):
        lines.append(f"smallest detectable difference (80% power) = {num(row['mde'], '.3g')}")
    if not is_missing(row.get("mcnemar_p")):
        lines.append(f"McNemar p = {num(row['mcnemar_p'], '.3g')}")
    return "<br>".join(lines)
