"""Power analysis: how small a difference an eval can detect, and how many items a claim needs.

The normal approximation of a two-sided test at level ``alpha`` with the given ``power``
(Miller, "Adding Error Bars to Evals", 2024): a true difference ``d`` is detected with
probability ``power`` when ``d >= (z_{1-alpha/2} + z_power) * sd / sqrt(n)``, where ``sd`` is
the standard deviation of one item's score, or of one item's *difference* for a paired
comparison (much smaller when two models agree on most items). At the defaults the factor is
2.8016. Pure functions, stdlib only; `evalnb.stats` re-exports them.
"""

from __future__ import annotations

import math

from evalnb.results._tdist import normal_quantile

__all__ = [
    "min_detectable_effect",
    "min_detectable_effect_proportion",
    "paired_proportion_sd",
    "proportion_sd",
    "sample_size",
    "sample_size_proportion",
]


def _probability(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be a number between 0 and 1 (exclusive), got {value!r}")
    return float(value)


def _non_negative(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def power_factor(alpha: float = 0.05, power: float = 0.8) -> float:
    """``z_{1-alpha/2} + z_power``: 2.8016 at alpha = 0.05 and 80% power."""
    alpha, power = _probability(alpha, "alpha"), _probability(power, "power")
    return normal_quantile(1.0 - alpha / 2.0) + normal_quantile(power)


def min_detectable_effect(n: int, sd: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true difference ``n`` items detect: ``(z_{1-α/2} + z_power) · sd / √n``.

    ``sd``: the standard deviation of one item's score (or of one item's paired difference).
    A difference below this could not be told from noise with this many items.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer (the number of items), got {n!r}")
    sd = _non_negative(sd, "sd")
    return power_factor(alpha, power) * sd / math.sqrt(n)


def sample_size(effect: float, sd: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """The smallest number of items n with ``min_detectable_effect(n, sd) <= effect``."""
    if isinstance(effect, bool) or not isinstance(effect, (int, float)) or not math.isfinite(effect) or effect <= 0:
        raise ValueError(f"effect must be a finite number > 0 (the difference to detect), got {effect!r}")
    sd = _non_negative(sd, "sd")
    if sd == 0.0:
        return 1
    n = max(1, math.ceil((power_factor(alpha, power) * sd / effect) ** 2))
    # the closed form rounds in floating point; settle on the exact smallest n
    while min_detectable_effect(n, sd, alpha=alpha, power=power) > effect:
        n += 1
    while n > 1 and min_detectable_effect(n - 1, sd, alpha=alpha, power=power) <= effect:
        n -= 1
    return n


def proportion_sd(p: float) -> float:
    """The SD of one item's 0/1 score when a fraction ``p`` of items score 1: ``√(p(1−p))``."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be a proportion between 0 and 1, got {p!r}")
    return math.sqrt(p * (1.0 - p))


def paired_proportion_sd(p_discordant: float, effect: float = 0.0) -> float:
    """The SD of per-item differences of two 0/1 scores: ``√(p_discordant − effect²)``.

    ``p_discordant``: the fraction of items where the two disagree (McNemar's n01 + n10 over
    n); ``effect``: the mean difference (n10 − n01) / n. Two models that agree on most items
    have a small SD, so a paired comparison needs far fewer items than two separate scores.
    """
    if isinstance(p_discordant, bool) or not isinstance(p_discordant, (int, float)) or not 0.0 <= p_discordant <= 1.0:
        raise ValueError(f"p_discordant must be a proportion between 0 and 1, got {p_discordant!r}")
    if isinstance(effect, bool) or not isinstance(effect, (int, float)) or abs(effect) > p_discordant:
        raise ValueError(f"effect must be a number with |effect| <= p_discordant ({p_discordant!r}), got {effect!r}")
    return math.sqrt(max(0.0, p_discordant - effect * effect))


def min_detectable_effect_proportion(n: int, p: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """`min_detectable_effect` of a 0/1 metric scored ``p`` on average (sd = √(p(1−p)))."""
    return min_detectable_effect(n, proportion_sd(p), alpha=alpha, power=power)


def sample_size_proportion(effect: float, p: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """`sample_size` for a 0/1 metric scored ``p`` on average (sd = √(p(1−p)))."""
    return sample_size(effect, proportion_sd(p), alpha=alpha, power=power)
