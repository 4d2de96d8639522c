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

__all__ = ["cluster_keys", "resolve"]

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


def cluster_keys(samples: pd.DataFrame, cluster_by: str) -> dict[tuple[str, int], Hashable]:
    """(task_id, sample_index) -> the item's cluster: the value of ``cluster_by`` in its dataset row.

    Every sample of an item carries the same row; the first one found is read. A row without
    the field, or with it null, is an error naming the task, the item and the fields the row has.
    """
    path = check_path(cluster_by)
    keys: dict[tuple[str, int], Hashable] = {}
    for task, index, row in zip(samples["task_id"].tolist(), samples["sample_index"].tolist(),
                                samples["dataset_row"].tolist()):
        key = (task, int(index))
        if key in keys:
            continue
        if not isinstance(row, Mapping):
            raise ValueError(f"task {task!r}, row {index}: no dataset row is stored, so it cannot be "
                             f"clustered by {path!r}")
        try:
            value = resolve(row, path)
        except KeyError as exc:
            have = ", ".join(map(str, row)) or "none"
            raise ValueError(f"task {task!r}, row {index}: cluster_by field {path!r} not found "
                             f"(no {str(exc.args[0])!r}); the row has: {have}") from None
        if value is None:
            raise ValueError(f"task {task!r}, row {index}: cluster_by field {path!r} is null")
        keys[key] = _label(value)
    return keys
