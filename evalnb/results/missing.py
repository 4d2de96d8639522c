"""How many prompts of a run had a template field their row lacks (the `n_missing_field` column).

SPEC renders a placeholder whose path is not in the row as "", so such a prompt is sent
without complaint; counting them per (task, model) makes a misspelt or half-present field
visible in `RunResult.metrics`. The count is a view over what the store holds — each sample's
dataset row (after preprocessing, as it was rendered) and the task's templates in the stored
manifest — so it needs no extra column and reads the same for every run ever stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["missing_field_counts"]

_SPECIAL = frozenset({"row", "choices", "choice_list"})


def missing_field_counts(frame: pd.DataFrame, manifest: Mapping[str, Any] | None) -> dict[tuple[str, str], int]:
    """(task_id, model) -> samples whose prompt or target template had a field not in their row."""
    from evalnb.suite.templates import missing_fields, template_fields

    counts: dict[tuple[str, str], int] = {}
    tasks = {t.get("id"): t for t in (manifest or {}).get("tasks") or [] if isinstance(t, Mapping)}
    if not tasks or frame.empty:
        return counts
    checks: dict[str, Any] = {}
    for task_id, task in tasks.items():
        templates = [task.get("prompt_template") or "", task.get("target_template") or ""]
        choices = task.get("choices")
        paths = [p for t in templates for p in template_fields(t)]
        if all("." not in p and p not in _SPECIAL for p in paths):
            # plain top-level fields (the usual case): a key lookup per field, no rendering
            checks[task_id] = (lambda row, names=tuple(dict.fromkeys(paths)): any(n not in row for n in names))
        else:
            checks[task_id] = (lambda row, ts=templates, cs=choices: any(missing_fields(t, row, cs) for t in ts))
    seen: dict[tuple[str, int], bool] = {}  # every model of an item shares its row
    for task_id, model, index, row in zip(frame["task_id"], frame["model"], frame["sample_index"], frame["dataset_row"]):
        check = checks.get(task_id)
        if check is None or not isinstance(row, Mapping):
            continue
        key = (task_id, index)
        missing = seen.get(key)
        if missing is None:
            missing = seen[key] = check(row)
        if missing:
            counts[(task_id, model)] = counts.get((task_id, model), 0) + 1
    return counts
