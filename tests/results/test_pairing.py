"""Items paired once, as arrays (`evalnb.results.pairing`): the same numbers as the per-item statistics.

`paired`, `paired_all` and `diff` used to pair items in Python for each statistic; now they
pair once. Point estimates, stderr and McNemar's p must be exactly what `evalnb.results.stats`
gives on the same dicts. The bootstrap of a 0/1 metric now draws the counts of the distinct
differences (a multinomial) instead of item indices: another random stream with the same
distribution, checked here against the item resampler over many seeds.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pandas as pd
import pytest

from evalnb.results import stats
from evalnb.results.bootstrap_limit import MIN_ITEMS, limit_interval
from evalnb.results.comparison import paired, paired_all
from evalnb.results.diff import diff_scores
from evalnb.results.pairing import (
    code_scores,
    group_items,
    item_arrays,
    mean_sd_counted,
    pair_items,
    paired_statistics,
)


def _scores(seed: int, n: int, binary: bool) -> pd.DataFrame:
    """Two models on n items of two tasks; some items unscored (NaN) or missing for one model."""
    rng = random.Random(seed)
    rows = []
    for task in ("t1", "t2"):
        for model, p in (("a", 0.7), ("b", 0.55)):
            for i in range(n):
                if rng.random() < 0.05:
                    continue  # this model never got the item
                value = float(rng.random() < p) if binary else round(rng.random(), 3)
                rows.append({"task_id": task, "model": model, "sample_index": i, "metric": "m",
                             "value": math.nan if rng.random() < 0.05 else value})
    frame = pd.DataFrame(rows)
    return frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)  # order must not matter


def _dict(scores: pd.DataFrame, task: str, model: str) -> dict[int, float]:
    part = scores[(scores.task_id == task) & (scores.model == model)]
    return dict(zip(part.sample_index.tolist(), part.value.tolist()))


@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paired_numbers_are_exactly_the_per_item_statistics(seed, binary):
    scores = _scores(seed, 300, binary)
    table = paired(scores, "a", "b", n_resamples=300, seed=seed).set_index("task_id")
    for task in ("t1", "t2"):
        a, b = _dict(scores, task, "a"), _dict(scores, task, "b")
        keys = sorted(k for k in a if k in b and a[k] == a[k] and b[k] == b[k])
        t = stats.paired_difference(a, b)
        row = table.loc[task]
        assert row.n_pairs == t.n == len(keys)
        assert row.mean_diff == t.mean_diff  # exact: the same fsum over the same values
        assert row.stderr == t.stderr
        assert row.mean_a == math.fsum(a[k] for k in keys) / len(keys)
        assert row.mean_b == math.fsum(b[k] for k in keys) / len(keys)
        assert (row.ci_low, row.ci_high) == tuple(stats.paired_bootstrap(a, b, n_resamples=300, seed=seed)[1:])
        if binary:
            test = stats.mcnemar_exact(a, b)
            assert (row.n01, row.n10, row.mcnemar_p) == (test.n01, test.n10, test.p_value)
        else:
            assert row.n01 is pd.NA and math.isnan(row.mcnemar_p)


def _old_item_bootstrap(diffs: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """The resampler before issue 20 (item indices; kept here to compare the new one against)."""
    rng = np.random.default_rng(seed)
    n = diffs.size
    return diffs[rng.integers(0, n, size=(n_resamples, n))].mean(axis=1)


def test_the_multinomial_bootstrap_has_the_item_bootstraps_distribution():
    rng = np.random.default_rng(123)
    a = (rng.random(400) < 0.7).astype(float)
    b = (rng.random(400) < 0.6).astype(float)
    diffs = a - b
    # 1) the resample means: same distribution (quantiles of 40k draws agree to sampling error)
    new = np.concatenate([stats.bootstrap_means(diffs, 2000, seed) for seed in range(20)])
    old = np.concatenate([_old_item_bootstrap(diffs, 2000, seed) for seed in range(20)])
    sd = diffs.std(ddof=0) / math.sqrt(diffs.size)
    assert new.mean() == pytest.approx(diffs.mean(), abs=0.02 * sd)
    assert new.std() == pytest.approx(old.std(), rel=0.02)
    for q in (0.025, 0.25, 0.5, 0.75, 0.975):
        assert np.quantile(new, q) == pytest.approx(np.quantile(old, q), abs=0.05 * sd)
    # 2) the interval endpoints over many seeds: same mean, same spread
    lows_new, lows_old = [], []
    for seed in range(200):
        lows_new.append(stats.bootstrap_interval(diffs, 1000, seed)[0])
        means = np.sort(_old_item_bootstrap(diffs, 1000, seed))
        lows_old.append(float(np.quantile(means, 0.025)))
    assert np.mean(lows_new) == pytest.approx(np.mean(lows_old), abs=0.03 * sd)
    assert np.std(lows_new) == pytest.approx(np.std(lows_old), rel=0.25)
    # 3) and the counts are what a resample is: every mean is (k_plus - k_minus) / n
    assert np.allclose(new * diffs.size, np.round(new * diffs.size))


def test_many_distinct_differences_keep_the_item_resampler_stream():
    rng = np.random.default_rng(5)
    diffs = rng.normal(size=500)  # 500 distinct values: item indices, as before issue 20
    assert np.array_equal(stats.bootstrap_means(diffs, 300, 9), _old_item_bootstrap(diffs, 300, 9))


def test_swapping_the_models_mirrors_the_interval_exactly():
    scores = _scores(7, 500, True)
    ab = paired(scores, "a", "b", seed=4).set_index("task_id")
    ba = paired(scores, "b", "a", seed=4).set_index("task_id")
    assert list(ab.ci_low) == list(-ba.ci_high) and list(ab.ci_high) == list(-ba.ci_low)


def test_pair_items_matches_on_keys_in_key_order():
    keys_a, values_a = item_arrays(pd.DataFrame({"sample_index": [5, 1, 3, 9], "value": [1.0, 0.0, math.nan, 1.0]}))
    keys_b, values_b = item_arrays(pd.DataFrame({"sample_index": [3, 9, 5, 2], "value": [1.0, 0.0, 0.0, 1.0]}))
    pairs = pair_items(keys_a, values_a, keys_b, values_b)
    assert pairs.keys.tolist() == [5, 9] and pairs.a.tolist() == [1.0, 1.0] and pairs.b.tolist() == [0.0, 0.0]
    row = paired_statistics(pairs, n_resamples=100)
    assert (row["n_pairs"], row["mean_diff"], row["n10"], row["n01"]) == (2, 1.0, 2, 0)
    assert row["mcnemar_p"] == stats.mcnemar_from_counts(0, 2).p_value
    assert paired_statistics(pair_items(keys_a[:0], values_a[:0], keys_b, values_b), n_resamples=10)["n_pairs"] == 0


def test_bad_resample_counts_are_refused_before_any_work():
    scores = _scores(0, 20, True)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="n_resamples must be a positive integer"):
            paired(scores, "a", "b", n_resamples=bad)


# ------------------------------------------------------------------ issue 20: the fast paths


def test_counted_mean_and_sd_are_bit_for_bit_the_fsum_ones():
    rng = np.random.default_rng(11)
    for n, values in ((50_000, [-1.0, 0.0, 1.0]), (7, [-1.0, 1.0]), (1_001, [0.1, 0.25, 1 / 3, 7.5])):
        data = rng.choice(values, size=n, p=None)
        distinct = np.array(values)
        counts = [int(np.count_nonzero(data == v)) for v in values]
        assert mean_sd_counted(distinct, counts) == stats.mean_sd(data)
    assert mean_sd_counted(np.array([-1.0, 0.0, 1.0]), [0, 5, 0]) == stats.mean_sd(np.zeros(5)) == (0.0, 0.0)
    assert mean_sd_counted(np.array([-1.0, 0.0, 1.0]), [0, 0, 1]) == (1.0, None)


def test_a_large_binary_pair_has_the_per_item_numbers():
    rng = np.random.default_rng(3)
    n = 30_000
    a, b = (rng.random(n) < 0.7).astype(float), (rng.random(n) < 0.66).astype(float)
    row = paired_statistics(pair_items(np.arange(n), a, np.arange(n), b), n_resamples=500, seed=2)
    t = stats.paired_difference(a.tolist(), b.tolist())
    assert (row["mean_diff"], row["stderr"]) == (t.mean_diff, t.stderr)
    assert row["mean_a"] == math.fsum(a.tolist()) / n and row["mean_b"] == math.fsum(b.tolist()) / n
    means = np.sort(_old_categories_bootstrap(a - b, 500, 2))
    alpha = 1.0 - 0.95
    assert (row["ci_low"], row["ci_high"]) == (_linear(means, alpha / 2), _linear(means, 1 - alpha / 2))
    assert (row["n01"], row["n10"]) == (int(((a == 0) & (b == 1)).sum()), int(((a == 1) & (b == 0)).sum()))


def _old_categories_bootstrap(diffs: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """The multinomial resampler as first written (categories from np.unique), to pin its stream."""
    rng = np.random.default_rng(seed)
    values, first, counts = np.unique(diffs, return_index=True, return_counts=True)
    order = np.argsort(first)
    return rng.multinomial(diffs.size, counts[order] / diffs.size, size=n_resamples) @ values[order] / diffs.size


def _drawn_interval(diffs: np.ndarray, n_resamples: int, seed: int) -> tuple[float, float]:
    """The percentile interval of the item resampler (linear interpolation, as numpy's default)."""
    means = np.sort(_old_item_bootstrap(diffs, n_resamples, seed))
    alpha = 1.0 - 0.95  # 0.05000000000000004, as the code computes it
    return _linear(means, alpha / 2), _linear(means, 1 - alpha / 2)


def _linear(ordered: np.ndarray, q: float) -> float:
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (pos - low))


