"""Freeze a notebook's ipywidgets into plain HTML, so an exported report never shows an empty box.

An HTML export carries the widget *state*, but drawing it needs the widget JavaScript from a
CDN; offline (or in a mail attachment) the widget area stays empty. This rewrites each widget
output of an executed notebook as static HTML built from that saved state:

- an output that already has a ``text/html`` fallback (evalnb's preview does) keeps only it;
- any other widget output (evalnb's progress panel) is drawn from its model tree: boxes, HTML,
  progress bars, buttons, sliders and text fields as their final values, inline styles only.

The widget state metadata is then dropped, so the exported page loads no widget scripts.
"""

from __future__ import annotations

import html
from typing import Any

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
_BAR_COLOURS = {"success": "#22c55e", "info": "#38bdf8", "warning": "#f59e0b", "danger": "#ef4444", "": "#3b82f6"}


def freeze_widgets(nb: Any) -> int:
    """Replace every widget output of ``nb`` (a NotebookNode) by static HTML; returns how many."""
    state = ((nb.metadata.get("widgets") or {}).get(WIDGET_STATE) or {}).get("state") or {}
    frozen = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data") or {}
            view = data.get(WIDGET_VIEW)
            if view is None:
                continue
            if "text/html" not in data:
                data["text/html"] = f'<div class="evalnb-static-widget">{render(view.get("model_id"), state)}</div>'
            del data[WIDGET_VIEW]
            frozen += 1
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
