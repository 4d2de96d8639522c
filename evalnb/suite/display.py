"""How a Suite reads in a notebook: one static table of its tasks (no scripts, inline styles).

Kept apart from the schema so `manifest.py` stays the manifest and nothing else.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalnb.suite.manifest import SuiteManifest as Suite, Task

_CELL = 'style="text-align:left;vertical-align:top;padding:2px 8px"'
_MAX_TEMPLATE = 160


def _dataset(task: "Task") -> str:
    d: Any = task.dataset
    if getattr(d, "file_id", None):
        return f"file {d.file_id}"
    parts = [str(getattr(d, "path", ""))]
    for name in ("name", "split"):
        value = getattr(d, name, None)
        if value:
            parts.append(f"{name}={value}")
    if getattr(d, "max_rows", None):
        parts.append(f"max_rows={d.max_rows}")
    return " ".join(parts)


def _template(text: str | None) -> str:
    if not text:
        return ""
    short = text if len(text) <= _MAX_TEMPLATE else text[: _MAX_TEMPLATE - 1] + "…"
    return f"<code style='white-space:pre-wrap'>{html.escape(short)}</code>"


def suite_html(suite: "Suite") -> str:
    """A header line (version, schema, task count) and one row per task."""
    esc = html.escape
    head = ["task", "type", "dataset", "prompt template", "few-shot", "extraction", "metrics", "grader"]
    rows = []
    for task in suite.tasks:
        fewshot = task.effective_fewshot
        grader = task.grader
        cells = [
            f"<b>{esc(task.id)}</b>" + (f"<br><small>{esc(task.name)}</small>" if task.name else ""),
            esc(task.type),
            esc(_dataset(task)),
            _template(task.prompt_template),
            esc(f"{fewshot.count} ({fewshot.strategy})") if fewshot else "0",
            esc(task.extraction.type),
            esc(", ".join(m.id for m in task.effective_metrics)) or "—",
            esc(f"{grader.contract}" + (" · model access" if grader.effective_model_access == "mka1" else "")),
        ]
        rows.append("<tr>" + "".join(f"<td {_CELL}>{c}</td>" for c in cells) + "</tr>")
    header = "".join(f"<th {_CELL}>{h}</th>" for h in head)
    n = len(suite.tasks)
    return (
        "<div class='evalnb-suite'>"
        f"<p style='margin:0 0 4px 0'><b>evalnb Suite</b> <code>{esc(suite.version[:16])}</code> · "
        f"schema {esc(suite.schema_version)} · {n} task{'s' if n != 1 else ''}</p>"
        f"<table><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def suite_text(suite: "Suite") -> str:
    lines = [f"Suite {suite.version[:16]} ({len(suite.tasks)} tasks)"]
    for task in suite.tasks:
        lines.append(f"  {task.id} [{task.type}] {_dataset(task)}")
    return "\n".join(lines)
