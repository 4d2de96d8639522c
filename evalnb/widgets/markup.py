"""HTML building blocks for the widgets: escaping, boxes, JSON, ``{{field}}`` highlighting, and
the static face each widget displays beside its live view.

Pure functions from data to HTML strings, so what a widget shows can be tested as text and
reused verbatim in the static fallback that exported notebooks display. Every style is
inline (no stylesheet reaches an nbconvert export), and every box sets its own text colour
so it stays readable under a dark Jupyter theme.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

from evalnb.suite.templates import render_spans

if TYPE_CHECKING:
    from evalnb.suite.manifest import Task
    from evalnb.suite.items import Item

Spans = list[tuple[str, "str | None", bool]]

# Soft backgrounds that keep black text readable; a field keeps its colour within one view.
PALETTE = ("#fde68a", "#bfdbfe", "#bbf7d0", "#fbcfe8", "#ddd6fe", "#fed7aa", "#a5f3fc", "#d9f99d")
_MONO = "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px"
_PRE = f"white-space:pre-wrap;word-break:break-word;margin:0;{_MONO}"
_BOXES = {
    "example": "background:#f3f4f6;border:1px dashed #9ca3af",
    "prompt": "background:#eff6ff;border:2px solid #3b82f6",
    "plain": "background:#ffffff;border:1px solid #d1d5db",
    "error": "background:#fef2f2;border:1px solid #ef4444",
}


def esc(value: Any) -> str:
    """``value`` as text that is safe inside HTML elements and attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def pre(text: Any) -> str:
    """Text shown exactly: whitespace and newlines kept, long lines wrapped."""
    return f'<pre style="{_PRE}">{esc(text)}</pre>'


