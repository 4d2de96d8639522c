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
from collections.abc import Collection, Hashable, Mapping
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


def diff_scores(
    scores: pd.DataFrame,
    baseline: pd.DataFrame,
    *,
    confidence: float = 0.95,
    clusters: Mapping[tuple[str, int], Hashable] | None = None,
    unclustered: Collection[str] = (),
) -> pd.DataFrame:
    """One row per (task_id, model, metric) in both frames: ``scores`` minus ``baseline``.

    Items pair by (task_id, model, sample_index) and count when both have a value.
    ``stderr`` = SD (ddof 1) of the per-item differences / √n_pairs, the interval
    ``mean_diff ± t_{n-1} · stderr``; with ``clusters`` ((task_id, sample_index) -> cluster)
    the stderr is the CR1 one over the differences, the interval uses t_{G-1} and a column
    ``n_clusters`` is added; tasks in ``unclustered`` keep the ordinary errors (``n_clusters``
    <NA>). ``mde = (z_0.975 + z_0.80) · stderr``.
    """
    import pandas as pd

    from evalnb.results.pairing import pair_items
    from evalnb.results.power import power_factor

    stats.check_confidence(confidence)
    for frame, name in ((scores, "scores"), (baseline, "baseline scores")):
        require_columns(frame, SCORE_COLUMNS, name)
    here, before = _item_arrays(scores, "scores"), _item_arrays(baseline, "baseline scores")
    common = [k for k in here if k in before]  # this run's order of appearance
    if not common:
        mine = sorted({(t, m) for t, m, _ in here})
        theirs = sorted({(t, m) for t, m, _ in before})
        raise ValueError(
            f"the two runs share no (task, model, metric): this run has (task, model) {mine}, "
            f"the baseline {theirs}; diff pairs items of the same task and model label"
        )
    factor = power_factor()
    rows = []
    for key in common:
        pairs = pair_items(*here[key], *before[key])  # a = this run, b = the baseline
        clustered = clusters is not None and key[0] not in unclustered
        labels = [clusters.get((key[0], k)) for k in pairs.keys.tolist()] if clustered else None
        row: dict[str, Any] = dict(zip(_KEYS, key))
        row.update(_diff_row(pairs, confidence, factor, labels, key))
        if clusters is not None and not clustered:
            row["n_clusters"] = None
        rows.append(row)
    columns = list(DIFF_COLUMNS) + (["n_clusters"] if clusters is not None else [])
    table = pd.DataFrame.from_records(rows, columns=columns)
    for column in ("n_fixed", "n_broken", *(["n_clusters"] if clusters is not None else [])):
        table[column] = table[column].astype("Int64")
    return table.astype({"n_pairs": "int64"})


def _item_arrays(scores: pd.DataFrame, name: str) -> dict[tuple[str, str, str], tuple[Any, Any]]:
    """(task, model, metric) -> (sorted sample_index array, value array) of the scored items, in
    order of first appearance; split once (`pairing.group_items`). A key twice is an error."""
    from evalnb.results.comparison import check_unique
    from evalnb.results.pairing import code_scores, group_items

    groups = group_items(code_scores(scores))
    if groups.duplicated:
        check_unique(scores, ("task_id", "model", "metric", "sample_index"), name)
    return {(task, model, metric): arrays for (task, metric, model), arrays in groups.items.items()}


def _diff_row(pairs: Any, confidence: float, factor: float, labels: list[Hashable] | None,
              key: tuple[str, str, str]) -> dict[str, Any]:
    from evalnb.results.pairing import paired_statistics

    nan = math.nan
    n = len(pairs.keys)
    row: dict[str, Any] = {"n_pairs": n, "mean_baseline": nan, "mean": nan, "mean_diff": nan, "stderr": nan,
                           "ci_low": nan, "ci_high": nan, "n_fixed": 0, "n_broken": 0, "mcnemar_p": nan, "mde": nan}
    if labels is not None:
        row["n_clusters"] = len(set(labels))
    if n == 0:
        return row
    found = paired_statistics(pairs, n_resamples=None, confidence=confidence)
    after, before = pairs.a, pairs.b
    row.update(mean_baseline=found["mean_b"], mean=found["mean_a"], mean_diff=found["mean_diff"],
               stderr=found["stderr"], ci_low=found["ci_low"], ci_high=found["ci_high"],
               mcnemar_p=found["mcnemar_p"],  # McNemar(n01 = broken, n10 = fixed), 0/1 metrics only
               n_fixed=int(((before == 0.0) & (after == 1.0)).sum()),
               n_broken=int(((before == 1.0) & (after == 0.0)).sum()))
    if labels is not None:
        if None in labels:
            raise ValueError(f"task {key[0]!r}: {labels.count(None)} paired item(s) have no cluster")
        if len(set(labels)) < 2:
            raise ValueError(f"task {key[0]!r}, model {key[1]!r}, metric {key[2]!r}: all {n} paired items are in "
                             f"one cluster ({labels[0]!r}); clustered errors need at least 2 clusters")
        from evalnb.results.cluster_robust import clustered_stderr

        diffs = (after - before).tolist()
        mean = math.fsum(diffs) / n
        stderr = clustered_stderr(diffs, labels)
        half = stats.t_quantile(0.5 + confidence / 2, len(set(labels)) - 1) * stderr
        row.update(mean_diff=mean, stderr=stderr, ci_low=mean - half, ci_high=mean + half)
    row["mde"] = _nan(None if math.isnan(row["stderr"]) else factor * row["stderr"])
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
