"""The judge's confusion table against people: one heatmap per (task, model) labelled.

Rows are the person's values, columns the judge's; each cell holds its count and the share
of that row (how the judge scored the answers people gave that value), so the diagonal is
agreement and everything off it is where the judge and the person part ways.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalnb.results.agreement import confusion_counts
from evalnb.results.comparison import require_columns
from evalnb.plots._style import esc, finish

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import plotly.graph_objects as go

LOW, HIGH = "#f7fbff", "#08519c"
CELL_PX = 70


def judge_confusion(agreement: pd.DataFrame, *, task_id: str | None = None, model: str | None = None) -> go.Figure:
    """Heatmaps of ``RunResult.judge_agreement``'s ``confusion`` column, side by side.

    ``task_id`` / ``model`` pick rows of the table; each panel's title gives n, accuracy and
    Cohen's kappa.
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    require_columns(agreement, ("task_id", "model", "n", "accuracy", "cohen_kappa", "confusion"), "judge_agreement")
    table = agreement
    if task_id is not None:
        table = table[table["task_id"] == task_id]
    if model is not None:
        table = table[table["model"] == model]
    table = table[table["n"] > 0]
    if table.empty:
        raise ValueError("no labelled, judged answers to draw (check task_id / model, and that the labels' "
                         "samples were scored)")
    records = table.to_dict("records")
    panels = [confusion_counts(r["confusion"]) for r in records]
    size = max(len(values) for values, _ in panels)
    titles = [f"{esc(r['task_id'])} / {esc(r['model'])}<br>n={r['n']}, accuracy {r['accuracy']:.2f}, "
              f"κ={_kappa(r['cohen_kappa'])}" for r in records]
    fig = make_subplots(rows=1, cols=len(records), subplot_titles=titles, horizontal_spacing=0.12)
    for col, (values, counts) in enumerate(panels, start=1):
        labels = [_label(v) for v in values]
        shares = [[c / sum(row) if sum(row) else 0.0 for c in row] for row in counts]
        text = [[f"{c}<br>{s:.0%}" if sum(row) else f"{c}" for c, s in zip(row, share)]
                for row, share in zip(counts, shares)]
        fig.add_trace(go.Heatmap(
            z=shares, x=labels, y=labels, text=text, texttemplate="%{text}", zmin=0, zmax=1,
            colorscale=[[0, LOW], [1, HIGH]], showscale=col == len(panels),
            colorbar={"title": {"text": "share of<br>the row"}, "tickformat": ".0%"},
            hovertemplate="person %{y}, judge %{x}: %{text}<extra></extra>", name="",
        ), row=1, col=col)
        fig.update_xaxes(title_text="judge", type="category", row=1, col=col)
        fig.update_yaxes(title_text="person" if col == 1 else None, type="category", autorange="reversed",
                         row=1, col=col)
    finish(fig, title="The judge against people", x_title=None, y_title=None,
           height=size * CELL_PX + 120, legend_title=None)
    fig.update_layout(showlegend=False, width=max(420, 300 * len(records) + 120))
    return fig


def _label(value: Any) -> str:
    return str(value)


def _kappa(value: Any) -> str:
    return "—" if value != value else f"{value:.2f}"
