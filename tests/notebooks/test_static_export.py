"""Stock nbconvert shows every evalnb output, and the executed notebook is small enough to mail.

A small notebook (local stand-in models, as notebooks/01 uses) shows a preview, runs (the progress
panel), shows ``result.compare()``, ``result.browse(task_id=...)``, a diff forest and a bar chart.
It is executed with nbclient (which saves the widget state, so nbconvert draws the widget views,
empty without the widget scripts) and saved: at most 500 kB, with no plotly.js in it. It is
exported with the stock ``HTMLExporter``. Outside ``<script>`` the page must hold each output's
real content: the preview's first prompt, both model labels, the panel's final counts, browse
answers and chart pictures of real size; in Chromium, with every non-local request refused, the
three charts are drawn (evalnb's SVG pictures: nothing to load).
"""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from helpers.jupyterlab import CHROMIUM

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PLOTLYJS_BANNER = "* plotly.js v"

pytestmark = pytest.mark.timeout(300)

CELLS = [
    f"""import sys
sys.path.insert(0, {str(EXAMPLES)!r})
import evalnb
from notebook_models import setup_models
setup = setup_models(2)
suite = evalnb.Suite.from_file({str(EXAMPLES / "quickstart" / "suite.yaml")!r})""",
    'evalnb.preview(suite, "arithmetic")',
    "result = evalnb.run(suite, setup.models, concurrency=8)",
    "result.compare()",
    'result.browse(task_id="arithmetic", page_size=3, static_pages=2)',
    "evalnb.plots.diff_forest(result.diff(result))",
    "evalnb.plots.metric_by_model(result.metrics)",
    "setup.close()",
]
MAX_NOTEBOOK_BYTES = 500_000


class _Visible(HTMLParser):
    """The text and the start tags of a page outside <script> and <style>."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[tuple[str, dict]] = []
        self._hidden = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._hidden += 1
        elif not self._hidden:
            self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._hidden -= 1

    def handle_data(self, data):
        if not self._hidden:
            self.text.append(data)


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The notebook, executed by nbclient with the stand-ins (as `scripts/execute_notebooks.py` does)."""
    from nbclient import NotebookClient

    folder = tmp_path_factory.mktemp("static-export")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    saved = dict(os.environ)
    for name in ("EVALNB_BASE_URL", "OPENAI_API_KEY", "EVALNB_MODELS", "EVALNB_API_KEY"):
        os.environ.pop(name, None)
    os.environ["EVALNB_HOME"] = str(folder / "home")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), saved.get("PYTHONPATH", "")])
    os.environ["PLOTLY_RENDERER"] = "plotly_mimetype"
    try:
        NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    nbformat.write(nb, folder / "small.ipynb")
    return folder / "small.ipynb", nb


@pytest.fixture(scope="module")
def exported(executed):
    from nbconvert import HTMLExporter

    path, nb = executed
    body, _ = HTMLExporter().from_notebook_node(nb)  # stock: no template, no preprocessor of ours
    out = path.with_suffix(".html")
    out.write_text(body, encoding="utf-8")
    return out, body


def _data(nb, cell: int) -> list[dict]:
    return [dict(o.get("data") or {}) for o in nb.cells[cell].outputs if o.output_type in ("display_data", "execute_result")]


def test_each_widget_has_its_own_static_output_in_the_notebook(executed):
    _, nb = executed
    assert nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]  # nbclient saved it
    for cell, expected in ((1, "What is 70 + 33?"), (2, "160/160 samples"), (4, "items 1-6 of 40")):
        outputs = _data(nb, cell)
        views = [d for d in outputs if "application/vnd.jupyter.widget-view+json" in d]
        faces = [d for d in outputs if "evalnb-static-face" in d.get("text/html", "")]
        assert len(views) == 1 and "text/html" not in views[0], f"cell {cell}: {outputs}"
        assert len(faces) == 1 and expected in faces[0]["text/html"], f"cell {cell}: {faces}"