def test_below_ten_thousand_items_a_float_interval_is_the_seeded_resampling():
    diffs = np.random.default_rng(8).random(MIN_ITEMS - 1) - 0.5
    assert stats.bootstrap_interval(diffs, 40, 6) == _drawn_interval(diffs, 40, 6)


@pytest.mark.parametrize("kind", ["uniform", "skewed"])
def test_the_limit_interval_agrees_with_the_full_bootstrap_within_its_monte_carlo_error(kind):
    rng = np.random.default_rng(21)
    n = MIN_ITEMS
    if kind == "uniform":  # an f1-like score difference
        diffs = rng.random(n) - rng.random(n)
    else:  # lognormal: the resampled mean's skewness is 0.089, near the limit's bound (0.1)
        diffs = rng.lognormal(0.0, 1.3, n)
    limit = stats.bootstrap_interval(diffs, 2000, 0)
    assert limit == limit_interval(diffs, 0.95)  # the limit is what is reported
    assert limit == stats.bootstrap_interval(diffs, 50, 99)  # and so it depends on neither
    drawn = np.array([_drawn_interval(diffs, 2000, seed) for seed in range(6)])
    sd = diffs.std() / math.sqrt(n)  # the SD of the resampled mean
    # one 2,000-resample endpoint has a Monte-Carlo SD of about 0.06 sd; six of them 0.025 sd
    assert abs(limit[0] - drawn[:, 0].mean()) < 0.08 * sd
    assert abs(limit[1] - drawn[:, 1].mean()) < 0.08 * sd
    centre = math.fsum(diffs.tolist()) / n
    if kind == "skewed":  # the percentile interval leans right like the resampled means do
        lean = (limit[1] - centre) - (centre - limit[0])  # Cornish-Fisher: 2 (z^2 - 1) skew / 6 sd
        assert lean > 0.06 * sd
        assert (drawn[:, 1].mean() - centre) - (centre - drawn[:, 0].mean()) == pytest.approx(lean, abs=0.05 * sd)


