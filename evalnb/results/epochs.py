"""Items asked several times (epochs): reduce each item to one score before any statistic.

An item's K answers are not K independent items: they share the question. So every table
works on per-item scores, the mean over the item's scored epochs (Miller 2024, "reduce
within-question variance"), and ``n`` counts items. For 0/1 metrics the K answers also give
pass@k, the chance that at least one of k answers is right (the unbiased estimator of Chen
et al. 2021, `stats.pass_at_k`). pandas is passed in, never imported here.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from evalnb.results import stats

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["PASS_AT_K", "item_values", "pass_at_k_ks", "pass_at_k_means"]

PASS_AT_K = (1, 5, 10, 20, 50, 100)
"""The k of the ``pass_at_<k>`` columns (those up to the run's epochs, plus the epochs itself)."""


def pass_at_k_ks(epochs: int) -> list[int]:
    """The k reported for a run of ``epochs`` (none for a single epoch: pass@1 is the mean)."""
    if epochs < 2:
        return []
    return sorted({k for k in PASS_AT_K if k < epochs} | {epochs})


def item_values(done: pd.DataFrame, column: str, epochs: int) -> pd.Series:
    """Per-item scores of one (task, model): the column itself, or its mean over each item's epochs.

    ``done``: the completed samples; missing values (NaN) are left out of an item's mean, and an
    item with no value in any epoch stays NaN. Indexed by sample_index, in item order.
    """
    values = done[column]
    if epochs <= 1 and not done["sample_index"].duplicated().any():
        return values.set_axis(done["sample_index"].to_numpy())
    return values.groupby(done["sample_index"].to_numpy(), sort=True).mean()


def pass_at_k_means(done: pd.DataFrame, column: str, ks: list[int]) -> dict[int, float]:
    """Mean pass@k over items, for a 0/1 metric (NaN otherwise, or for a k no item reaches).

    An item counts for pass@k when at least k of its epochs were scored.
    """
    out = dict.fromkeys(ks, math.nan)
    if not ks:
        return out
    scored = done[["sample_index", column]].dropna()
    values = scored[column].to_numpy()
    if len(values) == 0 or not ((values == 0.0) | (values == 1.0)).all():
        return out
    per_item = scored.groupby("sample_index")[column].agg(["size", "sum"])
    counts: list[tuple[int, int]] = [(int(n), int(c)) for n, c in zip(per_item["size"], per_item["sum"])]
    for k in ks:
        reached = [stats.pass_at_k(n, c, k) for n, c in counts if n >= k]
        out[k] = math.fsum(reached) / len(reached) if reached else math.nan
    return out


def epoch_count(frame: Any, recorded: Any) -> int:
    """The run's epochs: as recorded, else one more than the highest epoch in the samples."""
    if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded >= 1:
        return recorded
    if len(frame) == 0:
        return 1
    return int(frame["epoch"].max()) + 1
