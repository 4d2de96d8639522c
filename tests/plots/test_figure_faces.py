"""Every evalnb figure displays with the Plotly JSON and an SVG picture, and no plotly.js.

The picture is drawn by evalnb from the figure (no browser): checked as XML, for its size, its
labels and bars whose lengths are the metric means. By default nothing else is stored (a
10-figure notebook exported by stock nbconvert stays small); ``EVALNB_PLOTLYJS=inline`` adds
the interactive HTML, with plotly.js in the first figure of a document only.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import nbformat
import pytest
from helpers.comparison_kit import MODELS, A, B, frames_fixture

from evalnb import plots
from evalnb.plots.figure import PLOTLY_MIME, Figure, figure_bundle, plotly_json, reset_plotlyjs
from evalnb.plots.svg import figure_svg
from evalnb.results.comparison import agreement, paired

SVG = "{http://www.w3.org/2000/svg}"
BANNER = "* plotly.js v"


@pytest.fixture(scope="module")
def frames():
    return frames_fixture()


def _figures(f):
    m, s, sa = f["metrics"], f["scores"], f["samples"]
    return {
        "metric_by_model": plots.metric_by_model(m), "per_task": plots.per_task(m), "compare": plots.compare(m),
        "paired_forest": plots.paired_forest(paired(s, A, B)), "agreement": plots.agreement_view(agreement(s, None, [A, B])),
        "latency": plots.latency_vs_score(sa, s), "failures": plots.extraction_failures(sa),
        "tokens": plots.tokens_vs_score(sa, s),
    }


def test_every_figure_has_its_json_and_a_picture_of_its_size_and_no_plotlyjs(frames):
    reset_plotlyjs()
    for name, fig in _figures(frames).items():
        assert isinstance(fig, Figure), name
        bundle = fig._repr_mimebundle_()
        assert set(bundle) == {PLOTLY_MIME, "text/html", "image/svg+xml", "text/plain"}, name
        assert BANNER not in str(bundle) and "<script" not in bundle["text/html"], name  # no plotly.js, no code
        assert bundle["text/html"].count(bundle["image/svg+xml"]) == 1  # the picture, inline
        assert len(str(bundle)) < 100_000, name
        assert bundle[PLOTLY_MIME] == plotly_json(fig)  # what plotly's own mimetype renderer stores
        root = ET.fromstring(bundle["image/svg+xml"])
        assert root.tag == f"{SVG}svg" and root.get("width") == "800", name
        assert int(root.get("height")) == fig.layout.height, name
        texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
        assert fig.layout.title.text.split(":")[0] in texts, name
        marks = list(root.iter(f"{SVG}rect")) + list(root.iter(f"{SVG}circle"))
        assert len(marks) > 3, name


def test_bar_lengths_are_the_means(frames):
    metrics = frames["metrics"]
    task = sorted(metrics.task_id.unique())[0]
    fig = plots.metric_by_model(metrics, task_id=task)
    root = ET.fromstring(figure_svg(fig))
    colours = plots.model_colors(MODELS)
    widths = {}
    for rect in root.iter(f"{SVG}rect"):
        for model, colour in colours.items():
            if rect.get("fill") == colour and rect.get("width") != "14":  # a bar, not a legend key
                widths[model] = float(rect.get("width"))
    part = metrics[(metrics.task_id == task)]
    means = {r.model: r["mean"] for _, r in part[part.metric == part.metric.iloc[0]].iterrows()}
    assert set(widths) == set(MODELS)
    a, b = MODELS[0], MODELS[-1]
    assert widths[a] / widths[b] == pytest.approx(means[a] / means[b], rel=0.01)


def test_inline_mode_puts_plotlyjs_into_the_first_figure_only(frames, monkeypatch):
    figs = list(_figures(frames).values())
    reset_plotlyjs()
    monkeypatch.setenv("EVALNB_PLOTLYJS", "inline")
    first, second = figure_bundle(figs[0]), figure_bundle(figs[1])
    assert first["image/svg+xml"] in first["text/html"]  # the picture shows where scripts do not run
    assert first["text/html"].count(BANNER) == 1 and BANNER not in second["text/html"]
    ids = re.findall(r'class="evalnb-figure" id="([^"]+)"', first["text/html"] + second["text/html"])
    assert len(set(ids)) == 2  # two charts on one page never share an element id
    reset_plotlyjs()
    monkeypatch.setenv("EVALNB_PLOTLYJS", "none")
    assert BANNER not in figure_bundle(figs[0])["text/html"]


def test_ten_figure_notebook_export_is_small_and_shows_every_picture(frames):
    from nbconvert import HTMLExporter

    figs = list(_figures(frames).values())
    reset_plotlyjs()
    nb = nbformat.v4.new_notebook()
    for i in range(10):
        bundle = figure_bundle(figs[i % len(figs)])
        cell = nbformat.v4.new_code_cell(f"figure_{i}")
        cell.outputs = [nbformat.v4.new_output("display_data", data=bundle)]
        nb.cells.append(cell)
    body, _ = HTMLExporter().from_notebook_node(nb)
    assert BANNER not in body
    assert body.count('class="evalnb-figure-svg"') >= 10
    assert len(nbformat.writes(nb).encode()) < 400_000 and len(body.encode()) < 1_000_000


def test_numpy_and_pandas_data_of_your_own_figure_are_pictured():
    """plotly stores numpy data as typed arrays ({"dtype", "bdata"}); a pandas Series keeps its index."""
    import numpy as np
    import pandas as pd
    import plotly.graph_objects as go

    points = pd.Series(np.linspace(0.8, 1.0, 7), index=range(100, 107))  # not 0-based: no positional lookup
    fig = plots.as_figure(go.Figure([go.Scatter(x=points.round(4), y=points * 2, mode="markers", name="mine"),
                                     go.Heatmap(z=np.arange(6).reshape(2, 3), xaxis="x2", yaxis="y2")],
                                    layout={"height": 400, "width": 680, "title": {"text": "own"}}))
    bundle = fig._repr_mimebundle_()
    assert "bdata" in str(bundle[PLOTLY_MIME]["data"][0]["x"])  # stored typed, as plotly does
    root = ET.fromstring(bundle["image/svg+xml"])
    assert root.get("width") == "680" and len(list(root.iter(f"{SVG}circle"))) == 7
    cells = [r for r in root.iter(f"{SVG}rect") if r.get("stroke") == "#fff"]
    assert len(cells) == 6 and len({r.get("fill") for r in cells}) == 6  # one colour per value 0..5
