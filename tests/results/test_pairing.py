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
from evalnb.results.comparison import paired
from evalnb.results.pairing import item_arrays, pair_items, paired_statistics


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
