"""notebooks/02 exported by stock nbconvert (no template or preprocessor of ours) shows what changed.

The saved, executed notebook compares v2 of the sentiment prompt (one added sentence) with v1,
and runs both as variants. Outside <script>, the exported page must carry the added sentence
marked as inserted (``<ins>[+…+]</ins>``: visible without colour), both runs by name and then
id, and each variant's prompt; with the network off in Chromium, the same is on screen.
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from helpers.jupyterlab import CHROMIUM

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "02_prompt_iteration.ipynb"
SENTENCE = "Use neutral for a review that only states facts, or that mentions both good and bad points."


class _Visible(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.inserted: list[str] = []
        self._hidden = self._ins = 0

    def handle_starttag(self, tag, attrs):
        self._hidden += tag in ("script", "style")
        self._ins += tag == "ins"

    def handle_endtag(self, tag):
        self._hidden -= tag in ("script", "style")
        self._ins -= tag == "ins"

    def handle_data(self, data):
        if not self._hidden:
            self.text.append(data)
            if self._ins:
                self.inserted.append(data)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(NOTEBOOK, as_version=4))
    out = tmp_path_factory.mktemp("export") / "02.html"
    out.write_text(body, encoding="utf-8")
    return out, body


def test_export_marks_the_added_sentence_and_names_both_runs(exported):
    _, body = exported
    page = _Visible()
    page.feed(body)
    text = re.sub(r"\s+", " ", "".join(page.text))
    marked = [t for t in page.inserted if SENTENCE in t]
    assert all(t == f"[+{SENTENCE}+]" for t in marked)
    # changes() twice (v2 vs v1, the variants), browse(baseline=) and browse() of the variants: each its changes
    # block and at least one item's prompt
    assert len(marked) >= 6, len(marked)
    assert re.search(r"What changed: v2: neutral defined \(eval_run_[0-9a-f]{32}\) vs v1: as written \(eval_run_", text)
    assert re.search(r"baseline: v1: as written \(eval_run_[0-9a-f]{32}\)", text)
    assert "standin-small · defined" in text and "standin-small · plain" in text
    assert re.search(r"standin-small: v2: neutral defined \(eval_run_\w+\) − v1: as written \(eval_run_\w+\) on sentiment",
                     text)  # the verdict sentences name the runs


@pytest.mark.skipif(not CHROMIUM.exists() and not os.environ.get("CI"), reason="no /usr/bin/chromium")
def test_export_offline_in_chromium_shows_the_insertion(exported):
    from playwright.sync_api import expect

    from helpers.offline_browser import offline_page

    out, _ = exported
    with offline_page() as (page, refused):
        page.goto(out.as_uri())
        inserted = page.locator("ins", has_text=SENTENCE)
        expect(inserted.first).to_be_visible(timeout=30_000)
        assert inserted.count() >= 6
        expect(page.locator("body")).to_contain_text("v1: as written (eval_run_")
    assert not any("plot.ly" in url or "plotly" in url for url in refused), refused  # nbconvert's own CDN scripts are refused, harmlessly
