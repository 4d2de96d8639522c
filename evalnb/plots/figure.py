"""The figure evalnb returns: a plotly Figure that also carries an offline HTML chart and a picture.

A notebook stores what a figure displays as. Plotly's default in a kernel stores only its JSON
mimetype, which Jupyter draws but ``jupyter nbconvert --to html``, GitHub and nbviewer do not. An
evalnb `Figure` displays as one bundle with:

- ``application/vnd.plotly.v1+json``: what JupyterLab draws live (as plotly's own renderer does);
- ``text/html``: the SVG picture, plus a script that draws the interactive chart over it once
  plotly.js is on the page; plotly.js itself is inlined in the first figure a kernel shows, once
  per notebook, not per figure (``EVALNB_PLOTLYJS=none`` leaves it out);
- ``image/svg+xml``: the picture alone (`evalnb.plots.svg`), for viewers without JavaScript;
- ``text/plain``.

Ids in the HTML are a per-kernel counter, so re-executing a notebook gives the same outputs (nbval).
"""

from __future__ import annotations

import html
import itertools
import json
import os
from typing import Any

import plotly.graph_objects as go

from evalnb.plots.svg import figure_svg

__all__ = ["Figure", "as_figure", "figure_bundle", "figure_html", "plotly_json", "plotlyjs_html", "reset_plotlyjs"]

PLOTLY_MIME = "application/vnd.plotly.v1+json"
_counter = itertools.count(1)
_state = {"plotlyjs_sent": False}

# Draw every queued figure once plotly.js has loaded (in whatever order the outputs come).
_DRAIN = "(window.__evalnbFigures||[]).splice(0).forEach(function(f){f();});"


class Figure(go.Figure):
    """A plotly Figure whose display also works in static exports (see the module docstring)."""

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None, validate: bool = True,
                          **kwargs: Any) -> dict[str, Any]:
        return figure_bundle(self)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(figure_bundle(self), raw=True)


def as_figure(fig: go.Figure) -> Figure:
    """``fig`` as an evalnb `Figure` (the same object, no copy)."""
    if not isinstance(fig, Figure):
        fig.__class__ = Figure
    return fig  # type: ignore[return-value]


def reset_plotlyjs() -> None:
    """Forget that plotly.js was sent (a new document): the next figure inlines it again."""
    _state["plotlyjs_sent"] = False


def plotlyjs_html() -> str:
    """plotly.js inline, hidden from an AMD loader (nbconvert pages load require.js)."""
    from plotly.offline import get_plotlyjs

    return ("<script>window.__evalnbDefine=window.define;window.define=undefined;</script>"
            f"<script>{get_plotlyjs()}</script>"
            f"<script>window.define=window.__evalnbDefine;{_DRAIN}</script>")


def figure_html(fig: go.Figure, *, svg: str | None = None, include_plotlyjs: bool = False,
                element_id: str | None = None) -> str:
    """The picture, then the live chart drawn over it when plotly.js is there (no network)."""
    svg = figure_svg(fig) if svg is None else svg or ""
    element_id = element_id or f"evalnb-figure-{next(_counter)}"
    spec = plotly_json(fig)
    payload = json.dumps({"data": spec.get("data", []), "layout": spec.get("layout", {})},
                         separators=(",", ":")).replace("<", "\\u003c")
    draw = (
        "(function(){var root=document.getElementById(%s);if(!root)return;"
        "function draw(){var live=root.querySelector('.evalnb-figure-live');"
        "var spec=JSON.parse(root.querySelector('.evalnb-figure-spec').textContent);"
        "window.Plotly.newPlot(live,spec.data,spec.layout,{responsive:true,displaylogo:false}).then(function(){"
        "root.querySelector('.evalnb-figure-static').style.display='none';});}"
        "if(window.Plotly){draw();}else{(window.__evalnbFigures=window.__evalnbFigures||[]).push(draw);}})();"
    ) % json.dumps(element_id)
    parts = [
        f'<div class="evalnb-figure" id="{html.escape(element_id)}">',
        f'<div class="evalnb-figure-static">{svg}</div><div class="evalnb-figure-live plotly-graph-div"></div>',
        f'<script type="application/json" class="evalnb-figure-spec">{payload}</script>',
        f"<script>{draw}</script></div>",
    ]
    if include_plotlyjs:
        parts.append(plotlyjs_html())
    return "".join(parts)


def figure_bundle(fig: go.Figure) -> dict[str, Any]:
    """The display bundle (see the module docstring); plotly.js goes in the first one only."""
    mime = plotly_json(fig)
    try:
        svg = figure_svg(mime)
    except Exception as exc:  # noqa: BLE001 - a figure we cannot picture still displays as a chart
        svg = None
        picture_error = f"{type(exc).__name__}: {exc}"
    include = not _state["plotlyjs_sent"] and os.environ.get("EVALNB_PLOTLYJS", "inline") != "none"
    _state["plotlyjs_sent"] = _state["plotlyjs_sent"] or include
    title = (fig.layout.title.text or "figure") if fig.layout.title else "figure"
    bundle = {
        PLOTLY_MIME: mime,
        "text/html": figure_html(fig, svg=svg or "", include_plotlyjs=include),
        "text/plain": f"<evalnb Figure: {title}>",
    }
    if svg is None:
        bundle["text/html"] = bundle["text/html"].replace(
            '<div class="evalnb-figure-static"></div>',
            f'<div class="evalnb-figure-static">(no picture of this figure: {html.escape(picture_error)})</div>')
    else:
        bundle["image/svg+xml"] = svg
    return bundle


def plotly_json(fig: go.Figure) -> dict[str, Any]:
    """Exactly what plotly's ``plotly_mimetype`` renderer stores for ``fig`` (data and layout)."""
    import plotly.io as pio

    if isinstance(fig, dict):  # already the stored JSON (a notebook output)
        return {"data": fig.get("data", []), "layout": fig.get("layout", {})}
    return pio.renderers["plotly_mimetype"].to_mimebundle(fig.to_dict())[PLOTLY_MIME]