def test_figures_carry_json_and_a_picture_and_no_plotlyjs(executed):
    _, nb = executed
    figures = [_data(nb, cell)[0] for cell in (3, 5, 6)]
    for bundle in figures:
        assert {"application/vnd.plotly.v1+json", "text/html", "image/svg+xml"} <= set(bundle)
        size = re.match(r'<svg [^>]*width="(\d+)" height="(\d+)"', bundle["image/svg+xml"])
        assert size and int(size[1]) == 800 and int(size[2]) >= 300
        assert PLOTLYJS_BANNER not in bundle["text/html"] and "<script" not in bundle["text/html"]
    compare = figures[0]
    assert compare["image/svg+xml"].count("<rect") > 4 and "standin-small" in compare["image/svg+xml"]


def test_the_saved_notebook_is_small_enough_to_mail(executed):
    path, nb = executed
    size = path.stat().st_size
    assert size <= MAX_NOTEBOOK_BYTES, f"{size:,} bytes"
    text = path.read_text(encoding="utf-8")
    assert PLOTLYJS_BANNER not in text and "Plotly.newPlot" not in text
    assert len(json.dumps(nb.metadata["widgets"])) < 250_000  # the widgets' saved state (~110 kB measured)


def test_stock_export_shows_every_output_outside_scripts(exported):
    _, body = exported
    page = _Visible()
    page.feed(body)
    text = " ".join(page.text)
    assert "What is 70 + 33?" in text  # the preview's first item
    assert "160/160 samples" in text and "standin-large" in text and "standin-small" in text  # the panel, final
    assert re.search(r"The answer is \d+", text) and "34 more item(s)" in text  # browse: 2 pages of 3, and the rest
    pictures = [a for tag, a in page.tags if tag == "svg" and "evalnb-figure-svg" in a.get("class", "")]
    assert len(pictures) == 3 and all(int(a["width"]) == 800 and int(a["height"]) >= 300 for a in pictures)
    assert PLOTLYJS_BANNER not in body  # no plotly.js: the pictures are the charts
    assert len(body) < 1_500_000


@pytest.mark.skipif(not CHROMIUM.exists() and not os.environ.get("CI"), reason="no /usr/bin/chromium")
def test_stock_export_draws_charts_and_shows_widgets_offline(exported):
    from playwright.sync_api import expect

    from helpers.offline_browser import offline_page

    out, _ = exported
    with offline_page() as (page, refused):
        page.goto(out.as_uri())
        expect.set_options(timeout=30_000)
        charts = page.locator(".evalnb-figure svg.evalnb-figure-svg")
        expect(charts).to_have_count(3)
        for n in range(3):  # each chart drawn: on screen, full size, with its marks
            expect(charts.nth(n)).to_be_visible()
            box = charts.nth(n).bounding_box()
            assert box and box["width"] >= 790 and box["height"] >= 290, box
            assert charts.nth(n).locator("rect, circle").count() > 3
        expect(charts.first).to_contain_text("standin-small")  # the legend, as text
        faces = page.locator(".evalnb-static-face")
        expect(faces).to_have_count(3)  # preview, panel, browse: in cell order
        expect(faces.nth(0)).to_be_visible()
        expect(faces.nth(0)).to_contain_text("What is 70 + 33?")
        expect(faces.nth(1)).to_be_visible()
        expect(faces.nth(1)).to_contain_text("160/160 samples")
        expect(faces.nth(2)).to_be_visible()
        expect(faces.nth(2)).to_contain_text("items 1-6 of 40")
        expect(faces.nth(2)).to_contain_text("The answer is")
        page.screenshot(path=str(out.with_suffix(".png")), full_page=True)
        assert not any("plot.ly" in url or "plotly" in url for url in refused), refused
        assert page.evaluate("typeof window.Plotly") == "undefined"  # nothing needed plotly.js
