"""Which cluster each item belongs to: a field of its dataset row, read from the stored samples.

Clustering is a view over stored scores, not a new run (inspect_ai's ``stderr(cluster=...)``
does the same): the field comes from the untouched dataset row every sample keeps, by a
dotted path as in templates (``link``, ``meta.passage_id``, ``tags.0``).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["check_path", "cluster_keys", "clustered_only", "resolve"]

def resolve(row: Any, path: str) -> Any:
    """The value at dotted ``path`` in ``row``, looked up as templates do; KeyError names the
    first missing segment."""
    from evalnb.suite.templates import field_value

    return field_value(row, path)


def _label(value: Any) -> Hashable:
    """A cluster label: the value itself, or its JSON text when it is a dict or list."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def check_path(cluster_by: Any) -> str:
    if not isinstance(cluster_by, str) or not cluster_by or any(not s for s in cluster_by.split(".")):
        raise ValueError(f"cluster_by must be a dataset-row field name or dotted path (e.g. 'link'), got {cluster_by!r}")
    return cluster_by


def cluster_keys(samples: pd.DataFrame, cluster_by: str, keys: dict[tuple[str, int], Hashable] | None = None,
                 problems: dict[str, str] | None = None) -> tuple[dict[tuple[str, int], Hashable], dict[str, str]]:
    """(task_id, sample_index) -> the item's cluster (the value of ``cluster_by`` in its dataset
    row), and task -> why it cannot be clustered.

    Every sample of an item carries the same row; the first one found is read. A task with a
    row that lacks the field (or has it null, or has no stored row) cannot be clustered: its
    first such row is described in ``problems`` (naming the task, the item and the fields the
    row has) and its items get no label. ``keys``/``problems`` carry the result across pages.
    """
    path = check_path(cluster_by)
    keys = {} if keys is None else keys
    problems = {} if problems is None else problems
    for task, index, row in zip(samples["task_id"].tolist(), samples["sample_index"].tolist(),
                                samples["dataset_row"].tolist()):
        key = (task, int(index))
        if key in keys or task in problems:
            continue
        problem = None
        if not isinstance(row, Mapping):
            problem = f"task {task!r}, row {index}: no dataset row is stored, so it cannot be clustered by {path!r}"
        else:
            try:
                value = resolve(row, path)
            except KeyError as exc:
                have = ", ".join(map(str, row)) or "none"
                problem = (f"task {task!r}, row {index}: cluster_by field {path!r} not found "
                           f"(no {str(exc.args[0])!r}); the row has: {have}")
            else:
                if value is None:
                    problem = f"task {task!r}, row {index}: cluster_by field {path!r} is null"
        if problem is None:
            keys[key] = _label(value)
        else:
            problems[task] = problem
    return keys, problems


def clustered_only(keys: dict[tuple[str, int], Hashable], problems: Mapping[str, str]) -> dict[tuple[str, int], Hashable]:
    """``keys`` without the items of tasks that have a problem: a task is clustered whole or not at all."""
    return {k: v for k, v in keys.items() if k[0] not in problems} if problems else keys
