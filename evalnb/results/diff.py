"""`diff`: this run against a baseline run of the same tasks, item by item.

The question after a prompt edit or a new model version is "did it help, and how sure am I?".
Both runs answered the same items, so the answer is in the per-item differences: items fixed
(0 in the baseline, 1 now), items broken, their mean and its interval, McNemar's exact test
for 0/1 metrics, and the smallest true difference this many pairs could have detected (mde,
80% power at alpha = 0.05). Inputs are two long ``scores`` frames (one value per item: the
mean over its epochs); pandas is imported lazily.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

from evalnb.results import stats
from evalnb.results.comparison import SCORE_COLUMNS, require_columns

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["DIFF_COLUMNS", "changed_items", "diff_scores"]

DIFF_COLUMNS = (
    "task_id", "model", "metric", "n_pairs", "mean_baseline", "mean", "mean_diff", "stderr", "ci_low",
    "ci_high", "n_fixed", "n_broken", "mcnemar_p", "mde",
)
_KEYS = ["task_id", "model", "metric"]


def _item_values(scores: pd.DataFrame) -> dict[tuple[str, str, str], dict[int, float]]:
    """(task, model, metric) -> {sample_index: value} of the scored items."""
    out: dict[tuple[str, str, str], dict[int, float]] = {}
    present = scores[scores["value"].notna()]
    for (task, model, metric), part in present.groupby(["task_id", "model", "metric"], sort=False):
        out[(task, model, metric)] = dict(zip(part["sample_index"].tolist(), part["value"].astype(float).tolist()))
    return out


def _keys(scores: pd.DataFrame) -> list[tuple[str, str, str]]:
    """The (task_id, model, metric) of a scores frame, in order of appearance."""
    return list(scores[["task_id", "model", "metric"]].drop_duplicates().itertuples(index=False, name=None))


def diff_scores(
    scores: pd.DataFrame,
    baseline: pd.DataFrame,
    *,
    confidence: float = 0.95,
    clusters: Mapping[tuple[str, int], Hashable] | None = None,
) -> pd.DataFrame:
    """One row per (task_id, model, metric) in both frames: ``scores`` minus ``baseline``.

    Items pair by (task_id, model, sample_index) and count when both have a value.
    ``stderr`` = SD (ddof 1) of the per-item differences / √n_pairs, the interval
    ``mean_diff ± t_{n-1} · stderr``; with ``clusters`` ((task_id, sample_index) -> cluster)
    the stderr is the CR1 one over the differences, the interval uses t_{G-1} and a column
    ``n_clusters`` is added. ``mde = (z_0.975 + z_0.80) · stderr``.
    """
    import pandas as pd

    from evalnb.results.power import power_factor

    stats._check_confidence(confidence)
    for frame, name in ((scores, "scores"), (baseline, "baseline scores")):
        require_columns(frame, SCORE_COLUMNS, name)
    new, old = _item_values(scores), _item_values(baseline)
    order, theirs_keys = _keys(scores), set(_keys(baseline))
    common = [k for k in order if k in theirs_keys]
    if not common:
        mine = sorted({(t, m) for t, m, _ in order})
        theirs = sorted({(t, m) for t, m, _ in theirs_keys})
        raise ValueError(
            f"the two runs share no (task, model, metric): this run has (task, model) {mine}, "
            f"the baseline {theirs}; diff pairs items of the same task and model label"
        )
    factor = power_factor()
    rows = []
    for key in common:
        here, before = new.get(key, {}), old.get(key, {})
        pairs = sorted(i for i in here if i in before)
        row: dict[str, Any] = dict(zip(_KEYS, key))
        row.update(_diff_row([before[i] for i in pairs], [here[i] for i in pairs], confidence, factor,
                             None if clusters is None else [clusters.get((key[0], i)) for i in pairs], key))
        rows.append(row)
    columns = list(DIFF_COLUMNS) + (["n_clusters"] if clusters is not None else [])
    table = pd.DataFrame.from_records(rows, columns=columns)
    for column in ("n_fixed", "n_broken", *(["n_clusters"] if clusters is not None else [])):
        table[column] = table[column].astype("Int64")
    return table.astype({"n_pairs": "int64"})


def _diff_row(before: list[float], after: list[float], confidence: float, factor: float,
              labels: list[Hashable] | None, key: tuple[str, str, str]) -> dict[str, Any]:
    nan = math.nan
    n = len(before)
    row: dict[str, Any] = {"n_pairs": n, "mean_baseline": nan, "mean": nan, "mean_diff": nan, "stderr": nan,
                           "ci_low": nan, "ci_high": nan, "n_fixed": 0, "n_broken": 0, "mcnemar_p": nan, "mde": nan}
    if labels is not None:
        row["n_clusters"] = len(set(labels))
    if n == 0:
        return row
    diffs = [a - b for a, b in zip(after, before)]
    row.update(mean_baseline=math.fsum(before) / n, mean=math.fsum(after) / n,
               n_fixed=sum(b == 0.0 and a == 1.0 for a, b in zip(after, before)),
               n_broken=sum(b == 1.0 and a == 0.0 for a, b in zip(after, before)))
    if labels is None:
        mean, sd = stats._mean_sd(diffs)
        stderr = None if sd is None else sd / math.sqrt(n)
        low, high = stats._t_interval(mean, stderr, n, confidence)
    else:
        if None in labels:
            task = key[0]
            missing = [i for i, label in enumerate(labels) if label is None]
            raise ValueError(f"task {task!r}: {len(missing)} paired item(s) have no cluster")
        if len(set(labels)) < 2:
            raise ValueError(f"task {key[0]!r}, model {key[1]!r}, metric {key[2]!r}: all {n} paired items are in "
                             f"one cluster ({labels[0]!r}); clustered errors need at least 2 clusters")
        from evalnb.results.clustered import clustered_stderr

        mean = math.fsum(diffs) / n
        stderr = clustered_stderr(diffs, labels)
        half = stats.t_quantile(0.5 + confidence / 2, len(set(labels)) - 1) * stderr
        low, high = mean - half, mean + half
    row.update(mean_diff=mean, stderr=_nan(stderr), ci_low=_nan(low), ci_high=_nan(high),
               mde=_nan(None if stderr is None else factor * stderr))
    if all(v in (0.0, 1.0) for v in before + after):
        row["mcnemar_p"] = stats.mcnemar_from_counts(row["n_broken"], row["n_fixed"]).p_value
    return row


def changed_items(scores: pd.DataFrame, baseline: pd.DataFrame) -> set[tuple[str, int]]:
    """(task_id, sample_index) of the items whose score changed, for any (task, model, metric)
    both runs have; an item scored in one run and not in the other counts as changed."""
    new, old = _item_values(scores), _item_values(baseline)
    changed: set[tuple[str, int]] = set()
    for key in set(new) & set(old):
        here, before = new.get(key, {}), old.get(key, {})
        for index in set(here) | set(before):
            if here.get(index) != before.get(index):
                changed.add((key[0], index))
    return changed


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)
