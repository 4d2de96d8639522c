"""evalnb.results.stats against textbook values and hand computations."""

from __future__ import annotations

import dataclasses
import math
import random
import sys
import time
from fractions import Fraction

import pytest

from evalnb.results.stats import (
    Bootstrap,
    Interval,
    McNemar,
    PairedSummary,
    Summary,
    mcnemar_exact,
    mcnemar_from_counts,
    paired_bootstrap,
    paired_difference,
    summarize,
    t_quantile,
    wilson_interval,
)

# ------------------------------------------------------------------ t quantiles


@pytest.mark.parametrize(
    ("df", "expected"),
    [
        (1, 12.7062),
        (2, 4.3027),
        (3, 3.1824),
        (4, 2.7764),
        (5, 2.5706),
        (10, 2.2281),
        (30, 2.0423),
        (100, 1.9840),
        (math.inf, 1.9600),
    ],
)
def test_t_quantile_matches_table(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        (0.975, 10, 2.228138851986),
        (0.975, 4, 2.776445105198),
        (0.995, 3, 5.840909309733),
        (0.9995, 1, 636.619248768),
        (0.9995, 3, 12.923978636688),
        (0.95, 20, 1.724718242920),
    ],
)
def test_t_quantile_high_precision(p, df, expected):
    assert t_quantile(p, df) == pytest.approx(expected, rel=1e-6)


def test_t_quantile_large_df_matches_nist_table():
    assert t_quantile(0.999, 1000) == pytest.approx(3.098, abs=5e-4)
    assert t_quantile(0.95, 10**6) == pytest.approx(1.644858, abs=1e-5)


def test_t_quantile_is_antisymmetric_and_zero_at_median():
    assert t_quantile(0.5, 7) == 0.0
    assert t_quantile(0.025, 7) == pytest.approx(-t_quantile(0.975, 7), rel=1e-12)


def test_t_quantile_fractional_df_lies_between_neighbours():
    assert t_quantile(0.975, 3) < t_quantile(0.975, 2.5) < t_quantile(0.975, 2)


def test_t_quantile_is_continuous_where_the_method_switches():
    # df < 1000 inverts the incomplete beta; df >= 1000 uses Cornish-Fisher.
    below, at = t_quantile(0.975, 999.999), t_quantile(0.975, 1000)
    assert below > at
    assert below - at < 1e-8


def test_t_quantile_decreases_towards_normal():
    values = [t_quantile(0.975, df) for df in (1, 2, 3, 5, 10, 50, 500, 5000, 10**6, math.inf)]
    assert values == sorted(values, reverse=True)


@pytest.mark.parametrize(("p", "df"), [(0.0, 5), (1.0, 5), (-0.1, 5), (0.9, 0), (0.9, -2)])
def test_t_quantile_rejects_bad_arguments(p, df):
    with pytest.raises(ValueError):
        t_quantile(p, df)


# ------------------------------------------------------------------ Wilson


def test_wilson_8_of_10():
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4)
    assert high == pytest.approx(0.9433, abs=1e-4)


def test_wilson_edges_stay_in_unit_interval():
    zero = wilson_interval(0, 10)
    assert zero.low == 0.0
    assert zero.high == pytest.approx(1.96**2 / (10 + 1.96**2), rel=1e-12)
    full = wilson_interval(10, 10)
    assert full.high == 1.0
    assert full.low == pytest.approx(10 / (10 + 1.96**2), rel=1e-12)
    one = wilson_interval(1, 1)
    assert 0.0 < one.low < 1.0 and one.high == 1.0


def test_wilson_returns_a_tuple_with_as_dict():
    result = wilson_interval(3, 4)
    assert isinstance(result, Interval)
    assert result.as_dict() == {"low": result[0], "high": result[1]}


@pytest.mark.parametrize(("s", "n", "z"), [(1, 0, 1.96), (-1, 5, 1.96), (6, 5, 1.96), (2, 5, 0.0)])
def test_wilson_rejects_bad_arguments(s, n, z):
    with pytest.raises(ValueError):
        wilson_interval(s, n, z=z)


# ------------------------------------------------------------------ summarize


def test_summarize_known_dataset_uses_t_interval():
    result = summarize([1, 2, 3, 4, 5])
    assert result.n == 5
    assert result.mean == 3.0
    assert result.stderr == pytest.approx(math.sqrt(2.5) / math.sqrt(5), rel=1e-12)
    half = 2.776445105198 * math.sqrt(0.5)
    assert result.ci_low == pytest.approx(3 - half, rel=1e-9)
    assert result.ci_high == pytest.approx(3 + half, rel=1e-9)
    assert result.interval == "t"


