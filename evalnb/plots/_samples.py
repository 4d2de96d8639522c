"""Figures read from the samples frame: what failed, and what a score costs in time and tokens."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from evalnb.results import stats
from evalnb.results.comparison import SCORE_COLUMNS, require_columns, select_metric_rows
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
    num,
    resolve_colors,
    stacked_rows,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import plotly.graph_objects as go

FAILED_COLOR, UNEXTRACTED_COLOR = "#e15759", "#f28e2b"
PANEL_PX, COLS = 330, 3


def extraction_failures(samples: pd.DataFrame) -> go.Figure:
    """Share of samples per model with no usable answer, one panel per task, stacked:
    failed (errored) samples and completed samples whose ``extracted_output`` is None.

    Both shares are of all the model's samples in the task so the stack adds up; the hover also
    gives the extraction-failure rate among completed samples.
    """
    import plotly.graph_objects as go

    require_columns(samples, ("task_id", "model", "status", "extracted_output"), "samples")
    samples = by_candidate(samples)
    if samples.empty:
        raise ValueError("samples frame is empty: nothing to plot")
    counts = failure_counts(samples)
    tasks = sorted({c["task_id"] for c in counts}, key=str)
    per_task = [[c for c in counts if c["task_id"] == t] for t in tasks]
    fig, height = stacked_rows([len(rows) for rows in per_task], [esc(t) for t in tasks],
                               shared_x=True)
    labels: list[str] = []
    for row_no, rows in enumerate(per_task, start=1):
        models = [str(c["model"]) for c in rows]
        for key, name, color in (("failed", "failed (error)", FAILED_COLOR),
                                 ("unextracted", "no extracted output", UNEXTRACTED_COLOR)):
            share = [c[key] / c["n"] for c in rows]
            fig.add_trace(go.Bar(
                name=name, legendgroup=name, showlegend=row_no == 1, orientation="h",
                x=share, y=models, marker={"color": color},
                text=[f"{s:.0%}" if s else "" for s in share], textposition="inside",
                hovertext=[_failure_hover(c, key) for c in rows],
                hovertemplate="%{hovertext}<extra></extra>",
            ), row=row_no, col=1)
        category_axis(fig, models, row=row_no, col=1)
        labels.extend(models)
    top = max((c["failed"] + c["unextracted"]) / c["n"] for c in counts)
    fig.update_xaxes(tickformat=".0%", range=[0, max(0.05, min(1.0, top * 1.15))])
    fig.update_xaxes(title_text="share of samples", row=len(tasks), col=1)
    fig.update_layout(barmode="stack")
    return finish(fig, title="Failed samples and extraction failures per model",
                  x_title=None, y_title="model", height=height, labels=labels,
                  legend_title="samples")


def failure_counts(samples: pd.DataFrame) -> list[dict[str, Any]]:
    """Per (task, model): n, completed, failed and completed-without-extraction counts."""
    out = []
    for (task, model), part in samples.groupby(["task_id", "model"], sort=True):
        status = part["status"].astype(str)
        completed = status == "completed"
        none = [is_missing(v) for v in part["extracted_output"]]
        out.append({
            "task_id": task, "model": model, "n": len(part),
            "completed": int(completed.sum()), "failed": int((status == "failed").sum()),
            "unextracted": int(sum(c and n for c, n in zip(completed, none, strict=True))),
        })
    return out


def _failure_hover(c: dict[str, Any], key: str) -> str:
    head = f"<b>{esc(c['model'])}</b><br>task: {esc(c['task_id'])}<br>"
    if key == "failed":
        return head + f"failed: {c['failed']} of {c['n']} samples ({c['failed'] / c['n']:.1%})"
    rate = c["unextracted"] / c["completed"] if c["completed"] else math.nan
    return head + (f"no extracted output: {c['unextracted']} of {c['completed']} completed "
                   f"samples ({num(rate * 100, '.1f')}%)")


def latency_vs_score(
    samples: pd.DataFrame,
    scores: pd.DataFrame,
    *,
    metric: str | None = None,
    colors: Mapping[str, str] | None = None,
) -> go.Figure:
    """Mean latency (s) against mean score per model, 95% CIs on both, one panel per task."""
    return _cost_vs_score(samples, scores, "latency_s", "mean latency (s)", metric, colors)


def tokens_vs_score(
    samples: pd.DataFrame,
    scores: pd.DataFrame,
    *,
    metric: str | None = None,
    colors: Mapping[str, str] | None = None,
) -> go.Figure:
    """Mean output tokens against mean score per model, 95% CIs on both, one panel per task."""
    return _cost_vs_score(samples, scores, "output_tokens", "mean output tokens", metric, colors)


def _cost_vs_score(
    samples: pd.DataFrame, scores: pd.DataFrame, column: str, x_title: str,
    metric: str | None, colors: Mapping[str, str] | None,
) -> go.Figure:
    """Costs come from completed samples, scores from the scores frame (NaN = not scored)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    require_columns(samples, ("task_id", "model", "status", column), "samples")
    require_columns(scores, SCORE_COLUMNS, "scores")
    samples, scores = by_candidate(samples), by_candidate(scores)
    chosen = select_metric_rows(scores, task_id=None, metric=metric, frame_name="scores")
    palette = resolve_colors(colors, list(samples["model"]) + list(scores["model"]))
    done = samples[samples["status"].astype(str) == "completed"]
    points = _points(done, chosen, column)
    if not points:
        raise ValueError(f"no completed sample has a {column} value and a score; nothing to plot")
    tasks = sorted({p["task_id"] for p in points}, key=str)
    n_rows = math.ceil(len(tasks) / COLS)
    n_cols = min(COLS, len(tasks))
    titles = [f"{esc(t)} — {esc(next(p['metric'] for p in points if p['task_id'] == t))}"
              for t in tasks]
    fig = make_subplots(rows=n_rows, cols=n_cols, subplot_titles=titles,
                        horizontal_spacing=0.1, vertical_spacing=min(0.3, 0.5 / n_rows))
    seen: set[str] = set()
    for k, task in enumerate(tasks):
        row, col = k // COLS + 1, k % COLS + 1
        metric_id = ""
        for p in (p for p in points if p["task_id"] == task):
            model, x, y, metric_id = str(p["model"]), p["x"], p["y"], p["metric"]
            fig.add_trace(go.Scatter(
                name=model, legendgroup=model, showlegend=model not in seen, mode="markers",
                x=[x.mean], y=[y.mean], marker={"color": palette[model], "size": 13,
                                                "line": {"color": "#333333", "width": 1}},
                error_x=ci_errors([x.mean], [x.ci_low], [x.ci_high]),
                error_y=ci_errors([y.mean], [y.ci_low], [y.ci_high]),
                hovertext=[_cost_hover(p, x_title)], hovertemplate="%{hovertext}<extra></extra>",
            ), row=row, col=col)
            seen.add(model)
        fig.update_xaxes(title_text=x_title, rangemode="tozero", row=row, col=col)
        fig.update_yaxes(title_text=f"mean {esc(metric_id)} (95% CI)", row=row, col=col)
    what = "latency" if column == "latency_s" else "output tokens"
    return finish(fig, title=f"Score against {what} per model", x_title=None, y_title=None,
                  height=n_rows * PANEL_PX + TOP_PX + BOTTOM_PX, labels=())


