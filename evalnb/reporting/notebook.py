"""`evalnb report NOTEBOOK.ipynb`: an executed notebook as one HTML file that shows everything offline.

Stock ``jupyter nbconvert --to html`` already shows evalnb's outputs (each has a static face), so
this adds what stock nbconvert cannot: executing the notebook first when asked, giving a Plotly
figure that only carries its JSON (a user's own figure) the picture evalnb's figures have, with
``interactive`` live charts for every figure (plotly.js inlined once: an interactive file stays
one flag away, while notebooks and default reports carry no plotly.js), and freezing widgets: a widget output whose static face sits beside it is
dropped, any other (a plain ipywidgets slider) is drawn as HTML from its saved state. The widget
state is then removed, so the page loads no widget scripts. No cell tag is required.

The ``lab`` template loads require.js and MathJax from cdnjs; both are dropped
(`drop_network_scripts`), so the page makes no network request when opened: nothing of
evalnb's needs them (pictures are SVG, widgets are frozen, an ``interactive`` page inlines
plotly.js, which then does not register itself with require.js), and offline they would only
fail to load. A notebook's LaTeX is then shown as written.
"""

from __future__ import annotations

import copy
import html
import os
import re
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["drop_network_scripts", "execute_notebook", "freeze_widgets", "notebook_report", "notebook_report_html"]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PLOTLY_MIME = "application/vnd.plotly.v1+json"
STATIC_FACE = "evalnb-static-face"
# a <script src=...></script> or a <link href=...> that points off the page (http:, https: or //)
_NETWORK_SCRIPT = re.compile(r"""<script\b[^>]*\bsrc\s*=\s*["']?(?:https?:)?//[^>]*>\s*</script>\s*""", re.I)
_NETWORK_LINK = re.compile(r"""<link\b[^>]*\bhref\s*=\s*["']?(?:https?:)?//[^>]*>\s*""", re.I)
_BAR_COLOURS = {"success": "#22c55e", "info": "#38bdf8", "warning": "#f59e0b", "danger": "#ef4444", "": "#3b82f6"}


def _need(module: str) -> None:
    from importlib.util import find_spec

    if find_spec(module) is None:
        raise ImportError(f"a notebook report needs {module}: pip install 'evalnb[notebook]' "
                          "(nbconvert, nbclient, ipykernel)")


def execute_notebook(path: str | Path, *, timeout: int = 600) -> Any:
    """The notebook at ``path``, executed in a fresh kernel in its own folder."""
    _need("nbclient")
    import nbformat
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="evalnb-kernel-") as sockets:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", config=_kernel_config(sockets),
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb


def _kernel_config(folder: str) -> Any:
    """The kernel talks to us over local sockets (IPC) in ``folder`` rather than TCP on 127.0.0.1.

    Over TCP, ipykernel warns on every start that the channel is not encrypted ("Kernel is
    running over TCP without encryption"); IPC sockets are files in a private folder, so there
    is nothing to warn about and `make demo` prints only its report. Their path must be
    absolute: the kernel runs in the notebook's folder, this process elsewhere. Linux and macOS.
    """
    from traitlets.config import Config

    if os.name != "posix":
        return Config()
    return Config({"KernelManager": {"transport": "ipc", "ip": os.path.join(folder, "kernel")}})


def notebook_report(notebook: str | Path, out: str | Path, *, execute: bool = False,
                    save_notebook: bool = False, timeout: int = 600, interactive: bool = False) -> Path:
    """Write ``out`` (HTML) for ``notebook``; executed first with ``execute`` (then saved beside
    ``out`` as ``.ipynb`` with ``save_notebook``); ``interactive``: live charts (plotly.js once)."""
    import nbformat

    source, out = Path(notebook), Path(out)
    if not source.is_file():
        raise FileNotFoundError(f"no notebook at {source}")
    nb = execute_notebook(source, timeout=timeout) if execute else nbformat.read(source, as_version=4)
    out.parent.mkdir(parents=True, exist_ok=True)
    if execute and save_notebook:
        nbformat.write(nb, out.with_suffix(".ipynb"))
    out.write_text(notebook_report_html(nb, title=source.stem, interactive=interactive), encoding="utf-8")
    return out


def notebook_report_html(nb: Any, *, title: str = "report", interactive: bool = False) -> str:
    """The stock ``lab`` HTML export of a copy of ``nb`` with figures given faces and widgets frozen."""
    _need("nbconvert")
    from nbconvert import HTMLExporter

    static = copy.deepcopy(nb)
    add_figure_faces(static, interactive=interactive)
    freeze_widgets(static)
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(static, resources={"metadata": {"name": title}})
    return drop_network_scripts(body)


def drop_network_scripts(page: str) -> str:
    """``page`` without scripts and linked resources from other hosts (the template's require.js
    and MathJax, a CDN script someone's output carried): a report must open offline as it is."""
    return _NETWORK_LINK.sub("", _NETWORK_SCRIPT.sub("", page))