def test_summarize_excludes_none_and_nan():
    result = summarize([1.0, None, 3.0, float("nan")])
    assert result.n == 2
    assert result.mean == 2.0
    assert result.stderr == pytest.approx(1.0)


def test_summarize_binary_data_reports_wilson():
    values = [True] * 8 + [False] * 2
    result = summarize(values)
    assert result.interval == "wilson"
    assert result.mean == 0.8
    assert result.stderr == pytest.approx(math.sqrt(0.8 * 0.2 * 10 / 9) / math.sqrt(10))
    assert result.ci_low == pytest.approx(0.4902, abs=1e-3)
    assert result.ci_high == pytest.approx(0.9433, abs=1e-3)
    # 0/1 floats are binary too (what exact-match graders return)
    assert summarize([1.0] * 8 + [0.0] * 2) == result


def test_summarize_all_correct_small_sample_is_not_falsely_certain():
    result = summarize([1.0] * 10)
    assert result.stderr == 0.0
    assert result.ci_high == 1.0
    assert result.ci_low == pytest.approx(0.7225, abs=1e-3)


def test_summarize_non_binary_bounded_metric_uses_t():
    assert summarize([0.0, 0.5, 1.0, 1.0]).interval == "t"


def test_summarize_identical_values_collapse_interval():
    result = summarize([2.5, 2.5, 2.5, 2.5])
    assert (result.mean, result.stderr, result.ci_low, result.ci_high) == (2.5, 0.0, 2.5, 2.5)
    tenths = summarize([0.1, 0.1, 0.1])  # fsum/3 would be 0.10000000000000002
    assert (tenths.mean, tenths.stderr, tenths.ci_low, tenths.ci_high) == (0.1, 0.0, 0.1, 0.1)


def test_summarize_single_value():
    result = summarize([0.7])
    assert result == Summary(1, 0.7, None, None, None, None)
    binary = summarize([True])
    assert binary.stderr is None
    assert binary.interval == "wilson" and binary.ci_high == 1.0 and binary.ci_low > 0.0


def test_summarize_empty_and_all_missing():
    assert summarize([]) == Summary(0, None, None, None, None)
    assert summarize([None, float("nan")]).n == 0


def test_summarize_aggregation_none_reports_only_n():
    result = summarize([1, 2, None], aggregation="none")
    assert result == Summary(2, None, None, None, None)


def test_summarize_confidence_widens_interval():
    narrow, wide = summarize([1, 2, 4, 8], confidence=0.9), summarize([1, 2, 4, 8], confidence=0.99)
    assert wide.ci_low < narrow.ci_low and wide.ci_high > narrow.ci_high


@pytest.mark.parametrize(
    "kwargs", [{"aggregation": "median"}, {"confidence": 1.0}, {"confidence": 0}]
)
def test_summarize_rejects_bad_options(kwargs):
    with pytest.raises(ValueError):
        summarize([1, 2], **kwargs)


def test_summarize_rejects_infinite_and_non_numeric_values():
    with pytest.raises(ValueError, match="finite"):
        summarize([1.0, math.inf])
    with pytest.raises(TypeError, match="at 1 must be a number"):
        summarize([1.0, "0.5"])
    with pytest.raises(TypeError):
        summarize([object()])


def test_summarize_accepts_numpy_and_pandas_values():
    np = pytest.importorskip("numpy")
    pd = pytest.importorskip("pandas")
    result = summarize(np.array([1.0, 0.0, 1.0, 1.0]))
    assert result.n == 4 and result.interval == "wilson"
    series = pd.Series([1.0, None, 0.5], dtype="Float64")  # holds pd.NA
    assert summarize(list(series)).n == 2
    assert summarize([np.bool_(True), np.bool_(False)]).mean == 0.5


def test_summary_is_frozen_with_as_dict():
    result = summarize([1, 2, 3])
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.mean = 0  # type: ignore[misc]
    assert set(result.as_dict()) == {"n", "mean", "stderr", "ci_low", "ci_high", "interval"}


# ------------------------------------------------------------------ paired difference


def test_paired_difference_hand_computed():
    a = {0: 1, 1: 2, 2: 3, 3: 5, 5: None}
    b = {0: 0, 1: 2, 2: 1, 3: 1, 4: 7}
    result = paired_difference(a, b)
    assert isinstance(result, PairedSummary)
    assert result.n == 4
    assert result.mean_diff == pytest.approx(1.75)
    stderr = math.sqrt(8.75 / 3) / 2
    assert result.stderr == pytest.approx(stderr)
    assert result.ci_low == pytest.approx(1.75 - 3.182446305284 * stderr, rel=1e-9)
    assert result.ci_high == pytest.approx(1.75 + 3.182446305284 * stderr, rel=1e-9)
    assert (result.n_a_only, result.n_b_only) == (0, 1)


