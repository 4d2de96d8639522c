"""Forest plot of a ``comparison.paired`` table: where model A beats model B, and by how much."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalnb.results.comparison import ALL_TASKS, require_columns
from evalnb.plots._style import (
    BOTTOM_PX,
    TOP_PX,
    category_axis,
    ci_errors,
    ci_text,
    esc,
    finish,
    is_missing,
    num,
    opt,
    paired_candidates,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import plotly.graph_objects as go

FOREST_COLUMNS = ("task_id", "n_pairs", "mean_diff", "ci_low", "ci_high")
TASK_COLOR, POOLED_COLOR = "#4e79a7", "#1a1a1a"


def paired_forest(paired_df: pd.DataFrame) -> go.Figure:
    """Per-task paired differences (a − b) as points with 95% CI lines around a zero line.

    The pooled "all tasks" row is drawn last as a larger dark diamond. Rows with a McNemar p
    (0/1 metrics) show it above the point; rows without pairs are labelled "no paired items".
    """
    import plotly.graph_objects as go

    require_columns(paired_df, FOREST_COLUMNS, "paired")
    if paired_df.empty:
        raise ValueError("paired table is empty: nothing to plot")
    paired_df = paired_candidates(paired_df)
    pairs = {(str(r.get("model_a", "")), str(r.get("model_b", ""))) for r in paired_df.to_dict("records")}
    several = len(pairs) > 1
    records = paired_df.to_dict("records")
    tasks = [r for r in records if r["task_id"] != ALL_TASKS]
    pooled = [r for r in records if r["task_id"] == ALL_TASKS]
    a = _one(paired_df, "model_a", "A")
    b = _one(paired_df, "model_b", "B")
    metric = _one(paired_df, "metric", "score")
    labels = {id(r): _label(r, several) for r in records}

    fig = go.Figure()
    for rows, name, color, symbol, size in (
        (tasks, "per task", TASK_COLOR, "circle", 10),
        (pooled, "all tasks (pooled)", POOLED_COLOR, "diamond", 15),
    ):
        if not rows:
            continue
        mean = [r["mean_diff"] for r in rows]
        fig.add_trace(go.Scatter(
            name=name, mode="markers+text", x=[opt(m) for m in mean],
            y=[labels[id(r)] for r in rows],
            marker={"color": color, "symbol": symbol, "size": size},
            error_x={**ci_errors(mean, [r["ci_low"] for r in rows], [r["ci_high"] for r in rows]),
                     "color": color, "thickness": 2.5 if rows is pooled else 1.5},
            text=[_p_text(r) for r in rows], textposition="top center", cliponaxis=False,
            textfont={"size": 11, "color": "#555555"},
            hovertext=[_hover(r, *((str(r["model_a"]), str(r["model_b"])) if several else (a, b))) for r in rows],
            hovertemplate="%{hovertext}<extra></extra>",
        ))
    for r in records:
        if is_missing(r["mean_diff"]):
            fig.add_annotation(x=0, y=labels[id(r)], text="no paired items", showarrow=False,
                               xanchor="left", xshift=6, font={"color": "#888888"})
    fig.add_vline(x=0, line={"color": "#888888", "dash": "dash", "width": 1})
    order = [labels[id(r)] for r in tasks + pooled]
    category_axis(fig, order)
    return finish(
        fig,
        title=f"Paired difference {esc(a)} − {esc(b)}: {esc(metric)}",
        x_title=f"mean difference in {esc(metric)} ({esc(a)} − {esc(b)}), 95% bootstrap CI",
        y_title="task",
        height=len(order) * 48 + TOP_PX + BOTTOM_PX,
        labels=[str(r["task_id"]) + (f" · {r['model_a']} − {r['model_b']}" if several else "") + " (n=0000)"
                for r in records],
        legend_title=None,
    )


def _one(frame: pd.DataFrame, column: str, default: str) -> str:
    """The single value of a column, or a neutral word when it is absent or mixed."""
    if column not in frame.columns:
        return default
    values = sorted({str(v) for v in frame[column] if not is_missing(v)})
    return values[0] if len(values) == 1 else default


def _label(row: dict[str, Any], with_pair: bool) -> str:
    n = num(row["n_pairs"], "g")
    pair = f" · {esc(row['model_a'])} − {esc(row['model_b'])}" if with_pair else ""
    if row["task_id"] == ALL_TASKS:
        return f"<b>{ALL_TASKS}</b>{pair} (n={n})"
    return f"{esc(row['task_id'])}{pair} (n={n})"


def _p_text(row: dict[str, Any]) -> str:
    p = row.get("mcnemar_p")
    return "" if is_missing(p) else f"McNemar p={num(p, '.3g')}"


def _hover(row: dict[str, Any], a: str, b: str) -> str:
    lines = [
        f"<b>{esc(row['task_id'])}</b>",
        f"{esc(a)} − {esc(b)} = {num(row['mean_diff'], '+.4g')}",
        ci_text(row["ci_low"], row["ci_high"]),
        f"n pairs = {num(row['n_pairs'], 'g')}",
    ]
    if "mean_a" in row and "mean_b" in row:
        lines.append(f"mean {esc(a)} = {num(row['mean_a'])}, {esc(b)} = {num(row['mean_b'])}")
    if not is_missing(row.get("mcnemar_p")):
        lines.append(f"McNemar n01 = {num(row['n01'], 'g')}, n10 = {num(row['n10'], 'g')}, "
                     f"p = {num(row['mcnemar_p'], '.3g')}")
    return "<br>".join(lines)
