"""Student's t and the normal distribution, stdlib only: quantiles for intervals, tails for p-values.

Kept apart from `stats` (the tables' statistics) because it is numerics, not statistics
practice: a regularized incomplete beta by continued fraction, inverted by bisection.
"""

from __future__ import annotations

import functools
import math
import statistics

__all__ = ["normal_quantile", "t_quantile", "t_two_sided_p"]


def normal_quantile(p: float) -> float:
    """The p-quantile of the standard normal (``z_p``)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be between 0 and 1 (exclusive), got {p!r}")
    return statistics.NormalDist().inv_cdf(p)


def t_two_sided_p(t: float, df: float) -> float:
    """Two-sided p-value of a t statistic: P(|T| >= |t|) with ``df`` degrees of freedom."""
    if not df > 0:
        raise ValueError(f"df must be positive, got {df!r}")
    if math.isnan(t):
        raise ValueError("t must be a number, got NaN")
    if math.isinf(t):
        return 0.0
    if math.isinf(df):
        return math.erfc(abs(t) / math.sqrt(2))
    return min(1.0, 2.0 * _t_upper_tail(abs(t), df))



@functools.lru_cache(maxsize=512)
def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with ``df`` degrees of freedom (``math.inf`` = normal).

    Exact closed forms for df 1 and 2; otherwise the t tail (a regularized incomplete beta)
    is inverted by bisection to ~1e-12, and df >= 1000 uses the Cornish-Fisher expansion.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be between 0 and 1 (exclusive), got {p!r}")
    if not df > 0:
        raise ValueError(f"df must be positive, got {df!r}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if math.isinf(df):
        return statistics.NormalDist().inv_cdf(p)
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) * math.sqrt(2.0 / (4 * p * (1 - p)))
    if df >= 1000:
        return _cornish_fisher(p, df)
    tail = 1.0 - p
    low, high = 0.0, 2.0
    while _t_upper_tail(high, df) > tail:
        low, high = high, high * 2
    for _ in range(200):
        mid = (low + high) / 2
        if _t_upper_tail(mid, df) > tail:
            low = mid
        else:
            high = mid
        if high - low <= 1e-13 * high:
            break
    return (low + high) / 2


def _cornish_fisher(p: float, df: float) -> float:
    """Expansion of the t quantile in powers of 1/df around the normal quantile."""
    z = statistics.NormalDist().inv_cdf(p)
    z3, z5, z7, z9 = z**3, z**5, z**7, z**9
    return (
        z
        + (z3 + z) / (4 * df)
        + (5 * z5 + 16 * z3 + 3 * z) / (96 * df**2)
        + (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * df**3)
        + (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / (92160 * df**4)
    )


def _t_upper_tail(t: float, df: float) -> float:
    """P(T > t) for t >= 0: half the regularized incomplete beta I_x(df/2, 1/2), x = df/(df+t²)."""
    return 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) by Lentz's continued fraction (Numerical Recipes)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    log_front += a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def _betacf(a: float, b: float, x: float) -> float:
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                   -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            delta = d * c
            h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


