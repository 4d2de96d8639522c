"""Pairing two sets of per-item scores once, as numpy arrays: what `paired`, `paired_all` and `diff` share.

Each comparison used to pair the same items three or four times in pure Python (for the mean,
the bootstrap, McNemar); at 200k items that was seconds per pair. Here the items are matched
once (`pair_items`: sorted common keys, values present on both sides) and every statistic is
computed from the two aligned arrays (`paired_statistics`). The numbers are those of
`evalnb.results.stats` on the same pairs: the same means and stderr (fsum over the same
values in the same key order), the exact McNemar p, and the bootstrap of `stats.bootstrap_means`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

from evalnb.results import stats

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pandas as pd

__all__ = ["Pairs", "item_arrays", "pair_items", "paired_statistics"]


class Pairs(NamedTuple):
    """Items scored on both sides, sorted by key: ``keys``, ``a`` and ``b`` are aligned arrays."""

    keys: np.ndarray
    a: np.ndarray
    b: np.ndarray


def item_arrays(part: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(sample_index, value) of the scored rows of a scores frame (NaN = not scored, dropped)."""
    import numpy as np

    values = part["value"].to_numpy(dtype=float)
    present = ~np.isnan(values)
    return part["sample_index"].to_numpy(dtype="int64")[present], values[present]


def pair_items(keys_a: np.ndarray, values_a: np.ndarray, keys_b: np.ndarray, values_b: np.ndarray) -> Pairs:
    """The items both sides scored, in key order (keys are unique per side; NaN already dropped)."""
    import numpy as np

    common, ia, ib = np.intersect1d(keys_a, keys_b, assume_unique=True, return_indices=True)
    return Pairs(common, values_a[ia], values_b[ib])


def concat(parts: list[Pairs]) -> Pairs:
    """Pairs of several tasks one after the other (the pooled row: keyed by (task, index), in order)."""
    import numpy as np

    if not parts:
        empty = np.array([], dtype=float)
        return Pairs(np.array([], dtype="int64"), empty, empty)
    return Pairs(*(np.concatenate([getattr(p, f) for p in parts]) for f in Pairs._fields))


def is_binary(values: np.ndarray) -> bool:
    return bool(((values == 0.0) | (values == 1.0)).all())


def paired_statistics(pairs: Pairs, *, n_resamples: int | None, seed: int = 0,
                      confidence: float = 0.95) -> dict[str, Any]:
    """n_pairs, mean_a, mean_b, mean_diff, stderr (t), bootstrap ci_low/ci_high and, when every
    value is 0 or 1, n01, n10 and the exact McNemar p. ``n_resamples=None``: the t interval.

    Empty pairs give n_pairs 0 and NaN; one pair gives its difference and no interval.
    """
    nan = math.nan
    n = int(pairs.a.size)
    row: dict[str, Any] = {"n_pairs": n, "mean_a": nan, "mean_b": nan, "mean_diff": nan, "ci_low": nan,
                           "ci_high": nan, "stderr": nan, "n01": None, "n10": None, "mcnemar_p": nan}
    if n == 0:
        return row
    diffs = pairs.a - pairs.b
    mean, sd = stats.mean_sd(diffs)
    stderr = None if sd is None else sd / math.sqrt(n)
    row.update(mean_a=math.fsum(pairs.a.tolist()) / n, mean_b=math.fsum(pairs.b.tolist()) / n, mean_diff=mean,
               stderr=_nan(stderr))
    if n_resamples is None:
        low, high = stats.t_interval(mean, stderr, n, confidence)
        row.update(ci_low=_nan(low), ci_high=_nan(high))
    elif n >= 2:
        row["ci_low"], row["ci_high"] = stats.bootstrap_interval(diffs, n_resamples, seed, confidence)
    if is_binary(pairs.a) and is_binary(pairs.b):
        n01 = int(((pairs.a == 0.0) & (pairs.b == 1.0)).sum())
        n10 = int(((pairs.a == 1.0) & (pairs.b == 0.0)).sum())
        row.update(n01=n01, n10=n10, mcnemar_p=stats.mcnemar_from_counts(n01, n10).p_value)
    return row


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)
