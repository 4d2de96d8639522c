"""Pairing two sets of per-item scores once, as numpy arrays: what `paired`, `paired_all` and `diff` share.

Each comparison used to pair the same items three or four times in pure Python (for the mean,
the bootstrap, McNemar); at 200k items that was seconds per pair. Here the scores frame is
coded once (`code_scores`: its task, metric and model columns factorised to integers), its
rows are split into per-(task, metric, model) item arrays once (`group_items`: one stable sort,
keys sorted and checked unique), the items are matched once (`pair_items`) and every statistic
is computed from the two aligned arrays (`paired_statistics`). The numbers are those of
`evalnb.results.stats` on the same pairs: the same means and stderr (fsum over the same
values in the same key order, or the same exact sums from value counts when the values are
0/1), the exact McNemar p, and the interval of `stats.bootstrap_interval`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any, NamedTuple

from evalnb.results import stats

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pandas as pd

__all__ = ["CodedScores", "Pairs", "code_scores", "group_items", "item_arrays", "pair_items", "paired_statistics"]


class Pairs(NamedTuple):
    """Items scored on both sides, sorted by key: ``keys``, ``a`` and ``b`` are aligned arrays."""

    keys: np.ndarray
    a: np.ndarray
    b: np.ndarray


class CodedScores(NamedTuple):
    """A scores frame's columns as arrays: ``task``/``metric``/``model`` are codes into the name
    lists (-1 = missing), ``index`` the sample_index, ``value`` the float value (NaN = not scored)."""

    tasks: list[Any]
    metrics: list[Any]
    models: list[Any]
    task: np.ndarray
    metric: np.ndarray
    model: np.ndarray
    index: np.ndarray
    value: np.ndarray


def codes(series: pd.Series) -> tuple[np.ndarray, list[Any]]:
    """(integer code per row, names by code) of one column; missing values get -1."""
    import pandas as pd

    found, names = pd.factorize(series)
    return found.astype("int64", copy=False), list(names)


def code_scores(frame: pd.DataFrame) -> CodedScores:
    """The columns `paired` and `diff` read, factorised once (the string columns are compared
    as small integers from here on instead of string by string)."""
    task, tasks = codes(frame["task_id"])
    metric, metrics = codes(frame["metric"])
    model, models = codes(frame["model"])
    return CodedScores(tasks, metrics, models, task, metric, model,
                       frame["sample_index"].to_numpy(dtype="int64"), frame["value"].to_numpy(dtype=float))


class ItemGroups(NamedTuple):
    """``items[(task, metric, model)] = (keys, values)``: the scored items of each group, keys
    sorted (groups in order of first appearance); ``duplicated``: groups with a key twice."""

    items: dict[tuple[Any, Any, Any], tuple[np.ndarray, np.ndarray]]
    duplicated: set[tuple[Any, Any, Any]]


def group_items(coded: CodedScores, rows: np.ndarray | None = None) -> ItemGroups:
    """Split the rows (a boolean mask; None = all) into per-(task, metric, model) item arrays.

    One stable sort of the group codes; within a group the keys keep the frame's order, so a
    frame already in sample_index order is not sorted again. NaN values are dropped after the
    duplicate check (a key twice is a duplicate whether or not it is scored).
    """
    import numpy as np

    valid = (coded.task >= 0) & (coded.metric >= 0) & (coded.model >= 0)
    if rows is not None:
        valid &= rows
    chosen = np.flatnonzero(valid)
    n_metrics, n_models = max(len(coded.metrics), 1), max(len(coded.models), 1)
    group = (coded.task[chosen] * n_metrics + coded.metric[chosen]) * n_models + coded.model[chosen]
    order = np.argsort(group, kind="stable")
    chosen, group = chosen[order], group[order]
    starts = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1]))) if group.size else group[:0]
    ends = np.append(starts[1:], group.size)
    found: list[tuple[int, tuple[Any, Any, Any], tuple[np.ndarray, np.ndarray]]] = []
    duplicated: set[tuple[Any, Any, Any]] = set()
    for start, end in zip(starts.tolist(), ends.tolist()):
        at = chosen[start:end]
        first = int(at[0])
        key = (coded.tasks[coded.task[first]], coded.metrics[coded.metric[first]], coded.models[coded.model[first]])
        keys, values = coded.index[at], coded.value[at]
        if keys.size > 1 and not bool((keys[1:] > keys[:-1]).all()):
            by_key = np.argsort(keys, kind="stable")
            keys, values = keys[by_key], values[by_key]
            if bool((keys[1:] == keys[:-1]).any()):
                duplicated.add(key)
        present = ~np.isnan(values)
        if not present.all():
            keys, values = keys[present], values[present]
        found.append((first, key, (keys, values)))
    found.sort(key=lambda entry: entry[0])
    return ItemGroups({key: arrays for _, key, arrays in found}, duplicated)


def item_arrays(part: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(sample_index, value) of the scored rows of a scores frame (NaN = not scored, dropped)."""
    import numpy as np

    values = part["value"].to_numpy(dtype=float)
    present = ~np.isnan(values)
    return part["sample_index"].to_numpy(dtype="int64")[present], values[present]


