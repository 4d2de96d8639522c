"""CR1 clustered errors, Holm, pass@k and t tails against statsmodels / scipy / hand computation."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from evalnb.results.cluster_robust import clustered_stderr, clustered_summary
from evalnb.results.stats import holm, pass_at_k, summarize, t_two_sided_p


def _statsmodels_cluster_se(values, groups):
    """The mean's cluster-robust SE from OLS on a constant (CR1: G/(G-1) * (n-1)/(n-k), k = 1)."""
    y = np.asarray(values, dtype=float)
    codes = {g: i for i, g in enumerate(dict.fromkeys(groups))}
    fit = sm.OLS(y, np.ones((len(y), 1))).fit(cov_type="cluster",
                                             cov_kwds={"groups": np.array([codes[g] for g in groups])})
    return float(fit.bse[0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cr1_equals_statsmodels_cluster_robust_se(seed):
    rng = random.Random(seed)
    groups = [g for g in range(15) for _ in range(rng.randint(1, 4))]
    values = [float(rng.random() < 0.6) for _ in groups]
    assert clustered_stderr(values, groups) == pytest.approx(_statsmodels_cluster_se(values, groups), rel=1e-10)


def test_cr1_is_the_issue_formula_by_hand():
    values = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]
    groups = ["a", "a", "b", "b", "b", "c", "c"]
    n, g, mean = 7, 3, 4 / 7
    sums = {k: sum(v - mean for v, gg in zip(values, groups) if gg == k) for k in "abc"}
    expected = math.sqrt(g / (g - 1) * sum(s * s for s in sums.values())) / n
    assert clustered_stderr(values, groups) == pytest.approx(expected, rel=1e-12)


def test_one_item_per_cluster_is_the_ordinary_stderr():
    rng = random.Random(3)
    values = [rng.uniform(0, 1) for _ in range(30)]
    ordinary = summarize(values)
    clustered = clustered_summary(values, list(range(30)))
    assert clustered.n_clusters == 30
    assert clustered.stderr == pytest.approx(ordinary.stderr, rel=1e-12)
    assert (clustered.ci_low, clustered.ci_high) == pytest.approx((ordinary.ci_low, ordinary.ci_high), rel=1e-12)


def test_clustered_interval_uses_t_with_clusters_minus_one_df():
    rng = random.Random(4)
    groups = [g for g in range(6) for _ in range(5)]
    values = [rng.uniform(0.2, 0.9) for _ in groups]  # inside [0, 1], far from the edges: no clipping
    s = clustered_summary(values, groups, confidence=0.9)
    half = sps.t.ppf(0.95, df=5) * s.stderr
    assert (s.ci_low, s.ci_high) == pytest.approx((s.mean - half, s.mean + half), rel=1e-10)
    assert s.n == 30 and s.n_clusters == 6


def test_correlated_clusters_widen_the_error():
    # every cluster is all-right or all-wrong: 10 clusters of 4 carry the information of 10 items
    values = [float(g % 2) for g in range(10) for _ in range(4)]
    groups = [g for g in range(10) for _ in range(4)]
    assert clustered_summary(values, groups).stderr > 1.8 * summarize(values).stderr


def test_missing_values_drop_with_their_cluster_and_empty_is_empty():
    s = clustered_summary([1.0, None, math.nan, 0.0, 1.0], ["a", "b", "b", "c", "c"])
    assert (s.n, s.n_clusters) == (3, 2)
    assert s.stderr == pytest.approx(clustered_stderr([1.0, 0.0, 1.0], ["a", "c", "c"]))
    assert clustered_summary([None], ["a"]).n == 0


def test_clustered_bad_input():
    with pytest.raises(ValueError, match="at least 2 clusters, got 1"):
        clustered_summary([1.0, 0.0, 1.0], ["x", "x", "x"])
    with pytest.raises(ValueError, match="same length"):
        clustered_summary([1.0, 0.0], ["x"])
    with pytest.raises(ValueError, match="no cluster"):
        clustered_summary([1.0, 0.0], ["x", None])
    with pytest.raises(ValueError, match="confidence"):
        clustered_summary([1.0, 0.0], ["x", "y"], confidence=1.5)


# ------------------------------------------------------------------ Holm


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_holm_equals_statsmodels(seed):
    rng = random.Random(seed)
    p = [rng.random() ** 3 for _ in range(rng.randint(1, 12))]
    expected = multipletests(p, method="holm")[1]
    assert holm(p) == pytest.approx(list(expected), rel=1e-12)


def test_holm_keeps_order_and_passes_missing_through():
    out = holm([0.04, None, 0.01, math.nan, 0.03])
    assert out[0] == pytest.approx(0.06) and out[2] == pytest.approx(0.03) and out[4] == pytest.approx(0.06)
    assert math.isnan(out[1]) and math.isnan(out[3])
    with pytest.raises(ValueError, match="between 0 and 1"):
        holm([1.5])


# ------------------------------------------------------------------ pass@k


def _pass_at_k_exact(n, c, k):
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


@pytest.mark.parametrize(("n", "c", "k"), [(10, 3, 1), (10, 3, 2), (10, 3, 8), (10, 0, 5), (5, 5, 5), (100, 7, 10),
                                           (200, 1, 100), (2, 1, 1)])
def test_pass_at_k_is_the_unbiased_estimator(n, c, k):
    assert pass_at_k(n, c, k) == pytest.approx(float(_pass_at_k_exact(n, c, k)), rel=1e-12, abs=1e-15)


def test_pass_at_1_is_the_fraction_correct_and_bad_input_is_refused():
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)
    for args in ((3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)):
        with pytest.raises(ValueError):
            pass_at_k(*args)


# ------------------------------------------------------------------ t tails


@pytest.mark.parametrize(("t", "df"), [(2.1, 5), (0.3, 1), (4.0, 2), (1.96, 1500), (-2.5, 12), (0.0, 7)])
def test_t_two_sided_p_matches_scipy(t, df):
    assert t_two_sided_p(t, df) == pytest.approx(2 * sps.t.sf(abs(t), df), rel=1e-8)