def to_json(value: Any) -> str:
    """Pretty JSON as the user would write it (non-ASCII kept, odd values via ``str``)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def json_block(value: Any) -> str:
    return pre(to_json(value))


def box(label: str, inner_html: str, kind: str = "plain", *, css_class: str = "") -> str:
    """A labelled box: grey for few-shot examples, blue for the evaluated prompt."""
    classes = f"evalnb-box evalnb-{kind} {css_class}".strip()
    return (
        f'<div class="{classes}" style="{_BOXES[kind]};color:#111;border-radius:4px;'
        f'padding:6px 8px;margin:4px 0">'
        f'<div class="evalnb-label" style="font-size:11px;color:#4b5563;margin-bottom:3px">'
        f"{esc(label)}</div>{inner_html}</div>"
    )


def prompt_change(label: str, first: str | None, text: str) -> str:
    """A prompt boxed under `label`, its words against `first` marked (inserted/deleted, readable without colour)."""
    from evalnb.textdiff import word_diff_html

    body = esc(text) if first is None or text == first else word_diff_html(first, text)
    return box(label, f'<pre style="{_PRE}">{body}</pre>')


def heading(text: str) -> str:
    return f'<div style="font-weight:600;margin:8px 0 2px">{esc(text)}</div>'


def warning(text: str) -> str:
    return (
        f'<div class="evalnb-warning" style="color:#92400e;background:#fffbeb;'
        f'border-left:3px solid #f59e0b;padding:2px 6px;margin:2px 0">&#9888; {esc(text)}</div>'
    )


def error(text: str) -> str:
    return box("error", pre(text), "error", css_class="evalnb-error-box")


def note(text: str) -> str:
    return f'<div style="color:#6b7280;font-style:italic">{esc(text)}</div>'


# -- field highlighting ---------------------------------------------------------------------


def field_colours(*span_lists: Spans) -> dict[str, str]:
    """One palette colour per field path, in order of first appearance."""
    colours: dict[str, str] = {}
    for spans in span_lists:
        for _, path, _ in spans:
            if path is not None and path not in colours:
                colours[path] = PALETTE[len(colours) % len(PALETTE)]
    return colours


def missing_fields(*span_lists: Spans) -> list[str]:
    """Placeholder paths the row could not fill, without duplicates, in order."""
    seen: dict[str, None] = {}
    for spans in span_lists:
        for _, path, found in spans:
            if path is not None and not found:
                seen.setdefault(path, None)
    return list(seen)


def spans_html(spans: Spans, colours: dict[str, str]) -> str:
    """Rendered text with each filled placeholder in a coloured span whose tooltip names it.

    A missing field shows as a red marker (it renders as "" in the real prompt); a field that
    resolved to an empty value gets a thin marker so the reader sees where it went.
    """
    parts: list[str] = []
    for text, path, found in spans:
        if path is None:
            parts.append(esc(text))
        elif not found:
            parts.append(
                f'<span class="evalnb-missing" data-field="{esc(path)}" '
                f'title="missing field: {esc(path)} (renders as empty text)" '
                f'style="background:#fee2e2;color:#b91c1c;border:1px dashed #ef4444;'
                f'border-radius:3px;padding:0 2px">&#8709;{esc(path)}</span>'
            )
        else:
            colour = colours.get(path, PALETTE[0])
            empty = "" if text else ";border-left:2px solid #6b7280;padding-left:1px"
            label = f"{{{{{path}}}}}" + ("" if text else " (empty value)")
            parts.append(
                f'<span class="evalnb-field" data-field="{esc(path)}" title="{esc(label)}" '
                f'style="background:{colour};border-radius:2px{empty}">{esc(text)}</span>'
            )
    return f'<pre style="{_PRE}">{"".join(parts)}</pre>'


# -- one item ---------------------------------------------------------------------------------


def item_spans(task: "Task", item: "Item") -> tuple[Spans, Spans]:
    """The evaluated prompt's and the target's spans for ``item``."""
    choices = item.choices
    prompt = render_spans(task.prompt_template, item.row, choices)
    target = render_spans(task.target_template or "", item.row, choices)
    return prompt, target


def prompt_view(task: "Task", item: "Item") -> str:
    """Few-shot examples in grey boxes, then the evaluated prompt in a highlighted box.

    A warning line lists fields missing from the row. If the spans do not reproduce the item's
    text exactly (they always should), the exact text is shown instead: what is displayed must
    be what is sent.
    """
    prompt_spans, target_spans = item_spans(task, item)
    colours = field_colours(prompt_spans, target_spans)
    parts = []
    missing = missing_fields(prompt_spans, target_spans)
    if missing:
        parts.append(warning(f"missing fields: {', '.join(missing)}"))
    fewshot = task.effective_fewshot
    if getattr(item, "description", ""):
        parts.append(box("description (before everything else)", pre(item.description), "example"))
    for number, example in enumerate(item.fewshot, 1):
        parts.append(
            box(f"example {number} (row {example.row_index})", pre(example.text), "example")
        )
    if item.fewshot and fewshot is not None:
        parts.append(note(f"examples and prompt are joined by separator {fewshot.separator!r}"))
    if "".join(text for text, _, _ in prompt_spans) == item.question:
        body = spans_html(prompt_spans, colours)
    else:
        body = pre(item.question)
    parts.append(box(f"evaluated prompt (row {item.index})", body, "prompt"))
    return "".join(parts)


def target_view(task: "Task", item: "Item") -> str:
    """The rendered target with its fields highlighted (or a note when there is none)."""
    if not task.target_template:
        return note("this task has no target_template (target is empty)")
    prompt_spans, target_spans = item_spans(task, item)
    colours = field_colours(prompt_spans, target_spans)
    if "".join(text for text, _, _ in target_spans) != item.target:
        return box("target", pre(item.target))
    return box("target", spans_html(target_spans, colours))


def scores_html(scores: dict[str, Any] | None) -> str:
    if not scores:
        return note("no scores")
    cells = "".join(
        f'<tr><td style="padding:0 8px 0 0">{esc(k)}</td><td><b>{esc(_number(v))}</b></td></tr>'
        for k, v in scores.items()
    )
    return f'<table class="evalnb-scores" style="border-collapse:collapse">{cells}</table>'


def result_view(result: dict[str, Any], label: str | None = None) -> str:
    """An output's extracted value, scores and grader error, as one box."""
    extracted = result.get("extracted_output")
    shown = note("None (no match)") if extracted is None else pre(repr(extracted))
    parts = [f"<div><b>extracted_output</b>: {shown}</div>", scores_html(result.get("scores"))]
    if result.get("error"):
        parts.append(error(str(result["error"])))
    return box(label or "result", "".join(parts), css_class="evalnb-result")


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return "null" if value is None else str(value)


def table(header: list[str], rows: list[tuple[str, list[str]]]) -> str:
    """A grid: a header row, then rows of (label, already-rendered cell HTML)."""
    th = "".join(
        f'<th style="text-align:left;padding:4px;border-bottom:1px solid #9ca3af">{esc(h)}</th>'
        for h in ["", *header]
    )
    body = []
    for label, cells in rows:
        tds = "".join(f'<td style="vertical-align:top;padding:4px;text-align:left">{cell}</td>' for cell in cells)
        body.append(
            f'<tr><td style="vertical-align:top;padding:4px;font-weight:600">{esc(label)}</td>{tds}</tr>'
        )
    return (
        f'<table class="evalnb-table" style="border-collapse:collapse;width:100%">'
        f"<tr>{th}</tr>{''.join(body)}</table>"
    )


ANY_MODEL = "(any model)"  # the estimate's row when the preview was given no model


