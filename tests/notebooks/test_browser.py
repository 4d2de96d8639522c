"""The quickstart notebook in a real browser: JupyterLab served locally, driven by headless Chromium.

nbval proves the kernel side; this proves what a user sees. A copy of ``01_quickstart.ipynb``
with its outputs cleared is opened in JupyterLab, every cell is run from the Run menu, and the
DOM must then hold the preview widget (slider and prompt), the live progress panel and the
Plotly chart. Pressing an arrow key on the preview's slider must change the prompt shown: the
new prompt is rendered by the kernel, so this checks the browser-kernel widget link end to end.
Screenshots: ``reports/browser_quickstart.png`` (the preview after the key press),
``reports/browser_quickstart_results.png`` (progress panel, result table) and
``reports/browser_quickstart_chart.png``.

The second test builds ``make demo``'s HTML report and opens it from disk with every network
request refused: the chart, the metrics and the frozen widgets must all show
(``reports/quickstart_report.png``).

Skipped only when ``/usr/bin/chromium`` is missing outside CI; in CI (``CI`` set) it must run.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "reports" / "browser_quickstart.png"  # the preview after the slider moved
RESULTS_SCREENSHOT = ROOT / "reports" / "browser_quickstart_results.png"  # progress panel, result table
CHART_SCREENSHOT = ROOT / "reports" / "browser_quickstart_chart.png"  # the comparison chart
sys.path.insert(0, str(ROOT / "scripts"))
from execute_notebooks import notebook_env  # noqa: E402
from helpers.jupyterlab import CHROMIUM, CHROMIUM_FLAGS, open_lab_notebook, serve_jupyterlab  # noqa: E402

if not CHROMIUM.exists() and not os.environ.get("CI"):
    pytest.skip("no /usr/bin/chromium (install: apt-get install chromium); required in CI", allow_module_level=True)

pytestmark = pytest.mark.timeout(240)


def _workspace(tmp: Path) -> Path:
    """The repository layout the notebook expects, with the notebook's outputs cleared."""
    root = tmp / "lab"
    (root / "notebooks").mkdir(parents=True)
    shutil.copytree(ROOT / "examples", root / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "notebooks" / "_setup.py", root / "notebooks" / "_setup.py")
    nb = nbformat.read(ROOT / "notebooks" / "01_quickstart.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, root / "notebooks" / "01_quickstart.ipynb")
    return root


@pytest.fixture
def jupyterlab(tmp_path):
    """A JupyterLab server on 127.0.0.1 over a temporary workspace; yields (url, token)."""
    with serve_jupyterlab(tmp_path, _workspace(tmp_path), notebook_env()) as served:
        yield served


def test_quickstart_runs_in_jupyterlab_with_live_widgets_and_chart(jupyterlab):
    from playwright.sync_api import expect

    url, token = jupyterlab
    expect.set_options(timeout=90_000)
    with open_lab_notebook(url, token, "notebooks/01_quickstart.ipynb") as (page, notebook):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").click()
        page.locator("[data-command='runmenu:run-all']").click()

        prompts = notebook.locator(".jp-CodeCell .jp-InputArea-prompt")
        count = prompts.count()
        assert count >= 10
        deadline = time.monotonic() + 150
        while True:
            texts = [t.strip() for t in prompts.all_inner_texts()]
            if all(re.fullmatch(r"\[\d+\]:", t) for t in texts):
                break
            assert time.monotonic() < deadline, f"cells did not finish: {texts}"
            time.sleep(0.5)
        errors = notebook.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        tracebacks = [t for t in errors.all_inner_texts() if "Traceback" in t or "Error" in t]
        assert not tracebacks, tracebacks

        # the preview widget: its slider, and the prompt of item 0 rendered by the kernel
        slider = notebook.locator(".widget-slider").first
        expect(slider).to_be_visible()
        prompt_box = notebook.locator(".widget-html .evalnb-prompt").first
        expect(prompt_box).to_contain_text("What is 70 + 33?")
        # the live progress panel, finished
        panel = notebook.locator(".evalnb-progress")
        expect(panel).to_have_count(1)
        expect(panel).to_contain_text("completed")
        expect(panel).to_contain_text("160/160 samples")
        # the comparison chart, drawn by the Plotly lab extension
        chart = notebook.locator(".jp-RenderedPlotly.js-plotly-plot .main-svg").first
        expect(chart).to_be_attached()
        expect(notebook.locator(".jp-RenderedPlotly.js-plotly-plot")).to_contain_text("standin-large")
        # the widgets' static faces (for exports) are in the page but hidden beside the live widgets
        faces = notebook.locator(".evalnb-static-face")
        expect(faces).to_have_count(2)  # the preview's and the panel's
        expect(faces.first).to_be_hidden()
        expect(faces.last).to_be_hidden()

        # keyboard on the slider -> kernel observer -> new prompt HTML in the browser
        handle = slider.locator(".noUi-handle").first
        handle.focus()
        page.keyboard.press("ArrowRight")
        expect(prompt_box).to_contain_text("What is 84 - 48?")
        expect(slider.locator(".widget-readout")).to_have_text("1")

        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        slider.scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOT))
        panel.scroll_into_view_if_needed()
        page.screenshot(path=str(RESULTS_SCREENSHOT))
        chart.scroll_into_view_if_needed()
        page.screenshot(path=str(CHART_SCREENSHOT))


