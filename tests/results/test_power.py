"""evalnb.stats power analysis against scipy / statsmodels and against a simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.power import NormalIndPower

import evalnb
from evalnb.results import power
from evalnb.results.stats import (
    min_detectable_effect,
    min_detectable_effect_proportion,
    paired_proportion_sd,
    proportion_sd,
    sample_size,
    sample_size_proportion,
)


def test_evalnb_stats_names_the_power_functions():
    assert evalnb.stats.min_detectable_effect is min_detectable_effect
    assert evalnb.stats.sample_size is sample_size


def test_the_factor_at_the_defaults_is_2_8016():
    assert power.power_factor() == pytest.approx(2.8016, abs=5e-5)
    assert power.power_factor() == pytest.approx(sps.norm.ppf(0.975) + sps.norm.ppf(0.8), rel=1e-12)


@pytest.mark.parametrize(("n", "sd", "alpha", "pw"), [(40, 0.5, 0.05, 0.8), (1, 1.0, 0.01, 0.9), (1000, 0.3, 0.1, 0.5),
                                                     (7, 0.0, 0.05, 0.8)])
def test_min_detectable_effect_is_the_normal_formula(n, sd, alpha, pw):
    expected = (sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(pw)) * sd / math.sqrt(n)
    assert min_detectable_effect(n, sd, alpha=alpha, power=pw) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_a_true_effect_of_the_mde_is_detected_with_the_stated_power():
    """Simulate a z-test of n paired differences with true mean = mde: it rejects ~80% of the time."""
    rng = np.random.default_rng(7)
    n, sd = 50, 0.6
    effect = min_detectable_effect(n, sd)
    draws = rng.normal(effect, sd, size=(20_000, n))
    z = draws.mean(axis=1) / (sd / math.sqrt(n))
    rejected = np.mean(np.abs(z) > sps.norm.ppf(0.975))
    assert rejected == pytest.approx(0.80, abs=0.01)


@pytest.mark.parametrize(("effect", "sd"), [(0.1, 0.5), (0.05, 0.3), (0.19, 0.4), (0.5, 0.5), (0.003, 0.9)])
def test_sample_size_is_the_smallest_n_that_detects_the_effect(effect, sd):
    n = sample_size(effect, sd)
    assert min_detectable_effect(n, sd) <= effect
    assert n == 1 or min_detectable_effect(n - 1, sd) > effect
    # statsmodels solves the same one-sample problem (ratio=0); its power counts the far tail too,
    # so its n can only be a hair smaller than ours (its root finder stops at ~1e-6 relative)
    theirs = NormalIndPower().solve_power(effect_size=effect / sd, alpha=0.05, power=0.8, ratio=0,
                                          alternative="two-sided")
    assert n - 1 - 1e-5 * n <= theirs <= n


def test_sample_size_of_a_zero_sd_is_one_and_other_levels_are_honoured():
    assert sample_size(0.1, 0.0) == 1
    strict = sample_size(0.1, 0.5, alpha=0.01, power=0.9)
    assert strict == math.ceil(((sps.norm.ppf(0.995) + sps.norm.ppf(0.9)) * 0.5 / 0.1) ** 2)
    assert strict > sample_size(0.1, 0.5)


def test_proportion_helpers():
    assert proportion_sd(0.8) == pytest.approx(0.4)
    assert proportion_sd(0.0) == 0.0
    assert min_detectable_effect_proportion(100, 0.5) == pytest.approx(min_detectable_effect(100, 0.5))
    assert sample_size_proportion(0.1, 0.8) == sample_size(0.1, 0.4)
    # 20% of items disagree, net +10 points: per-item differences are +1 (15%), -1 (5%), 0 (80%)
    diffs = np.array([1.0] * 15 + [-1.0] * 5 + [0.0] * 80)
    assert paired_proportion_sd(0.2, 0.1) == pytest.approx(diffs.std(ddof=0))
    assert paired_proportion_sd(0.2) == pytest.approx(math.sqrt(0.2))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: min_detectable_effect(0, 0.5), "n must be a positive integer"),
        (lambda: min_detectable_effect(10.0, 0.5), "n must be a positive integer"),
        (lambda: min_detectable_effect(True, 0.5), "n must be a positive integer"),
        (lambda: min_detectable_effect(10, -0.1), "sd must be a finite number >= 0"),
        (lambda: min_detectable_effect(10, math.nan), "sd must be a finite number >= 0"),
        (lambda: min_detectable_effect(10, 0.5, alpha=0), "alpha must be a number between 0 and 1"),
        (lambda: min_detectable_effect(10, 0.5, power=1.0), "power must be a number between 0 and 1"),
        (lambda: sample_size(0, 0.5), "effect must be a finite number > 0"),
        (lambda: sample_size(-0.1, 0.5), "effect must be a finite number > 0"),
        (lambda: sample_size(math.inf, 0.5), "effect must be a finite number > 0"),
        (lambda: proportion_sd(1.2), "p must be a proportion"),
        (lambda: paired_proportion_sd(0.1, 0.2), r"\|effect\| <= p_discordant"),
        (lambda: paired_proportion_sd(-0.1), "p_discordant must be a proportion"),
    ],
)
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
