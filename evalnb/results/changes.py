"""What changed in the suite between two runs (or two variants): the fields, old and new, and the words.

A diff of scores says *that* something moved; this says *what was changed* to move it. Both
sides are manifests as the store keeps them (a run with prompt variants keeps one resolved task
per (task, variant), see `evalnb.suite.variants`). Each task is flattened to dotted fields
(``output_extraction.pattern``, ``generation.instructions``); a field whose value differs is a
change, and a text field's change also gets a word diff (`evalnb.textdiff`).
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalnb.suite.variants import split_slot
from evalnb.textdiff import word_diff_html, word_diff_text

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Changes", "Change", "suite_changes", "manifest_tasks"]

_SKIPPED = ("id",)  # a slot's id differs by construction
_GONE = object()


@dataclass(frozen=True)
class Change:
    """One field of one task (of one variant) that differs."""

    task_id: str
    variant: str
    field: str
    old: Any  # None when the field was not set
    new: Any

    @property
    def is_text(self) -> bool:
        return isinstance(self.old, str) and isinstance(self.new, str)


class Changes:
    """The changes between two sides; ``.table`` as a DataFrame, shown as HTML or text.

    ``new_name``/``old_name`` name the two sides for the reader (a run's name, then its id).
    """

    def __init__(self, changes: list[Change], *, new_name: str, old_name: str, compared: int) -> None:
        self.changes = changes
        self.new_name, self.old_name = new_name, old_name
        self.compared = compared  # how many (task, variant) pairs were compared

    def __len__(self) -> int:
        return len(self.changes)

    def __bool__(self) -> bool:
        return bool(self.changes)

    @property
    def table(self) -> pd.DataFrame:
        """task_id, variant, field, old, new (one row per changed field); ``variant`` "" without variants."""
        import pandas as pd

        rows = [{"task_id": c.task_id, "variant": c.variant, "field": c.field, "old": c.old, "new": c.new}
                for c in self.changes]
        return pd.DataFrame(rows, columns=["task_id", "variant", "field", "old", "new"])

    def _groups(self) -> dict[tuple[str, str], list[Change]]:
        out: dict[tuple[str, str], list[Change]] = {}
        for c in self.changes:
            out.setdefault((c.task_id, c.variant), []).append(c)
        return out

    def __str__(self) -> str:
        head = f"What changed: {self.new_name} vs {self.old_name}"
        if not self.changes:
            return f"{head}: nothing in the {self.compared} task(s) compared"
        lines = [head]
        for (task, variant), changes in self._groups().items():
            lines.append(f"task {task}" + (f", variant {variant}" if variant else "") + ":")
            for c in changes:
                if c.is_text:
                    lines.append(f"  {c.field}: " + word_diff_text(c.old, c.new).replace("\n", "\n    "))
                else:
                    lines.append(f"  {c.field}: {_show(c.old)} -> {_show(c.new)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return self.html()

    def html(self) -> str:
        """A static block (inline styles, no script): every changed field, text changes word by word."""
        esc = html.escape
        head = (f"<b>What changed</b>: {esc(self.new_name)} <span style='color:#6b7280'>vs</span> "
                f"{esc(self.old_name)}")
        if not self.changes:
            return (f"<div class='evalnb-changes'>{head}: nothing changed in the {self.compared} task(s) "
                    "compared</div>")
        parts = [f"<div class='evalnb-changes' style='margin:6px 0'>{head} "
                 "<span style='color:#6b7280'>(inserted words [+underlined+], deleted words [-struck-])</span>"]
        for (task, variant), changes in self._groups().items():
            where = f"task <b>{esc(task)}</b>" + (f", variant <b>{esc(variant)}</b>" if variant else "")
            parts.append(f"<div style='margin-top:4px'>{where}</div><ul style='margin:2px 0'>")
            for c in changes:
                if c.is_text:
                    body = (f"<pre style='white-space:pre-wrap;margin:2px 0;padding:4px;background:#f9fafb'>"
                            f"{word_diff_html(c.old, c.new)}</pre>")
                else:
                    body = (f"<del style='text-decoration:line-through'>{esc(_show(c.old))}</del> &rarr; "
                            f"<ins style='text-decoration:underline'>{esc(_show(c.new))}</ins>")
                parts.append(f"<li><code>{esc(c.field)}</code>: {body}</li>")
            parts.append("</ul>")
        parts.append("</div>")
        return "".join(parts)


def _show(value: Any) -> str:
    if value is None:
        return "(not set)"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """A task dict as {dotted field: value}; lists stay whole."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            if not prefix and key in _SKIPPED:
                continue
            out.update(_flat(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def manifest_tasks(manifest: Mapping[str, Any] | None) -> dict[tuple[str, str], dict[str, Any]]:
    """(task id, variant) -> the task's manifest dict; variant "" for a run without variants."""
    out = {}
    for task in (manifest or {}).get("tasks") or []:
        if isinstance(task, Mapping) and "id" in task:
            out[split_slot(task["id"])] = dict(task)
    return out


def task_changes(task: str, variant: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> list[Change]:
    """The fields that differ between two versions of one task (a task only on one side: one row)."""
    if old is None or new is None:
        what = "added" if old is None else "removed"
        return [Change(task, variant, "(task)", None if old is None else "present", what)]
    a, b = _flat(old), _flat(new)
    out = []
    for field in list(dict.fromkeys([*a, *b])):
        before, after = a.get(field, _GONE), b.get(field, _GONE)
        if before != after:
            out.append(Change(task, variant, field, None if before is _GONE else before,
                              None if after is _GONE else after))
    return out


def suite_changes(new: Mapping[tuple[str, str], Any], old: Mapping[tuple[str, str], Any], *, new_name: str,
                  old_name: str, pairs: list[tuple[tuple[str, str], tuple[str, str] | None]]) -> Changes:
    """Changes for each ``(new key, old key)`` of `pairs` (keys from `manifest_tasks`; old None: added)."""
    found: list[Change] = []
    for new_key, old_key in pairs:
        task, variant = new_key
        found += task_changes(task, variant, old.get(old_key) if old_key is not None else None, new.get(new_key))
    return Changes(found, new_name=new_name, old_name=old_name, compared=len(pairs))