def estimate_view(estimate: Any, task_id: str) -> str:
    """`evalnb.estimate` for one task: calls, estimated input tokens and the cost bound per model."""
    rows = []
    for r in estimate.table.to_dict("records"):
        cost = r["max_cost_usd"]
        cost_text = f"${cost:,.4f}" if cost == cost else ("no price" if not r.get("priced") else "no bound")
        if r["model"] == ANY_MODEL:
            cost_text = "(per model)"
        rows.append(f"<tr><td>{esc(r['model'])}</td><td style='text-align:right'>{r['calls']:,}</td>"
                    f"<td style='text-align:right'>~{r['input_tokens']:,}</td>"
                    f"<td style='text-align:right'>{esc(cost_text)}</td></tr>")
    judges = int(estimate.table["max_judge_calls"].sum())
    parts = [
        note(f"What running task {task_id!r} would send (nothing is called; input tokens are characters / 4; "
             "the cost bound assumes every call uses max_output_tokens and nothing comes from the store)."),
        "<table style='border-collapse:collapse'><tr><th>model</th><th>calls</th><th>input tokens</th>"
        f"<th>at most</th></tr>{''.join(rows)}</table>",
    ]
    likely = estimate.table["judge_calls"] if "judge_calls" in estimate.table.columns else None
    if judges and likely is not None and likely.notna().all():
        parts.append(note(f"plus about {int(likely.sum()):,} judge calls (as the grader's code reads; at most "
                          f"{judges:,} by max_model_calls per grading; not priced)"))
    elif judges:
        parts.append(note(f"plus up to {judges:,} judge calls (max_model_calls per grading; not priced)"))
    parts.extend(warning(n) for n in estimate.notes)
    return "".join(parts)


def page(*parts: str) -> str:
    """Wrap static HTML so it reads well outside a widget (light background, dark text)."""
    return f'<div class="evalnb-static" style="color:#111;background:#fff;padding:4px">{"".join(parts)}</div>'


def display_bundle(widget: Any, static_html: str, text: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """A widget's display data plus a static HTML fallback (and plain text), as one bundle.

    Only for callers that need a single bundle: a viewer that has the widget's saved state
    (nbconvert after nbclient) prefers the widget view and never shows this HTML. What the
    widgets display is `show_widget`: the live view and the static face as two outputs.
    """
    data = dict(widget._repr_mimebundle_(**kwargs) or {})
    data["text/html"] = static_html
    if text is not None:
        data["text/plain"] = text
    return data


# -- the static face ---------------------------------------------------------------------------

STATIC_FACE_CLASS = "evalnb-static-face"
# Where the live widget is drawn (JupyterLab, Notebook 7, classic, an nbconvert page that could load
# the widget scripts), the static face beside it hides; everywhere else (offline exports, GitHub,
# nbviewer: the style is dropped or never matches) it shows. A drawn widget box has the class
# widget-box; nbconvert's empty placeholder for a widget view does not (it is only .jupyter-widgets).
_HIDE_WHEN_LIVE = (
    "<style>.jp-OutputArea:has(.widget-box) .evalnb-static-face,"
    ".output:has(.widget-box) .evalnb-static-face{display:none}</style>"
)


def static_face(static_html: str) -> dict[str, Any]:
    """The display data of a widget's static face: its current content as plain HTML."""
    return {"text/html": f'<div class="{STATIC_FACE_CLASS}">{_HIDE_WHEN_LIVE}{static_html}</div>'}


def widget_view(widget: Any, text: str | None = None) -> dict[str, Any]:
    """The live view alone (the widget-view mimetype and plain text), no HTML fallback."""
    data = {k: v for k, v in (widget._repr_mimebundle_() or {}).items() if k != "text/html"}
    if text is not None:
        data["text/plain"] = text
    return data


class FaceHandle:
    """The two outputs of a displayed widget; `update` redraws the static face (e.g. final counts)."""

    def __init__(self, view: Any, face: Any) -> None:
        self.view, self.face = view, face

    def update(self, static_html: str) -> None:
        if self.face is not None:  # None outside IPython: display() printed and gave no handle
            self.face.update(static_face(static_html), raw=True)


def show_widget(widget: Any, static_html: str, text: str | None = None) -> FaceHandle:
    """Display the live widget and, as its own output, its static face.

    Why two outputs: a notebook executed by nbclient saves the widget state, and stock nbconvert
    then renders the widget view (empty without the widget scripts) over any ``text/html`` in
    the same bundle. A separate output is always rendered.
    """
    from IPython.display import display

    view = display(widget_view(widget, text), raw=True, display_id=True)
    face = display(static_face(static_html), raw=True, display_id=True)
    return FaceHandle(view, face)
