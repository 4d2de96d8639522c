"""The figure evalnb returns: a plotly Figure that also carries a picture, for notebooks you can send.

A notebook stores what a figure displays as. Plotly's default in a kernel stores only its JSON
mimetype, which Jupyter draws but ``jupyter nbconvert --to html``, GitHub and nbviewer do not. An
evalnb `Figure` displays as one bundle with:

- ``application/vnd.plotly.v1+json``: what JupyterLab and VS Code draw live (as plotly's own
  renderer does; their Plotly extension brings plotly.js, so the notebook does not);
- ``text/html``: the same picture inline (`evalnb.plots.svg`): what ``nbconvert --to html``,
  GitHub and nbviewer show, offline and without JavaScript (nbconvert would turn a bare
  ``image/svg+xml`` into an ``<img>`` without text);
- ``image/svg+xml``: the picture alone, for viewers that take images only;
- ``text/plain``.

No plotly.js goes into the notebook (it is 4.8 MB): a notebook of a 30-row run with its charts
stays a few hundred kB, small enough to mail and to diff. ``EVALNB_PLOTLYJS=inline`` brings back
an interactive ``text/html`` face (the picture, and a script that draws the live chart over it
once plotly.js is on the page; plotly.js inlined in the first figure a kernel shows, once per
notebook). For one interactive file from a notebook, ``evalnb report NB.ipynb --interactive``
does the same at export time. Ids in the HTML are a per-kernel counter, so re-executing a notebook
gives the same outputs (nbval).
"""

from __future__ import annotations

import html
import itertools
import json
import os
from typing import Any

import plotly.graph_objects as go

from evalnb.plots.svg import figure_svg

__all__ = ["Figure", "as_figure", "figure_bundle", "figure_html", "interactive_html", "picture_html", "plotly_json", "plotlyjs_html",
           "reset_plotlyjs"]

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
    """The display bundle (see the module docstring): JSON and picture; with
    ``EVALNB_PLOTLYJS=inline`` also the interactive HTML (plotly.js in the first one only)."""
    mime = plotly_json(fig)
    try:
        svg = figure_svg(mime)
    except Exception as exc:  # noqa: BLE001 - a figure we cannot picture still displays as a chart
        svg = None
        picture_error = f"{type(exc).__name__}: {exc}"
    title = (fig.layout.title.text or "figure") if fig.layout.title else "figure"
    if interactive_html():
        include = not _state["plotlyjs_sent"]
        _state["plotlyjs_sent"] = True
        page = figure_html(fig, svg=svg or "", include_plotlyjs=include)
    else:  # the picture inline (nbconvert would make an <img> of image/svg+xml: no text, no alt)
        page = picture_html(svg or "")
    if svg is None:
        note = f"(no picture of this figure: {html.escape(picture_error)})"
        page = page.replace('<div class="evalnb-figure-static"></div>', f'<div class="evalnb-figure-static">{note}</div>')
    bundle: dict[str, Any] = {PLOTLY_MIME: mime, "text/html": page, "text/plain": f"<evalnb Figure: {title}>"}
    if svg is not None:
        bundle["image/svg+xml"] = svg
    return bundle


def picture_html(svg: str) -> str:
    """A figure's static HTML face: its picture inline, no script."""
    return f'<div class="evalnb-figure"><div class="evalnb-figure-static">{svg}</div></div>'


def interactive_html() -> bool:
    """Whether figures also carry the interactive HTML face (``EVALNB_PLOTLYJS=inline``)."""
    return os.environ.get("EVALNB_PLOTLYJS", "none").strip().lower() == "inline"


def plotly_json(fig: go.Figure) -> dict[str, Any]:
    """Exactly what plotly's ``plotly_mimetype`` renderer stores for ``fig`` (data and layout)."""
    import plotly.io as pio

    if isinstance(fig, dict):  # already the stored JSON (a notebook output)
        return {"data": fig.get("data", []), "layout": fig.get("layout", {})}
    return pio.renderers["plotly_mimetype"].to_mimebundle(fig.to_dict())[PLOTLY_MIME]