def _points(done: pd.DataFrame, chosen: pd.DataFrame, column: str) -> list[dict[str, Any]]:
    """One point per (task, model) with both a cost summary and a score summary."""
    points = []
    for (task, model, metric_id), part in chosen.groupby(["task_id", "model", "metric"],
                                                         sort=True):
        costs = done.loc[(done["task_id"] == task) & (done["model"] == model), column]
        x = _summary(costs.tolist())
        y = stats.summarize(part["value"].tolist())
        if x.n and y.n:
            points.append({"task_id": task, "model": model, "metric": metric_id, "x": x, "y": y})
    return points


def _summary(values: list[Any]) -> stats.Summary:
    """Mean with a t-interval: a cost is never a proportion, even when every value is 0 or 1."""
    present = [float(v) for v in values if not is_missing(v)]
    plain = stats.summarize(present)
    if plain.interval != "wilson" or plain.n < 2:
        return plain
    half = stats.t_quantile(0.975, plain.n - 1) * (plain.stderr or 0.0)
    return stats.Summary(plain.n, plain.mean, plain.stderr, plain.mean - half, plain.mean + half,
                         "t")


def _cost_hover(p: dict[str, Any], x_title: str) -> str:
    x, y = p["x"], p["y"]
    return (f"<b>{esc(p['model'])}</b><br>task: {esc(p['task_id'])}<br>"
            f"{x_title.removeprefix('mean ')}: {num(x.mean)} ({ci_text(x.ci_low, x.ci_high)}, "
            f"n = {x.n})<br>{esc(p['metric'])}: {num(y.mean)} "
            f"({ci_text(y.ci_low, y.ci_high)}, n = {y.n})")
