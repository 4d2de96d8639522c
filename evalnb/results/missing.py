"""How many prompts of a run had a template field their row lacks (the `n_missing_field` column).

SPEC renders a placeholder whose path is not in the row as "", so such a prompt is sent
without complaint; counting them per (task, model) makes a misspelt or half-present field
visible in `RunResult.metrics`. The count is a view over what the store holds — each sample's
dataset row (after preprocessing, as it was rendered) and the task's templates in the stored
manifest — so it needs no extra column and reads the same for every run ever stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["missing_field_counts"]

_SPECIAL = frozenset({"row", "choices", "choice_list"})


def missing_field_counts(frame: pd.DataFrame, manifest: Mapping[str, Any] | None) -> dict[tuple[str, str], int]:
    """(task_id, model) -> samples whose prompt or target template had a field not in their row."""
    tasks = {t.get("id"): t for t in (manifest or {}).get("tasks") or [] if isinstance(t, Mapping)}
    if not tasks or frame.empty:
        return {}
    checks = {task_id: _check(task) for task_id, task in tasks.items()}
    counts: dict[tuple[str, str], int] = {}
    rows = frame["dataset_row"].tolist()
    for task_id, part in frame.groupby("task_id", sort=False).indices.items():
        check = checks.get(task_id)
        if check is None:
            continue
        flags = [check(rows[i]) for i in part]
        if not any(flags):
            continue
        models = frame["model"].to_numpy()[part]
        for model, flag in zip(models, flags):
            if flag:
                counts[(task_id, model)] = counts.get((task_id, model), 0) + 1
    return counts


def _check(task: Mapping[str, Any]) -> Callable[[Any], bool]:
    """row -> whether the task's prompt or target template names a field the row lacks."""
    from evalnb.suite.templates import missing_fields, template_fields

    templates = [task.get("prompt_template") or "", task.get("target_template") or ""]
    choices = task.get("choices")
    paths = [p for t in templates for p in template_fields(t)]
    if all("." not in p and p not in _SPECIAL for p in paths):
        # plain top-level fields (the usual case): one C-level subset test per row
        names = frozenset(paths)
        return lambda row: not row.keys() >= names if type(row) is dict else _is_map(row) and not row.keys() >= names
    return lambda row: _is_map(row) and any(missing_fields(t, row, choices) for t in templates)


def _is_map(row: Any) -> bool:
    return type(row) is dict or isinstance(row, Mapping)
