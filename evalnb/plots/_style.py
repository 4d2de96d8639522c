"""Shared look of every evalnb figure: model colours, number formats, sizes and the layout.

A model keeps its colour in every figure of a run because colours are assigned by the position
of its name among the run's sorted model names, not by the order traces happen to be drawn.
Sizes are in pixels and grow with the number of rows, so a static HTML export stays readable.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import plotly.graph_objects as go

# Tableau 10, then ten lighter / extra Tableau 20 colours: up to 20 models (a run's limit).
PALETTE: tuple[str, ...] = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
    "#a0cbe8", "#ffbe7d", "#8cd17d", "#b6992d", "#499894",
    "#d37295", "#fabfd2", "#79706e", "#d4a6c8", "#d7b5a6",
)
TEMPLATE = "plotly_white"
ROW_PX = 30  # one bar or marker row
TOP_PX, BOTTOM_PX = 80, 70  # title above, axis title below
MIN_HEIGHT = 300
CHAR_PX = 7  # about one character of 12 px Open Sans
LEGEND_LINE_PX, LEGEND_WIDTH_PX = 22, 800
PANEL_GAP_PX = 100  # between stacked panels: tick labels, axis title, next panel's title


def model_colors(models: Iterable[Any]) -> dict[str, str]:
    """``{model: colour}`` keyed by sorted unique model names (cycles past 20 models)."""
    names = sorted({str(m) for m in models if not is_missing(m)})
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def resolve_colors(colors: Mapping[str, str] | None, models: Iterable[Any]) -> dict[str, str]:
    """Caller's colours win; any model they do not name gets its palette colour."""
    palette = model_colors(models)
    if colors:
        palette.update({str(k): v for k, v in colors.items()})
    return palette


def is_missing(value: Any) -> bool:
    if value is None or type(value).__name__ == "NAType":
        return True
    try:
        return math.isnan(value)
    except TypeError:
        return False


def num(value: Any, spec: str = ".4g") -> str:
    """A number for hover text; "n/a" when missing."""
    return "n/a" if is_missing(value) else format(float(value), spec)


def opt(value: Any) -> float | None:
    """A float for a trace array, or None (JSON null) when missing."""
    return None if is_missing(value) else float(value)


def ci_errors(mean: list[Any], low: list[Any], high: list[Any]) -> dict[str, Any]:
    """Asymmetric error bars (high - mean above, mean - low below); None where no interval."""
    plus, minus = [], []
    for m, lo, hi in zip(mean, low, high, strict=True):
        ok = not (is_missing(m) or is_missing(lo) or is_missing(hi))
        plus.append(float(hi) - float(m) if ok else None)
        minus.append(float(m) - float(lo) if ok else None)
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus,
            "thickness": 1.5, "width": 4, "color": "#333333"}


def ci_text(low: Any, high: Any) -> str:
    if is_missing(low) or is_missing(high):
        return "95% CI: n/a"
    return f"95% CI: [{num(low)}, {num(high)}]"


def esc(value: Any, limit: int = 120) -> str:
    """User text (model output, names) made safe for Plotly's HTML-ish hover labels."""
    text = "—" if value is None else str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return html.escape(text, quote=False).replace("\n", "↵")


def left_margin(labels: Iterable[Any]) -> int:
    """Room for the longest category label (about 7 px a character), within bounds."""
    longest = max((len(str(label)) for label in labels), default=0)
    return int(min(380, max(90, CHAR_PX * longest + 30)))


def finish(
    fig: go.Figure,
    *,
    title: str,
    x_title: str | None,
    y_title: str | None,
    height: int,
    labels: Iterable[Any] = (),
    legend_title: str | None = "model",
) -> go.Figure:
    """Template, title, axis titles, size and margins shared by all figures.

    The legend sits in rows under the plot (not beside it), so long model names take height,
    which grows to match, instead of squeezing the plot's width.
    """
    names = [str(t.name) for t in fig.data
             if t.name and t.showlegend is not False and t.type != "heatmap"]
    lines = legend_lines(names, legend_title or "")
    legend_px = lines * LEGEND_LINE_PX + 10
    fig.update_layout(
        template=TEMPLATE,
        title={"text": title, "x": 0.0, "xanchor": "left", "xref": "container"},
        height=int(max(MIN_HEIGHT, height + legend_px)),
        margin={"l": left_margin(labels), "r": 40, "t": TOP_PX, "b": BOTTOM_PX + legend_px},
        legend={"title": {"text": legend_title or ""}, "traceorder": "normal",
                "orientation": "h", "xref": "container", "x": 0.0, "xanchor": "left",
                "yref": "container", "y": 0.0, "yanchor": "bottom"},
        hovermode="closest",
        showlegend=True,
    )
    if x_title is not None:
        fig.update_xaxes(title_text=x_title, automargin=True)
    if y_title is not None:
        fig.update_yaxes(title_text=y_title, automargin=True)
    from evalnb.plots.figure import as_figure  # plotly only once a figure is built

    return as_figure(fig)  # displays with an offline chart and a picture (see plots.figure)