def test_an_outlier_keeps_the_resampling():
    diffs = np.random.default_rng(4).random(20_000) - 0.5
    diffs[17] = 5_000.0  # the resampled mean is far from normal: it counts how often item 17 came up
    assert limit_interval(diffs, 0.95) is None
    assert stats.bootstrap_interval(diffs, 30, 1) == _drawn_interval(diffs, 30, 1)


def test_paired_and_paired_all_use_the_limit_on_a_big_float_task():
    rng = np.random.default_rng(9)
    n = 12_000
    frame = pd.concat([pd.DataFrame({"task_id": "qa", "model": m, "sample_index": np.arange(n), "metric": "f1",
                                     "value": rng.random(n)}) for m in ("a", "b", "c")], ignore_index=True)
    one = paired(frame, "a", "c", seed=1).iloc[0]
    values = {m: frame.loc[frame.model == m, "value"].to_numpy() for m in ("a", "b", "c")}
    assert (one.ci_low, one.ci_high) == limit_interval(values["a"] - values["c"], 0.95)
    every = paired_all(frame, ["a", "b", "c"], seed=1).set_index(["model_a", "model_b"])
    for x, y in (("a", "b"), ("a", "c"), ("b", "c")):
        alone = paired(frame, x, y, seed=1).iloc[0]
        row = every.loc[(x, y)]
        assert (row.mean_diff, row.stderr, row.ci_low, row.ci_high) == (
            alone.mean_diff, alone.stderr, alone.ci_low, alone.ci_high)


def test_group_items_sorts_checks_and_drops_unscored():
    frame = pd.DataFrame({"task_id": ["t", "t", "t", "u", "t", "t"], "model": ["a", "a", "b", "a", "a", "b"],
                          "sample_index": [3, 1, 1, 0, 2, 1], "metric": "m",
                          "value": [1.0, math.nan, 0.0, 1.0, 0.0, 1.0]})
    groups = group_items(code_scores(frame))
    assert list(groups.items) == [("t", "m", "a"), ("t", "m", "b"), ("u", "m", "a")]  # first appearance
    keys, values = groups.items[("t", "m", "a")]
    assert keys.tolist() == [2, 3] and values.tolist() == [0.0, 1.0]  # sorted; item 1 unscored
    assert groups.duplicated == {("t", "m", "b")}
    with pytest.raises(ValueError, match="scores frame has more than one row for .*'model': 'b'"):
        paired(frame, "a", "b")
    with pytest.raises(ValueError, match="baseline scores frame has more than one row"):
        diff_scores(frame[frame.model == "a"], frame)
