"""Stock nbconvert shows every evalnb output: an executed notebook exported with no template or
preprocessor of ours, read as text and opened offline in headless Chromium.

A small notebook (local stand-in models, as notebooks/01 uses) shows a preview, runs (the progress
panel), shows ``result.compare()``, ``result.browse(task_id=...)`` and a diff forest. It is
executed with nbclient (which saves the widget state, so nbconvert draws the widget views, empty
without the widget scripts) and exported with the stock ``HTMLExporter``. Outside ``<script>``
the page must hold each output's real content: the preview's first prompt, both model labels,
the panel's final counts, browse answers and chart pictures of real size; in Chromium, with
every non-local request refused, the charts are drawn (plotly.js comes once, inside the page).
"""

from __future__ import annotations

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
    "setup.close()",
]


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


def test_figures_carry_json_html_and_a_picture(executed):
    _, nb = executed
    compare, forest = _data(nb, 3)[0], _data(nb, 5)[0]
    for bundle in (compare, forest):
        assert {"application/vnd.plotly.v1+json", "text/html", "image/svg+xml"} <= set(bundle)
        size = re.match(r'<svg [^>]*width="(\d+)" height="(\d+)"', bundle["image/svg+xml"])
        assert size and int(size[1]) == 800 and int(size[2]) >= 300
    assert PLOTLYJS_BANNER in compare["text/html"] and PLOTLYJS_BANNER not in forest["text/html"]  # once
    assert compare["image/svg+xml"].count("<rect") > 4 and "standin-small" in compare["image/svg+xml"]


def test_stock_export_shows_every_output_outside_scripts(exported):
    _, body = exported
    page = _Visible()
    page.feed(body)
    text = " ".join(page.text)
    assert "What is 70 + 33?" in text  # the preview's first item
    assert "160/160 samples" in text and "standin-large" in text and "standin-small" in text  # the panel, final
    assert re.search(r"The answer is \d+", text) and "34 more item(s)" in text  # browse: 2 pages of 3, and the rest
    pictures = [a for tag, a in page.tags if tag == "svg" and "evalnb-figure-svg" in a.get("class", "")]
    assert len(pictures) == 2 and all(int(a["width"]) == 800 and int(a["height"]) >= 300 for a in pictures)
    assert body.count(PLOTLYJS_BANNER) == 1  # plotly.js once per document
    assert len(body) < 10_000_000


@pytest.mark.skipif(not CHROMIUM.exists() and not os.environ.get("CI"), reason="no /usr/bin/chromium")
def test_stock_export_draws_charts_and_shows_widgets_offline(exported):
    from playwright.sync_api import expect

    from helpers.offline_browser import offline_page

    out, _ = exported
    with offline_page() as (page, refused):
        page.goto(out.as_uri())
        expect.set_options(timeout=30_000)
        charts = page.locator(".evalnb-figure .js-plotly-plot .main-svg")
        expect(charts.first).to_be_attached()
        page.wait_for_function("document.querySelectorAll('.evalnb-figure .js-plotly-plot').length === 2")
        expect(page.locator(".evalnb-figure").first).to_contain_text("standin-small")  # the drawn legend
        expect(page.locator(".evalnb-figure-static").first).to_be_hidden()  # the picture gave way to the chart
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