def test_paired_difference_tuple_keys_and_sequences():
    a = {("qa", 0): True, ("qa", 1): False, ("mc", 0): True}
    b = {("qa", 0): False, ("qa", 1): False, ("mc", 1): True}
    result = paired_difference(a, b)
    assert (result.n, result.mean_diff, result.n_a_only, result.n_b_only) == (2, 0.5, 1, 1)
    by_position = paired_difference([1, 0, 1], [0, 0, 1])
    assert by_position.n == 3 and by_position.mean_diff == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="lengths"):
        paired_difference([1, 0], [1, 0, 1])


def test_paired_difference_edges():
    assert paired_difference({}, {}).as_dict() == {
        "n": 0, "mean_diff": None, "stderr": None, "ci_low": None, "ci_high": None,
        "n_a_only": 0, "n_b_only": 0,
    }
    single = paired_difference({1: 0.9}, {1: 0.4})
    assert single.n == 1 and single.mean_diff == pytest.approx(0.5) and single.ci_low is None
    constant = paired_difference({i: i + 1.0 for i in range(5)}, {i: float(i) for i in range(5)})
    assert (constant.stderr, constant.ci_low, constant.ci_high) == (0.0, 1.0, 1.0)
    with pytest.raises(TypeError):
        paired_difference("abc", "abd")


# ------------------------------------------------------------------ paired bootstrap


def _shifted_pairs(n: int, shift: float, seed: int = 42):
    rng = random.Random(seed)
    b = {i: rng.gauss(0, 1) for i in range(n)}
    noise = [rng.gauss(0, 1) for _ in range(n)]
    mean_noise = sum(noise) / n
    a = {i: b[i] + shift + noise[i] - mean_noise for i in range(n)}  # mean diff exactly `shift`
    return a, b


def test_paired_bootstrap_is_deterministic_and_covers_true_difference():
    a, b = _shifted_pairs(400, 0.3)
    first = paired_bootstrap(a, b, seed=7)
    assert isinstance(first, Bootstrap)
    assert first == paired_bootstrap(a, b, seed=7)
    assert first != paired_bootstrap(a, b, seed=8)
    mean_diff, low, high = first
    assert mean_diff == pytest.approx(0.3)
    assert low < 0.3 < high
    # the percentile interval agrees with the t-interval for a symmetric, large sample
    t = paired_difference(a, b)
    assert high - low == pytest.approx(t.ci_high - t.ci_low, rel=0.15)
    assert first.as_dict() == {"mean_diff": mean_diff, "ci_low": low, "ci_high": high}


def test_paired_bootstrap_does_not_depend_on_key_order():
    a, b = _shifted_pairs(50, 1.0)
    reversed_a = dict(reversed(list(a.items())))
    assert paired_bootstrap(a, b, seed=3) == paired_bootstrap(reversed_a, b, seed=3)


