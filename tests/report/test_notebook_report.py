"""`evalnb report NOTEBOOK.ipynb --execute`: any notebook (no cell tags) as one offline HTML page.

The notebook mixes evalnb's preview, a plain ipywidgets slider and a user's own Plotly figure (only
its JSON, as plotly's default renderer stores it). The report must show all three without
widget scripts: the preview's static face once, the slider drawn from its saved state, the
figure with evalnb's picture and no plotly.js; with ``--interactive`` every figure is also a
live chart and plotly.js is inlined exactly once.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest

from evalnb.cli import main as cli

ROOT = Path(__file__).resolve().parents[2]
BANNER = "* plotly.js v"
# what a browser would fetch from another host: a src= anywhere, a <link href=> (anchors are only links)
_FETCHED = re.compile(r"""(?:\bsrc\s*=\s*["']?|<link\b[^>]*\bhref\s*=\s*["']?)(?:https?:)?//""", re.I)


def _network_references(page: str) -> list[str]:
    return [page[m.start():m.start() + 120] for m in _FETCHED.finditer(page)]

pytestmark = pytest.mark.timeout(240)


def _notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# my eval\nno tagged cells at all")] + [
        nbformat.v4.new_code_cell(source) for source in (
            f"import evalnb\nsuite = evalnb.Suite.from_file({str(ROOT / 'examples' / 'quickstart' / 'suite.yaml')!r})",
            'evalnb.preview(suite, "arithmetic")',
            "import ipywidgets\nipywidgets.IntSlider(value=7, description='threshold')",
            "import plotly.graph_objects as go\n"
            "go.Figure(go.Bar(x=['alpha', 'beta'], y=[3, 5], name='counts'), layout={'title': {'text': 'mine'}})",
        )
    ]
    nbformat.write(nb, path)
    return path


def test_report_executes_and_shows_every_output_without_widget_scripts(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("PLOTLY_RENDERER", "plotly_mimetype")
    source = _notebook(tmp_path / "mine.ipynb")
    out = tmp_path / "out" / "mine.html"
    assert cli(["report", str(source), "--execute", "-o", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    page = out.read_text(encoding="utf-8")
    assert "application/vnd.jupyter.widget-view+json" not in page  # no widget view left to draw from a CDN
    assert page.count('class="evalnb-static-face"') == 1 and "What is 70 + 33?" in page
    assert "threshold</span><code>7</code>" in page  # the plain slider, from its saved state
    assert page.count('class="evalnb-figure-svg"') == 1 and ">mine</text>" in page  # the user's figure, drawn
    assert BANNER not in page and "Plotly.newPlot" not in page and len(page) < 1_000_000  # pictures: no plotly.js
    assert _network_references(page) == []  # the lab template's require.js and MathJax (cdnjs) are dropped
    assert "<script src=" not in page
    assert not nbformat.read(source, as_version=4).cells[1].outputs  # the source notebook is left as it was


def test_report_of_a_saved_notebook_and_clear_errors(tmp_path, capsys):
    saved = ROOT / "notebooks" / "01_quickstart.ipynb"
    out = tmp_path / "q.html"
    assert cli(["report", str(saved), "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "application/vnd.jupyter.widget-view+json" not in page and "What is 70 + 33?" in page
    pictures = page.count('class="evalnb-figure-svg"')
    assert pictures >= 1 and BANNER not in page
    assert cli(["report", str(saved), "--interactive", "-o", str(tmp_path / "live.html")]) == 0
    live = (tmp_path / "live.html").read_text(encoding="utf-8")
    assert live.count(BANNER) == 1  # plotly.js inlined exactly once, however many charts
    assert live.count('<div class="evalnb-figure" id=') == pictures >= 1  # each figure: a live chart over its picture
    assert len(live) - len(page) > 3_000_000
    assert _network_references(page) == [] and _network_references(live) == []
    assert cli(["report", str(tmp_path / "missing.ipynb")]) == 1
    assert "no notebook at" in capsys.readouterr().err
    assert cli(["report", str(saved), "--baseline", "latest"]) == 1
    assert "--baseline is for a run report" in capsys.readouterr().err


def test_scripts_and_links_from_other_hosts_are_dropped_and_the_page_kept():
    from evalnb.reporting.notebook import drop_network_scripts

    page = ('<head><script src="https://cdnjs.example/require.min.js"></script>\n'
            "<script src='//cdn.example/x.js' > </script><link rel=stylesheet href=https://fonts.example/a.css>"
            '<script type="text/x-mathjax-config">init()</script><script>var local = 1;</script></head>'
            '<body><a href="https://example.org/paper">the paper</a><script src="local.js"></script></body>')
    kept = drop_network_scripts(page)
    assert _network_references(page) and _network_references(kept) == []
    assert kept == ('<head><script type="text/x-mathjax-config">init()</script><script>var local = 1;</script></head>'
                    '<body><a href="https://example.org/paper">the paper</a><script src="local.js"></script></body>')
