"""Item-level agreement of two or more models: how often they agree, and on which items not.

Top panel: per task, items split into agreement kinds (for two models on a 0/1 metric: both
right, only A, only B, neither). Bottom panel: a heatmap of the items where models disagree,
items × models coloured by score, most disagreement first, so the interesting rows are on top.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from evalnb.results.comparison import all_binary, require_columns
from evalnb.plots._style import (
    BOTTOM_PX,
    ROW_PX,
    TOP_PX,
    category_axis,
    esc,
    finish,
    is_missing,
    num,
    resolve_colors,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import plotly.graph_objects as go

BOTH, NEITHER = "#bdbdbd", "#636363"
AGREE, DISAGREE, UNSCORED = "#bdbdbd", "#e15759", "#eeeeee"
LOW, HIGH = "#deebf7", "#08519c"  # heatmap 0 / 1: neutral blues, never a model's colour
ITEM_PX = 18


def agreement_view(
    agreement_df: pd.DataFrame,
    *,
    max_items: int = 60,
    colors: Mapping[str, str] | None = None,
) -> go.Figure:
    """Agreement kinds per task (stacked bars) above a heatmap of the disagreeing items.

    ``agreement_df`` is ``comparison.agreement``'s table. At most ``max_items`` disagreeing
    items are drawn (the most disagreeing ones); the panel title says how many there are.
    """
    from plotly.subplots import make_subplots

    require_columns(agreement_df, ("task_id", "sample_index", "agree", "flip"), "agreement")
    models = [c.split(":", 1)[1] for c in agreement_df.columns if str(c).startswith("value:")]
    if len(models) < 2:
        raise ValueError("agreement frame needs value:<model> columns for two or more models")
    if agreement_df.empty:
        raise ValueError("agreement frame is empty: nothing to plot")
    if not isinstance(max_items, int) or max_items < 1:
        raise ValueError(f"max_items must be a positive integer, got {max_items!r}")
    table = agreement_df.sort_values(["task_id", "sample_index"], kind="stable")
    tasks = sorted(table["task_id"].unique().tolist(), key=str)
    run_models = list(agreement_df.attrs.get("all_models", [])) + models
    kinds = _kinds(table, models, resolve_colors(colors, run_models))
    shown, n_disagree = _disagreeing(table, models, max_items)

    top_px = max(150, len(tasks) * ROW_PX + 70)
    bottom_px = len(shown) * ITEM_PX + 80 if len(shown) else 0
    rows = 2 if bottom_px else 1
    gap = 150  # top panel's axis, then the heatmap's title, model axis and its title above it
    plot_px = top_px + bottom_px + (gap if rows == 2 else 0)
    titles = [""]  # the legend above the panel names its kinds
    if rows == 2:
        more = f" (top {len(shown)} of {n_disagree})" if len(shown) < n_disagree else ""
        titles.append(f"items where the models disagree{more}")
    fig = make_subplots(
        rows=rows, cols=1, subplot_titles=titles,
        row_heights=[top_px, bottom_px][:rows],  # relative: Plotly normalises them
        vertical_spacing=gap / plot_px if rows == 2 else 0.0,
    )
    _add_kind_bars(fig, table, tasks, kinds)
    category_axis(fig, [str(t) for t in tasks], row=1, col=1)
    fig.update_xaxes(title_text="items", row=1, col=1)
    fig.update_yaxes(title_text="task", row=1, col=1)
    labels = [str(t) for t in tasks]
    if rows == 2:
        labels += _add_heatmap(fig, shown, models, bottom_px / plot_px)
        fig.update_xaxes(title_text="model", side="top", row=2, col=1)
        fig.update_annotations(yshift=55, selector={"text": titles[1]})  # clear the top axis
        fig.update_yaxes(title_text="item (task #index)", row=2, col=1)
    else:
        fig.add_annotation(text="the models agree on every item", xref="paper", yref="paper",
                           x=0.5, y=-0.25, showarrow=False)
    fig.update_layout(barmode="stack")
    finish(
        fig, title=f"Agreement: {', '.join(esc(m) for m in models)}", x_title=None, y_title=None,
        height=plot_px + TOP_PX + BOTTOM_PX, labels=labels, legend_title="items per task:",
    )
    # The legend belongs to the top panel: move it from under the figure to just above it.
    legend_px = fig.layout.margin.b - BOTTOM_PX
    fig.update_layout(
        margin={"t": TOP_PX + legend_px, "b": BOTTOM_PX},
        legend={"yref": "paper", "y": 1.0, "yanchor": "bottom", "xref": "paper", "x": 0.0},
    )
    return fig


def _kinds(table: pd.DataFrame, models: list[str], palette: dict[str, str]
           ) -> list[tuple[str, str, Any]]:
    """(legend name, colour, row mask) for each agreement kind."""
    flips = table["flip"]
    # flip kinds only when every scored pair has one (all tasks 0/1); else agree / disagree
    if len(models) == 2 and flips.notna().any() and (
        flips.notna().to_numpy() == table["agree"].notna().to_numpy()
    ).all():
        a, b = models
        return [
            ("both scored 1", BOTH, flips == "both"),
            (f"only {esc(a)} scored 1", palette[a], flips == "a_only"),
            (f"only {esc(b)} scored 1", palette[b], flips == "b_only"),
            ("both scored 0", NEITHER, flips == "neither"),
            ("not scored", UNSCORED, flips.isna()),
        ]
    agree = table["agree"]
    return [
        ("all agree", AGREE, agree.fillna(False).astype(bool)),
        ("disagree", DISAGREE, (~agree.fillna(True)).astype(bool)),
        ("not scored", UNSCORED, agree.isna()),
    ]


def _add_kind_bars(fig: go.Figure, table: pd.DataFrame, tasks: list[Any],
                   kinds: list[tuple[str, str, Any]]) -> None:
    import plotly.graph_objects as go

    totals = table.groupby("task_id").size()
    for name, color, mask in kinds:
        counts = table[mask.to_numpy()].groupby("task_id").size()
        x = [int(counts.get(t, 0)) for t in tasks]
        if not any(x) and name.startswith("not scored"):
            continue
        hover = [f"<b>{esc(t)}</b><br>{name}: {c} of {int(totals[t])} items "
                 f"({c / int(totals[t]):.0%})" for t, c in zip(tasks, x, strict=True)]
        fig.add_trace(go.Bar(
            name=name, orientation="h", x=x, y=[str(t) for t in tasks], marker={"color": color},
            hovertext=hover, hovertemplate="%{hovertext}<extra></extra>", legendgroup=name,
        ), row=1, col=1)


def _disagreeing(table: pd.DataFrame, models: list[str], limit: int
                 ) -> tuple[pd.DataFrame, int]:
    """Items whose values differ, most disagreement first (largest spread, then std); ties by
    task, then by the pattern of values (so items that flip the same way sit together)."""
    value_cols = [f"value:{m}" for m in models]
    values = table[value_cols].astype(float)
    mask = (table["agree"] == False).fillna(False).to_numpy(dtype=bool)  # noqa: E712
    part = table[mask].assign(
        _spread=(values.max(axis=1) - values.min(axis=1))[mask],
        _std=values.std(axis=1, ddof=0)[mask],
    )
    keys = ["_spread", "_std", "task_id", *value_cols, "sample_index"]
    part = part.sort_values(keys, ascending=[False, False, True] + [False] * len(models) + [True],
                            kind="stable")
    return part.head(limit), len(part)


def _add_heatmap(fig: go.Figure, shown: pd.DataFrame, models: list[str], frac: float
                 ) -> list[str]:
    import plotly.graph_objects as go

    values = shown[[f"value:{m}" for m in models]].astype(float)
    binary = all_binary(values)
    y = [f"{t} #{i}" for t, i in zip(shown["task_id"], shown["sample_index"], strict=True)]
    z = [[None if is_missing(v) else float(v) for v in row] for row in values.to_numpy().tolist()]
    text = []
    for record, zrow in zip(shown.to_dict("records"), z, strict=True):
        text.append([
            f"<b>{esc(record['task_id'])} #{record['sample_index']}</b><br>{esc(m)}<br>"
            f"score: {num(v)}<br>output: {esc(record.get(f'output:{m}'), 80)}"
            for m, v in zip(models, zrow, strict=True)
        ])
    colorbar: dict[str, Any] = {"title": {"text": "score"}, "len": frac, "y": 0,
                                "yanchor": "bottom"}
    if binary:
        scale: Any = [[0.0, LOW], [0.5, LOW], [0.5, HIGH], [1.0, HIGH]]
        colorbar.update(tickvals=[0.25, 0.75], ticktext=["0", "1"])
        zmin, zmax = 0.0, 1.0
    else:
        scale = "Blues"
        present = [v for row in z for v in row if v is not None]
        zmin, zmax = min(present), max(present)
    fig.add_trace(go.Heatmap(
        z=z, x=[str(m) for m in models], y=y, colorscale=scale, zmin=zmin, zmax=zmax,
        text=text, hovertemplate="%{text}<extra></extra>", colorbar=colorbar, xgap=2, ygap=1,
        showscale=True, name="score",
    ), row=2, col=1)
    category_axis(fig, y, row=2, col=1)
    return y