def legend_lines(names: list[str], title: str, width: int = LEGEND_WIDTH_PX) -> int:
    """How many rows a horizontal legend needs at a typical notebook width (an estimate).

    Once a horizontal legend wraps, Plotly gives every entry the widest entry's width.
    """
    if not names:
        return 0
    entries = [CHAR_PX * len(name) + 45 for name in names]  # symbol, gap and padding
    room = width - (CHAR_PX * len(title) + 10)
    if sum(entries) <= room:
        return 1
    per_line = max(1, room // max(entries))
    return -(-len(entries) // per_line)


def category_axis(fig: go.Figure, order: list[str], **where: Any) -> None:
    """Categories in the given order from the top down (Plotly draws them bottom-up)."""
    fig.update_yaxes(categoryorder="array", categoryarray=order, autorange="reversed",
                     automargin=True, **where)


def stacked_rows(n_rows: list[int], titles: list[str], *, shared_x: bool = False,
                 panel_px: int = 70) -> tuple[go.Figure, int]:
    """One subplot per task, stacked, each as tall as its rows; returns (figure, height)."""
    from plotly.subplots import make_subplots

    heights = [n * ROW_PX + panel_px for n in n_rows]
    plot_px = sum(heights)
    gap = PANEL_GAP_PX if len(n_rows) > 1 else 0
    total = plot_px + gap * (len(n_rows) - 1)
    fig = make_subplots(
        rows=len(n_rows), cols=1, subplot_titles=titles, shared_xaxes=shared_x,
        row_heights=[h / plot_px for h in heights],
        vertical_spacing=(gap / total) if len(n_rows) > 1 else 0.0,
    )
    return fig, total + TOP_PX + BOTTOM_PX


def by_candidate(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``model`` naming the candidate ("model · variant") when it has a non-empty
    ``variant`` column, and that column dropped; unchanged for a run without variants.

    A run with prompt variants has one row per (task, model, variant): keyed by model alone its
    variants would collide (or merge into one trace). `RunResult.compare` names candidates the
    same way, so a candidate keeps one label and colour in every figure.
    """
    columns = getattr(frame, "columns", ())  # not a DataFrame: require_columns says so
    if "variant" not in columns or "model" not in columns:
        return frame
    if not any(not is_missing(v) and str(v) != "" for v in frame["variant"]):
        return frame
    from evalnb.suite.variants import candidate_label

    out = frame.copy()
    variants = out.pop("variant")
    out["model"] = [m if is_missing(v) else candidate_label(m, str(v)) for m, v in zip(out["model"], variants)]
    return out


def paired_candidates(frame: pd.DataFrame) -> pd.DataFrame:
    """A paired table with ``model_a``/``model_b`` naming each row's two candidates.

    `RunResult.paired` of two variants gives ``model``, ``variant_a``, ``variant_b``; `paired_all`
    of a run with variants mixes those rows with model pairs under a ``variant``. Each becomes
    "model · variant" on both sides; a table of plain model pairs is returned unchanged.
    """
    from evalnb.suite.variants import candidate_label

    def text(row: Mapping[str, Any], key: str) -> str:
        value = row.get(key)
        return "" if value is None or is_missing(value) else str(value)

    if not {"variant", "variant_a"} & set(getattr(frame, "columns", ())):
        return frame
    a, b = [], []
    for row in frame.to_dict("records"):
        if text(row, "variant_a"):
            a.append(candidate_label(text(row, "model"), text(row, "variant_a")))
            b.append(candidate_label(text(row, "model"), text(row, "variant_b")))
        else:
            a.append(candidate_label(text(row, "model_a"), text(row, "variant")))
            b.append(candidate_label(text(row, "model_b"), text(row, "variant")))
    out = frame.drop(columns=[c for c in ("variant", "model", "variant_a", "variant_b") if c in frame.columns])
    out = out.assign(model_a=a, model_b=b)
    return out