def add_figure_faces(nb: Any, *, interactive: bool = False) -> int:
    """Give every Plotly output a picture; ``interactive``: also the live chart, plotly.js once.

    Without ``interactive`` an evalnb figure's interactive HTML (a notebook saved with
    ``EVALNB_PLOTLYJS=inline``) is dropped, so the page carries no plotly.js: the picture shows.
    """
    from evalnb.plots.figure import figure_html, picture_html
    from evalnb.plots.svg import figure_svg

    outputs = [o for cell in nb.cells for o in cell.get("outputs", []) if PLOTLY_MIME in (o.get("data") or {})]
    added, has_js = 0, False
    for n, output in enumerate(outputs):
        data = output["data"]
        own = "evalnb-figure" in str(data.get("text/html", ""))
        if "text/html" in data and not own:
            continue  # someone else's HTML for this figure: theirs to show
        spec = data[PLOTLY_MIME]
        if "image/svg+xml" not in data:
            try:
                data["image/svg+xml"] = figure_svg(spec)
            except Exception:  # noqa: BLE001 - no picture: the JSON alone, as before
                pass
        data.pop("text/html", None)
        if interactive:
            data["text/html"] = figure_html(spec, svg=data.get("image/svg+xml", ""), include_plotlyjs=not has_js,
                                            element_id=f"evalnb-report-figure-{n}")
            has_js = True
        elif "image/svg+xml" in data:
            data["text/html"] = picture_html(data["image/svg+xml"])  # inline: text, not an <img>
        added += 1
    return added


def freeze_widgets(nb: Any) -> int:
    """Replace every widget output of ``nb`` by static HTML (or drop it beside a static face)."""
    state = ((nb.metadata.get("widgets") or {}).get(WIDGET_STATE) or {}).get("state") or {}
    frozen = 0
    for cell in nb.cells:
        outputs = cell.get("outputs", [])
        faced = any(STATIC_FACE in str((o.get("data") or {}).get("text/html", "")) for o in outputs)
        kept = []
        for output in outputs:
            data = output.get("data") or {}
            view = data.get(WIDGET_VIEW)
            if view is None:
                kept.append(output)
                continue
            frozen += 1
            if faced:
                continue  # its static face, the next output, shows its content
            if "text/html" not in data:
                data["text/html"] = f'<div class="evalnb-static-widget">{render(view.get("model_id"), state)}</div>'
            del data[WIDGET_VIEW]
            kept.append(output)
        cell["outputs"] = kept
    nb.metadata.pop("widgets", None)
    return frozen


def render(model_id: str | None, state: dict[str, Any], depth: int = 0) -> str:
    """HTML for one widget model and its children, from the saved state ('' if unknown)."""
    model = state.get(model_id or "")
    if model is None or depth > 50:
        return ""
    kind, s = model.get("model_name", ""), model.get("state") or {}
    children = [render(_ref(c), state, depth + 1) for c in s.get("children") or []]
    label = _label(s)
    if kind in ("VBoxModel", "BoxModel", "GridBoxModel"):
        return f'<div style="display:flex;flex-direction:column;gap:4px">{"".join(children)}</div>'
    if kind == "HBoxModel":
        return f'<div style="display:flex;flex-wrap:wrap;align-items:center;gap:8px">{"".join(children)}</div>'
    if kind in ("HTMLModel", "HTMLMathModel"):
        return f"<div>{label}{s.get('value') or ''}</div>"
    if kind == "LabelModel":
        return f"<span>{html.escape(str(s.get('value') or ''))}</span>"
    if kind in ("IntProgressModel", "FloatProgressModel"):
        return _progress(s, label)
    if kind == "ButtonModel":
        return (f'<span style="border:1px solid #d1d5db;border-radius:3px;padding:1px 8px;color:#374151;'
                f'background:#f3f4f6">{html.escape(str(s.get("description") or ""))}</span>')
    if kind in ("TabModel", "AccordionModel", "StackModel"):
        titles = s.get("titles") or []
        selected = s.get("selected_index") or 0
        parts = []
        for i, child in enumerate(children):
            if i == selected or kind == "AccordionModel":
                title = html.escape(str(titles[i])) if i < len(titles) and titles[i] else f"tab {i + 1}"
                parts.append(f'<div style="font-weight:600;margin-top:4px">{title}</div>{child}')
        return "".join(parts)
    if kind in ("DropdownModel", "SelectModel", "RadioButtonsModel", "ToggleButtonsModel"):
        labels, index = s.get("_options_labels") or [], s.get("index")
        chosen = labels[index] if isinstance(index, int) and 0 <= index < len(labels) else ""
        return f"<span>{label}<b>{html.escape(str(chosen))}</b></span>"
    if "value" in s:  # sliders, text fields, checkboxes...
        return f"<span>{label}<code>{html.escape(str(s['value']))}</code></span>"
    return "".join(children)


def _ref(value: Any) -> str:
    return value[len("IPY_MODEL_"):] if isinstance(value, str) and value.startswith("IPY_MODEL_") else ""


def _label(s: dict[str, Any]) -> str:
    text = s.get("description")
    return f'<span style="color:#4b5563;margin-right:6px">{html.escape(str(text))}</span>' if text else ""


def _progress(s: dict[str, Any], label: str) -> str:
    low, high, value = s.get("min") or 0, s.get("max") or 1, s.get("value") or 0
    share = 0.0 if high <= low else max(0.0, min(1.0, (value - low) / (high - low)))
    colour = _BAR_COLOURS.get(s.get("bar_style") or "", _BAR_COLOURS[""])
    bar = (f'<span style="display:inline-block;width:200px;height:14px;background:#e5e7eb;border-radius:2px;'
           f'vertical-align:middle"><span style="display:block;width:{share * 100:.1f}%;height:100%;'
           f'background:{colour};border-radius:2px"></span></span>')
    return f"<span>{label}{bar}</span>"