def pair_items(keys_a: np.ndarray, values_a: np.ndarray, keys_b: np.ndarray, values_b: np.ndarray) -> Pairs:
    """The items both sides scored, in key order (keys are unique per side; NaN already dropped)."""
    import numpy as np

    if keys_a.size == keys_b.size and np.array_equal(keys_a, keys_b) and (
            keys_a.size < 2 or bool((keys_a[1:] > keys_a[:-1]).all())):
        return Pairs(keys_a, values_a, values_b)  # the same items in key order: nothing to match
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

    Empty pairs give n_pairs 0 and NaN; one pair gives its difference and no interval. With 0/1
    values the sums are counts, so the means and the SD come from three counts (the same
    correctly rounded numbers the fsum over every value gives) instead of passes over the items.
    """
    import numpy as np

    nan = math.nan
    n = int(pairs.a.size)
    row: dict[str, Any] = {"n_pairs": n, "mean_a": nan, "mean_b": nan, "mean_diff": nan, "ci_low": nan,
                           "ci_high": nan, "stderr": nan, "n01": None, "n10": None, "mcnemar_p": nan}
    if n == 0:
        return row
    diffs = pairs.a - pairs.b
    binary = is_binary(pairs.a) and is_binary(pairs.b)
    if binary:
        n01 = int(np.count_nonzero(diffs == -1.0))
        n10 = int(np.count_nonzero(diffs == 1.0))
        mean_a, mean_b = int(np.count_nonzero(pairs.a)) / n, int(np.count_nonzero(pairs.b)) / n
        mean, sd = mean_sd_counted(np.array([-1.0, 0.0, 1.0]), [n01, n - n01 - n10, n10])
    else:
        mean_a, mean_b = math.fsum(pairs.a.tolist()) / n, math.fsum(pairs.b.tolist()) / n
        mean, sd = stats.mean_sd(diffs)
    stderr = None if sd is None else sd / math.sqrt(n)
    row.update(mean_a=mean_a, mean_b=mean_b, mean_diff=mean, stderr=_nan(stderr))
    if n_resamples is None:
        low, high = stats.t_interval(mean, stderr, n, confidence)
        row.update(ci_low=_nan(low), ci_high=_nan(high))
    elif n >= 2:
        row["ci_low"], row["ci_high"] = stats.bootstrap_interval(diffs, n_resamples, seed, confidence)
    if binary:
        row.update(n01=n01, n10=n10, mcnemar_p=stats.mcnemar_from_counts(n01, n10).p_value)
    return row


def mean_sd_counted(values: np.ndarray, counts: list[int]) -> tuple[float, float | None]:
    """`stats.mean_sd` of the items with ``counts[k]`` copies of ``values[k]``, in time per value.

    fsum returns the correctly rounded exact sum, and so does an exact rational sum rounded
    once: the same floats as `stats.mean_sd` on the expanded array, bit for bit.
    """
    kept = [k for k, c in enumerate(counts) if c]
    values, counts = values[kept], [counts[k] for k in kept]
    n = sum(counts)
    if len(kept) == 1:
        return float(values[0]), (None if n < 2 else 0.0)
    mean = float(sum(Fraction(v) * c for v, c in zip(values.tolist(), counts))) / n
    squares = ((values - mean) ** 2).tolist()  # the same element-wise floats as over the items
    total = float(sum(Fraction(s) * c for s, c in zip(squares, counts)))
    return mean, math.sqrt(total / (n - 1))


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)