def test_demo_report_shows_chart_metrics_and_frozen_widgets_offline(tmp_path, monkeypatch):
    """`make demo`'s report: executed with stand-ins, opened from disk with every network request refused."""
    from playwright.sync_api import expect, sync_playwright

    from build_report import build

    for name in ("EVALNB_BASE_URL", "OPENAI_API_KEY", "EVALNB_MODELS", "EVALNB_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "quickstart.html"
    printed = build(ROOT / "notebooks" / "01_quickstart.ipynb", out)
    table = (tmp_path / "quickstart_metrics.txt").read_text().strip()
    assert re.search(r"sentiment\s+standin-small\s+accuracy\s+40", table), table
    comparisons = (tmp_path / "quickstart_comparisons.txt").read_text().strip()
    # each comparison in words: real or not, its interval, the items needed to detect it
    assert "on sentiment (accuracy): +0.325, 95% CI [0.175, 0.475]" in comparisons and "A real difference" in comparisons
    assert "on arithmetic (exact_match)" in comparisons and "Not shown to be real" in comparisons
    assert comparisons.count("takes about") == 2
    assert printed.startswith(table) and printed.endswith(comparisons)
    assert nbformat.read(tmp_path / "quickstart.ipynb", as_version=4).cells  # the executed notebook
    page_html = out.read_text(encoding="utf-8")
    assert "application/vnd.jupyter.widget-view+json" not in page_html  # nothing left to draw from a CDN
    assert "* plotly.js v" not in page_html and len(page_html) < 1_500_000  # a page to mail
    # `make demo`'s second step: the run report of the notebook's run, from the store it kept
    from evalnb.cli import main as cli

    run_page = tmp_path / "quickstart_run.html"
    assert cli(["--home", str(tmp_path / "quickstart_home"), "report", "latest", "-o", str(run_page)]) == 0
    assert "standin-small" in run_page.read_text(encoding="utf-8") and "Paired comparisons" in run_page.read_text()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1300})
            refused: list[str] = []

            def offline(route):
                if route.request.url.startswith("file:"):
                    route.continue_()
                else:
                    refused.append(route.request.url)
                    route.abort()

            page.route("**/*", offline)
            page.goto(out.as_uri())
            expect.set_options(timeout=30_000)
            chart = page.locator(".evalnb-figure svg.evalnb-figure-svg").first  # the picture: no plotly.js
            expect(chart).to_be_visible()
            expect(chart).to_contain_text("standin-small")
            expect(page.locator(".evalnb-run-result")).to_contain_text("accuracy")
            expect(page.locator("body")).to_contain_text("A real difference: the interval excludes 0.")
            expect(page.locator("table.dataframe").filter(has_text="ci_high").first).to_contain_text("exact_match")
            panel = page.locator(".evalnb-static-widget")
            expect(panel).to_contain_text("160/160 samples")  # the progress panel, frozen
            expect(page.locator(".evalnb-static .evalnb-prompt")).to_contain_text("What is 70 + 33?")  # preview fallback
            assert not any("plot.ly" in url or "plotly" in url for url in refused), refused
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            panel.scroll_into_view_if_needed()
            page.screenshot(path=str(ROOT / "reports" / "quickstart_report.png"))
        finally:
            browser.close()