def test_paired_bootstrap_without_numpy_gives_similar_interval(monkeypatch):
    a, b = _shifted_pairs(300, 0.5)
    with_numpy = paired_bootstrap(a, b, seed=1)
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` now raises ImportError
    pure = paired_bootstrap(a, b, seed=1)
    assert pure == paired_bootstrap(a, b, seed=1)
    assert pure.mean_diff == with_numpy.mean_diff
    assert pure.ci_low == pytest.approx(with_numpy.ci_low, abs=0.03)
    assert pure.ci_high == pytest.approx(with_numpy.ci_high, abs=0.03)


def test_paired_bootstrap_edges():
    assert paired_bootstrap({}, {}) == (None, None, None)
    assert paired_bootstrap({0: 1.0}, {0: 0.0}) == (1.0, None, None)
    assert paired_bootstrap([2, 3, 4], [1, 2, 3]) == (1.0, 1.0, 1.0)
    for bad in (0, -5, 2.5):
        with pytest.raises(ValueError):
            paired_bootstrap([1, 2], [0, 1], n_resamples=bad)
    with pytest.raises(ValueError):
        paired_bootstrap([1, 2], [0, 1], confidence=1.5)


def test_paired_bootstrap_is_fast_for_10k_pairs():
    pytest.importorskip("numpy")
    rng = random.Random(0)
    a = {i: float(rng.random() < 0.7) for i in range(10_000)}
    b = {i: float(rng.random() < 0.6) for i in range(10_000)}
    paired_bootstrap({0: 1, 1: 0}, {0: 0, 1: 0}, n_resamples=10)  # import numpy outside the clock
    start = time.perf_counter()
    mean_diff, low, high = paired_bootstrap(a, b, n_resamples=2000, seed=0)
    assert time.perf_counter() - start < 1.0
    assert low < mean_diff < high


# ------------------------------------------------------------------ McNemar


def _exact_two_sided(n01: int, n10: int) -> float:
    n, k = n01 + n10, min(n01, n10)
    return float(min(Fraction(1), 2 * Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2**n)))


def test_mcnemar_textbook_counts():
    result = mcnemar_from_counts(2, 9)
    assert result == McNemar(2, 9, 2, 134 / 2048)
    assert result.p_value == pytest.approx(0.0654, abs=1e-4)
    assert mcnemar_from_counts(9, 2).p_value == result.p_value
    assert mcnemar_from_counts(0, 10).p_value == 2 / 1024
    assert mcnemar_from_counts(5, 5).p_value == 1.0
    assert mcnemar_from_counts(0, 0).p_value == 1.0


def test_mcnemar_from_paired_outcomes():
    a = {i: v for i, v in enumerate([1, 1, 0, 0, 1, 0, None, 1])}
    b = {i: v for i, v in enumerate([1, 0, 1, 1, 0, 0, 1, True])}
    result = mcnemar_exact(a, b)
    assert (result.n01, result.n10) == (2, 2)
    assert result.p_value == 1.0
    assert mcnemar_exact([False] * 3 + [True] * 9, [True] * 3 + [False] * 9).as_dict() == {
        "n01": 3, "n10": 9, "statistic": 3, "p_value": _exact_two_sided(3, 9),
    }


def test_mcnemar_rejects_non_binary_and_bad_counts():
    with pytest.raises(ValueError, match="0/1"):
        mcnemar_exact({0: 0.5}, {0: 1})
    for bad in ((-1, 3), (1.5, 2), (True, 2)):
        with pytest.raises(ValueError):
            mcnemar_from_counts(*bad)


@pytest.mark.parametrize(("n01", "n10"), [(950, 1051), (1000, 1100), (1400, 1700), (10, 2500)])
def test_mcnemar_log_path_matches_exact_arithmetic(n01, n10):
    expected = _exact_two_sided(n01, n10)
    assert mcnemar_from_counts(n01, n10).p_value == pytest.approx(expected, rel=1e-9)


def test_mcnemar_large_n_no_overflow_and_fast():
    start = time.perf_counter()
    balanced = mcnemar_from_counts(50_000, 50_500)
    lopsided = mcnemar_from_counts(40_000, 60_000)
    assert time.perf_counter() - start < 0.5
    # continuity-corrected normal approximation: (|d| - 1)^2 / n with chi2(1) tail
    z = (500 - 1) / math.sqrt(100_500)
    assert balanced.p_value == pytest.approx(math.erfc(z / math.sqrt(2)), rel=1e-2)
    assert 0.0 <= lopsided.p_value < 1e-300
    assert mcnemar_from_counts(50_000, 50_000).p_value == 1.0


def test_t_interval_of_a_unit_interval_score_stays_inside_zero_one():
    from evalnb.results.stats import summarize

    s = summarize([1.0] * 38 + [0.99, 0.3])
    assert s.interval == "t"
    assert s.ci_high == 1.0 and 0.0 <= s.ci_low < s.mean
    unbounded = summarize([1.0] * 38 + [0.99, 1.3])  # a value above 1: no clipping
    assert unbounded.ci_high > 1.0


@pytest.mark.parametrize("values", [[1.0, 0.0, float("nan"), 1.0, 1.0], [0.25, 0.5, float("nan"), 0.75, 1.0],
                                    [3.0, -1.5, 2.25, float("nan")], [0.5], [float("nan")], [2.0, 2.0, 2.0]])
def test_summarize_of_a_float_array_is_summarize_of_its_list(values):
    np = pytest.importorskip("numpy")
    for confidence in (0.9, 0.95):
        assert summarize(np.asarray(values), confidence=confidence) == summarize(values, confidence=confidence)


def test_summarize_of_a_float_array_refuses_infinity_naming_where():
    np = pytest.importorskip("numpy")
    with pytest.raises(ValueError, match=r"metric value at 2 is inf; values must be finite"):
        summarize(np.asarray([1.0, float("nan"), float("inf")]))
    with pytest.raises(ValueError, match=r"metric value at 2 is inf; values must be finite"):
        summarize([1.0, float("nan"), float("inf")])
