"""Metric by model with 95% intervals: one panel, per-task panels, and the default comparison."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evalnb.results.comparison import check_choice, check_unique, require_columns, select_metric_rows
from evalnb.plots._style import (
    ROW_PX,
    BOTTOM_PX,
    by_candidate,
    TOP_PX,
    category_axis,
    ci_errors,
    ci_text,
    esc,
    finish,
    is_missing,
    num,
    opt,
    resolve_colors,
    stacked_rows,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import plotly.graph_objects as go

METRIC_COLUMNS = (
    "task_id", "model", "metric", "n", "n_failed", "mean", "stderr", "ci_low", "ci_high",
    "higher_is_better",
)


def metric_by_model(
    metrics: pd.DataFrame,
    *,
    metric: str | None = None,
    task_id: str | Sequence[str] | None = None,
    colors: Mapping[str, str] | None = None,
) -> go.Figure:
    """Mean per model with its 95% CI, one horizontal bar trace per model.

    One task: a bar per model. Several tasks: bars grouped per task on one shared axis (use
    ``per_task`` when the tasks' metrics have different scales). ``metric=None`` takes each
    task's first metric that has a mean.
    """
    import plotly.graph_objects as go

    metrics = by_candidate(metrics)
    table = metric_rows(metrics, metric=metric, task_id=task_id)
    palette = resolve_colors(colors, metrics["model"])
    tasks = sorted(table["task_id"].unique().tolist(), key=str)
    models = sorted(table["model"].unique().tolist(), key=str)
    several = len(tasks) > 1
    mixed = table["metric"].nunique() > 1
    first = table.drop_duplicates("task_id").set_index("task_id")["metric"]
    label = {t: f"{t} ({first[t]})" if mixed else str(t) for t in tasks}
    fig = go.Figure()
    for model in models:
        rows = table[table["model"] == model]
        y = [label[t] for t in rows["task_id"]] if several else [str(model)]
        fig.add_trace(_bar(model, y, rows, palette[str(model)]))
    order = [label[t] for t in tasks] if several else [str(m) for m in models]
    category_axis(fig, order)
    name = _metric_name(table)
    where = "per task" if several else f"— {tasks[0]}"
    height = (len(tasks) * (len(models) * 20 + 24) if several else len(models) * (ROW_PX + 8))
    fig.update_layout(barmode="group", bargap=0.25, bargroupgap=0.05)
    return finish(
        fig,
        title=f"{name} by model {where}",
        x_title=_x_title(table),
        y_title="task" if several else "model",
        height=height + TOP_PX + BOTTOM_PX,
        labels=order,
    )


def per_task(
    metrics: pd.DataFrame,
    metric: str | None = None,
    *,
    colors: Mapping[str, str] | None = None,
) -> go.Figure:
    """One panel per task (own x scale), models as rows: for tasks whose metrics differ."""
    metrics = by_candidate(metrics)
    table = metric_rows(metrics, metric=metric, task_id=None)
    palette = resolve_colors(colors, metrics["model"])
    tasks = sorted(table["task_id"].unique().tolist(), key=str)
    groups = [table[table["task_id"] == t] for t in tasks]
    titles = [f"{esc(t)} — {esc(g['metric'].iloc[0])}"
              for t, g in zip(tasks, groups, strict=True)]
    fig, height = stacked_rows([len(g) for g in groups], titles)
    seen: set[str] = set()
    labels: list[str] = []
    for row_no, group in enumerate(groups, start=1):
        models = sorted(group["model"].tolist(), key=str)
        for model in models:
            rows = group[group["model"] == model]
            trace = _bar(model, [str(model)], rows, palette[str(model)],
                         show_legend=str(model) not in seen)
            seen.add(str(model))
            fig.add_trace(trace, row=row_no, col=1)
        category_axis(fig, [str(m) for m in models], row=row_no, col=1)
        fig.update_xaxes(title_text=_x_title(group), row=row_no, col=1)
        labels.extend(str(m) for m in models)
    fig.update_layout(bargap=0.3)
    return finish(fig, title=f"{_metric_name(table)} by model, per task", x_title=None,
                  y_title="model", height=height, labels=labels)


def compare(
    metrics: pd.DataFrame,
    *,
    models: Sequence[str] | None = None,
    metric: str | None = None,
    colors: Mapping[str, str] | None = None,
) -> go.Figure:
    """The default comparison figure: metric by model with 95% CIs, per task when several.

    Tasks sharing one metric share an axis (``metric_by_model``); tasks with different metrics
    get a panel each (``per_task``). It reads only the ``metrics`` table. With a ``variant``
    column each (model, variant) is a candidate, "model · variant"; ``models`` may name
    candidates or model labels (all of that model's variants).
    """
    require_columns(metrics, METRIC_COLUMNS, "metrics")
    candidates = by_candidate(metrics)
    palette = resolve_colors(colors, candidates["model"])  # from all models, before filtering
    if models is not None:
        wanted = [models] if isinstance(models, str) else list(models)
        available = sorted(set(candidates["model"].dropna().tolist()) | set(metrics["model"].dropna().tolist()),
                           key=str)
        for model in wanted:
            check_choice(model, available, "model")
        keep = metrics["model"].isin(wanted).to_numpy() | candidates["model"].isin(wanted).to_numpy()
        candidates = candidates[keep]
    metrics = candidates
    table = metric_rows(metrics, metric=metric, task_id=None)
    if table["metric"].nunique() > 1:
        fig = per_task(metrics, metric, colors=palette)
    else:
        fig = metric_by_model(metrics, metric=metric, colors=palette)
    n_models = table["model"].nunique()
    plural = "s" if n_models != 1 else ""
    fig.update_layout(title_text=f"Model comparison: {_metric_name(table)}, mean with 95% CI "
                                 f"({n_models} model{plural})")
    return fig


# ------------------------------------------------------------------ helpers


def metric_rows(
    metrics: pd.DataFrame, *, metric: str | None, task_id: str | Sequence[str] | None
) -> pd.DataFrame:
    """The (task, model) rows to draw, one metric per task, sorted by task and model."""
    require_columns(metrics, METRIC_COLUMNS, "metrics")
    if metrics.empty:
        raise ValueError("metrics frame is empty: nothing to plot")
    source = metrics if metric is not None else metrics[metrics["mean"].notna()]
    if source.empty:
        raise ValueError("no metric in the metrics frame has a mean (all aggregation 'none'?)")
    rows = select_metric_rows(source, task_id=task_id, metric=metric, frame_name="metrics")
    check_unique(rows, ("task_id", "model", "metric"), "metrics")
    rows = rows[rows["mean"].notna()]
    if rows.empty:
        raise ValueError(f"metric {metric!r} has no mean to plot (aggregation 'none'?)")
    return rows.sort_values(["task_id", "model"], key=lambda s: s.astype(str), kind="stable")


def _bar(model: Any, y: list[str], rows: pd.DataFrame, color: str, *,
         show_legend: bool = True) -> go.Bar:
    import plotly.graph_objects as go

    mean, low, high = (rows[c].tolist() for c in ("mean", "ci_low", "ci_high"))
    hover = [_hover(model, r) for r in rows.to_dict("records")]
    return go.Bar(
        name=str(model), legendgroup=str(model), showlegend=show_legend, orientation="h",
        x=[opt(m) for m in mean], y=y, marker={"color": color},
        error_x=ci_errors(mean, low, high),
        hovertext=hover, hovertemplate="%{hovertext}<extra></extra>",
    )


def _hover(model: Any, row: dict[str, Any]) -> str:
    direction = "" if is_missing(row["higher_is_better"]) else (
        " (higher is better)" if bool(row["higher_is_better"]) else " (lower is better)")
    interval = ci_text(row["ci_low"], row["ci_high"])
    if is_missing(row["ci_low"]) and is_missing(row["stderr"]):
        interval += " (task-level metric)"
    return (
        f"<b>{esc(model)}</b><br>task: {esc(row['task_id'])}<br>"
        f"{esc(row['metric'])}{direction}: {num(row['mean'])}<br>{interval}<br>"
        f"n = {num(row['n'], 'g')}, failed = {num(row['n_failed'], 'g')}"
    )


def _metric_name(table: pd.DataFrame) -> str:
    names = sorted(set(table["metric"].astype(str)))
    return names[0] if len(names) == 1 else "score"


def _x_title(table: pd.DataFrame) -> str:
    title = f"mean {_metric_name(table)} (95% CI)"
    flags = {bool(v) for v in table["higher_is_better"] if not is_missing(v)}
    if len(flags) == 1:
        title += " — higher is better" if flags.pop() else " — lower is better"
    return title
