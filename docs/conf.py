"""Sphinx configuration of evalnb's documentation site (``make docs`` -> docs/_build/html).

Why Sphinx + MyST-NB + autodoc: see design_notes.md ("The documentation site"). Pages are
plain Markdown (MyST); the example notebooks are rendered with the outputs stored in them and
never executed here (``nb_execution_mode = "off"``); nothing is loaded from the internet.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # document this checkout's evalnb, not an installed one

project = "evalnb"
author = "the evalnb authors"
copyright = "evalnb authors"
from evalnb import __version__ as release  # noqa: E402

version = release

extensions = [
    "myst_nb",  # Markdown pages (MyST) and .ipynb notebooks with their stored outputs
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

# Pages other engineers' branches may add (docs/<name>.md) are named here before they exist;
# until a page exists its index toctree entry is left out (see `_drop_pending_pages`). Every page
# the index names exists now, so none is pending; any missing toctree entry is an error.
PENDING_PAGES: set[str] = set()

exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "_notebooks_src"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3


# Notebooks: rendered as stored, never executed; no widget or plotly scripts from a CDN.
nb_execution_mode = "off"
nb_ipywidgets_js = {}
nb_output_stderr = "show"

default_role = "code"  # docstrings use `name` as Markdown does
autosummary_generate = True
autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False}
napoleon_google_docstring = False
napoleon_numpy_docstring = True

html_theme = "furo"
html_title = f"evalnb {release}"
html_static_path: list[str] = []
html_copy_source = False
html_show_sourcelink = False


def _drop_pending_pages(app, docname, source):
    """Leave out toctree entries of the index that name a PENDING_PAGES page not written yet."""
    if docname != "index":
        return
    present = {p.stem for p in DOCS.glob("*.md")}
    kept, in_toctree = [], False
    for line in source[0].splitlines(keepends=True):
        if line.startswith("```{toctree}"):
            in_toctree = True
        elif line.startswith("```"):
            in_toctree = False
        name = line.strip()
        if in_toctree and name in PENDING_PAGES and name not in present:
            continue
        kept.append(line)
    source[0] = "".join(kept)


NOTEBOOKS = ROOT / "notebooks"
NOTEBOOK_PAGES = DOCS / "examples"
_DROP_MIMES = ("application/vnd.jupyter.widget-view+json", "application/vnd.plotly.v1+json")


def _page_notebook(nb: dict) -> dict:
    """The stored notebook for a static page: the live widget views (their static faces, stored
    as the next output, stay) and the Plotly chart (~4.8 MB of plotly.js) are dropped; a figure
    shows as the SVG picture evalnb stored beside it."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            data = out.get("data")
            if data is not None:
                if "application/vnd.jupyter.widget-view+json" in data:
                    continue
                if "image/svg+xml" in data:
                    data = {"image/svg+xml": data["image/svg+xml"], "text/plain": data.get("text/plain", "")}
                data = {k: v for k, v in data.items() if k not in _DROP_MIMES}
                out = {**out, "data": data}
            kept.append(out)
        cell["outputs"] = kept
    nb.get("metadata", {}).pop("widgets", None)
    return nb


def _copy_notebooks() -> None:
    """docs/examples/NN_name.ipynb from notebooks/ (generated, git-ignored), lightened."""
    NOTEBOOK_PAGES.mkdir(exist_ok=True)
    wanted = {p.name for p in NOTEBOOKS.glob("[0-9]*.ipynb")}
    for stale in NOTEBOOK_PAGES.glob("*.ipynb"):
        if stale.name not in wanted:
            stale.unlink()
    for path in sorted(NOTEBOOKS.glob("[0-9]*.ipynb")):
        text = json.dumps(_page_notebook(json.loads(path.read_text(encoding="utf-8"))), indent=1)
        target = NOTEBOOK_PAGES / path.name
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")


_copy_notebooks()


_GLUED_BACKTICK = re.compile(r"(?<!`)(`[^`\n]+`)(?=[A-Za-z0-9])")


def _markdownish_docstring(app, what, name, obj, options, lines):
    """Docstrings are written for people (`Model`s, Markdown-like): a backticked name glued to
    the next word is valid RST only with an escaped space after it."""
    lines[:] = [_GLUED_BACKTICK.sub(lambda m: m.group(1) + "\\ ", line) for line in lines]


def _markdownish_summaries() -> None:
    """The same for autosummary's one-line summaries (Sphinx 9 reads them without the event)."""
    from sphinx.ext import autosummary

    extract = autosummary.extract_summary

    def extract_summary(doc, settings):
        return extract([_GLUED_BACKTICK.sub(lambda m: m.group(1) + "\\ ", line) for line in doc], settings)

    autosummary.extract_summary = extract_summary


def _reread_index(app, env, added, changed, removed):
    """The index's toctrees depend on which pages exist: read it again on every build."""
    return ["index"]


def setup(app):
    _markdownish_summaries()
    app.connect("env-get-outdated", _reread_index)
    app.connect("source-read", _drop_pending_pages)
    app.connect("autodoc-process-docstring", _markdownish_docstring)
