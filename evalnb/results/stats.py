"""Statistics for metric tables and model comparisons: pure functions, stdlib only.

numpy is imported lazily by ``paired_bootstrap`` (for speed) and nothing else needs it; there
is no scipy. Choices where the specification is silent:

- Missing values: ``None``, NaN and pandas' ``NA`` are "not scored" and excluded, so ``n``
  counts the values present. NaN is treated as missing because graders produce it for 0/0
  cases, it cannot be stored in JSON and it would poison every mean. ±inf is a ValueError.
- Booleans count as 0/1. Strings are a TypeError (a grader bug, not a score).
- Intervals: when every present value is 0 or 1 (accuracy-like metrics), ``summarize`` reports
  the Wilson score interval: it stays inside [0, 1] and does not collapse to a point when a
  small sample is all-correct (10/10 -> [0.72, 1], where a t-interval claims [1, 1]). Any other
  data gets the Student-t interval ``mean ± t(1 - α/2, n - 1) · stderr``. ``Summary.interval``
  says which one was used. ``stderr`` is always the sample SD (ddof=1) / sqrt(n).
- n = 1: ``stderr`` is ``None`` (not NaN, which JSON cannot hold) and so is the t-interval;
  the Wilson interval exists at n = 1 and is reported. n = 0: everything but ``n`` is ``None``.
- Identical values: stderr 0, so the t-interval collapses to the mean.
- Paired statistics align on keys (``sample_index`` or ``(task, index)``); a key counts only
  when both sides have a value. Sequences are accepted too and pair by position.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from evalnb.results._tdist import normal_quantile, t_quantile, t_two_sided_p
from evalnb.results.power import (
    min_detectable_effect,
    min_detectable_effect_proportion,
    paired_proportion_sd,
    proportion_sd,
    sample_size,
    sample_size_proportion,
)

__all__ = [
    "Bootstrap",
    "Interval",
    "McNemar",
    "PairedSummary",
    "Summary",
    "as_value",
    "bootstrap_interval",
    "bootstrap_means",
    "check_confidence",
    "check_resamples",
    "holm",
    "mcnemar_exact",
    "mcnemar_from_counts",
    "mean_sd",
    "min_detectable_effect",
    "min_detectable_effect_proportion",
    "normal_quantile",
    "paired_bootstrap",
    "paired_difference",
    "paired_proportion_sd",
    "pass_at_k",
    "proportion_sd",
    "sample_size",
    "sample_size_proportion",
    "summarize",
    "t_interval",
    "t_quantile",
    "t_two_sided_p",
    "wilson_interval",
]

Pairable = Mapping[Hashable, Any] | Sequence[Any]


@dataclass(frozen=True)
class Summary:
    """One metric over one (task, model): what a results table row shows."""

    n: int
    mean: float | None
    stderr: float | None
    ci_low: float | None
    ci_high: float | None
    interval: str | None = None  # "wilson", "t" or None when there is no interval

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PairedSummary:
    """Mean of per-item differences a - b with its t-interval, plus how many items did not pair."""

    n: int
    mean_diff: float | None
    stderr: float | None
    ci_low: float | None
    ci_high: float | None
    n_a_only: int
    n_b_only: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class McNemar:
    """Exact McNemar test: n01 = a is 0 and b is 1, n10 = a is 1 and b is 0.

    ``statistic`` is the exact test's statistic, the smaller discordant count.
    """

    n01: int
    n10: int
    statistic: int
    p_value: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Interval(NamedTuple):
    """A (low, high) pair that unpacks like a tuple."""

    low: float
    high: float

    def as_dict(self) -> dict[str, Any]:
        return dict(self._asdict())


class Bootstrap(NamedTuple):
    """``(mean_diff, ci_low, ci_high)`` of a paired bootstrap; unpacks like a tuple."""

    mean_diff: float | None
    ci_low: float | None
    ci_high: float | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self._asdict())


# --------------------------------------------------------------------------- value cleaning


def as_value(value: Any, where: object) -> float | None:
    """A metric value as float, or None when missing (None, NaN, pandas NA)."""
    if value is None or type(value).__name__ == "NAType":
        return None
    if isinstance(value, (str, bytes)) or not hasattr(type(value), "__float__"):
        raise TypeError(f"metric value at {where!r} must be a number or bool, got {value!r}")
    number = float(value)
    if math.isnan(number):
        return None
    if math.isinf(number):
        raise ValueError(f"metric value at {where!r} is {number}; values must be finite")
    return number


def check_confidence(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    return confidence


def check_resamples(n_resamples: Any) -> int:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    return n_resamples


def mean_sd(values: Sequence[float] | Any) -> tuple[float, float | None]:
    """Mean and sample SD (ddof=1; None for one value), two-pass with fsum for accuracy.

    ``values``: a non-empty sequence of floats or a float numpy array (same numbers either way).
    """
    n = len(values)
    if hasattr(values, "dtype"):  # numpy: the same sums, without a Python loop per value
        if values.min() == values.max():
            return float(values[0]), (None if n < 2 else 0.0)
        mean = math.fsum(values.tolist()) / n
        return mean, math.sqrt(math.fsum(((values - mean) ** 2).tolist()) / (n - 1))
    if min(values) == max(values):  # exact, where fsum(x)/n can be off by an ulp
        return values[0], (None if n < 2 else 0.0)
    mean = math.fsum(values) / n
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))


def t_interval(
    mean: float, stderr: float | None, n: int, confidence: float
) -> tuple[float | None, float | None]:
    """``mean ± t_{n-1} · stderr`` (None without a stderr; the mean itself when it is 0)."""
    if stderr is None:
        return None, None
    if stderr == 0.0:
        return mean, mean
    half = t_quantile(0.5 + confidence / 2, n - 1) * stderr
    return mean - half, mean + half


# --------------------------------------------------------------------------- one sample


def summarize(
    values: Iterable[float | bool | None],
    *,
    aggregation: str = "mean",
    confidence: float = 0.95,
) -> Summary:
    """n, mean, stderr and a ``confidence`` interval of one metric (see the module docstring)."""
    if aggregation not in ("mean", "none"):
        raise ValueError(f"aggregation must be 'mean' or 'none', got {aggregation!r}")
    check_confidence(confidence)
    if hasattr(values, "dtype") and getattr(values.dtype, "kind", "") == "f":  # a float numpy array
        present = _present_array(values)
    else:
        present = [v for i, raw in enumerate(values) if (v := as_value(raw, i)) is not None]
    n = len(present)
    if aggregation == "none" or n == 0:
        return Summary(n, None, None, None, None)
    mean, sd = mean_sd(present)
    stderr = None if sd is None else sd / math.sqrt(n)
    if _all_binary(present):
        z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
        low, high = wilson_interval(float(present.sum()) if hasattr(present, "dtype") else sum(present), n, z=z)
        return Summary(n, mean, stderr, low, high, "wilson")
    low, high = t_interval(mean, stderr, n, confidence)
    if low is not None and _all_in_unit(present):
        # A score that lives in [0, 1] (a similarity, a partial credit) cannot have a mean
        # outside it: clip the t-interval there instead of reporting 1.006.
        low, high = max(0.0, low), min(1.0, high)
    return Summary(n, mean, stderr, low, high, None if low is None else "t")


def _present_array(values: Any) -> Any:
    """The non-NaN values of a float array (the list path's `as_value`: ±inf is a ValueError)."""
    import numpy as np

    present = values[~np.isnan(values)]
    if np.isinf(present).any():
        where = int(np.flatnonzero(np.isinf(values))[0])
        raise ValueError(f"metric value at {where!r} is {float(values[where])}; values must be finite")
    return present


def _all_binary(present: Any) -> bool:
    if hasattr(present, "dtype"):
        return bool(((present == 0.0) | (present == 1.0)).all())
    return all(v == 0.0 or v == 1.0 for v in present)


def _all_in_unit(present: Any) -> bool:
    if hasattr(present, "dtype"):
        return bool(((present >= 0.0) & (present <= 1.0)).all())
    return all(0.0 <= v <= 1.0 for v in present)


def wilson_interval(successes: float, n: int, z: float = 1.96) -> Interval:
    """Wilson score interval for a proportion; always inside [0, 1], defined from n = 1."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n!r}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be between 0 and n={n}, got {successes!r}")
    if z <= 0:
        raise ValueError(f"z must be positive, got {z!r}")
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(low, high)


# --------------------------------------------------------------------------- paired


def _as_mapping(data: Pairable, name: str) -> Mapping[Hashable, Any]:
    if isinstance(data, Mapping):
        return data
    if isinstance(data, (str, bytes)) or not isinstance(data, Sequence):
        raise TypeError(f"{name} must be a mapping (key -> value) or a sequence")
    return dict(enumerate(data))


def _pair(a: Pairable, b: Pairable) -> tuple[list[tuple[float, float]], int, int]:
    """Values present on both sides, in key order (so results do not depend on dict order)."""
    if isinstance(a, Sequence) and isinstance(b, Sequence) and len(a) != len(b):
        raise ValueError(f"sequences pair by position but have lengths {len(a)} and {len(b)}")
    a_map, b_map = _as_mapping(a, "a"), _as_mapping(b, "b")
    a_vals = {k: v for k, raw in a_map.items() if (v := as_value(raw, k)) is not None}
    b_vals = {k: v for k, raw in b_map.items() if (v := as_value(raw, k)) is not None}
    common = [k for k in a_vals if k in b_vals]
    try:
        common.sort()  # type: ignore[call-arg]
    except TypeError:
        common.sort(key=repr)
    pairs = [(a_vals[k], b_vals[k]) for k in common]
    return pairs, len(a_vals) - len(pairs), len(b_vals) - len(pairs)


def paired_difference(a: Pairable, b: Pairable, *, confidence: float = 0.95) -> PairedSummary:
    """Mean per-item difference a - b with a Student-t interval on the differences."""
    check_confidence(confidence)
    pairs, a_only, b_only = _pair(a, b)
    if not pairs:
        return PairedSummary(0, None, None, None, None, a_only, b_only)
    diffs = [x - y for x, y in pairs]
    mean, sd = mean_sd(diffs)
    stderr = None if sd is None else sd / math.sqrt(len(diffs))
    low, high = t_interval(mean, stderr, len(diffs), confidence)
    return PairedSummary(len(diffs), mean, stderr, low, high, a_only, b_only)


def paired_bootstrap(
    a: Pairable,
    b: Pairable,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Bootstrap:
    """Percentile bootstrap of the mean paired difference a - b; deterministic given ``seed``.

    Uses numpy when importable (10k pairs x 2000 resamples in well under a second), else a
    pure-Python resampler (same method, different random stream). Fewer than two pairs give
    no interval: resampling one difference would only ever return that difference. From
    10,000 pairs of a float metric the interval is the bootstrap's limit, computed instead of
    drawn (see `bootstrap_interval`).
    """
    check_confidence(confidence)
    check_resamples(n_resamples)
    pairs, _, _ = _pair(a, b)
    if not pairs:
        return Bootstrap(None, None, None)
    diffs = [x - y for x, y in pairs]
    mean, _ = mean_sd(diffs)
    if len(diffs) < 2:
        return Bootstrap(mean, None, None)
    try:
        import numpy as np
    except ImportError:
        means = _resample_means_python(diffs, n_resamples, seed)
        means.sort()
        alpha = 1.0 - confidence
        return Bootstrap(mean, _percentile(means, alpha / 2), _percentile(means, 1 - alpha / 2))
    low, high = bootstrap_interval(np.asarray(diffs, dtype=float), n_resamples, seed, confidence)
    return Bootstrap(mean, low, high)


# Above this many distinct differences the resampler draws item indices instead of counts.
_MAX_CATEGORIES = 256


def bootstrap_means(diffs: Any, n_resamples: int, seed: int) -> Any:
    """``n_resamples`` bootstrap means of the float array ``diffs`` (numpy; unsorted).

    A resample of n items only matters through how many times it drew each distinct value, so
    when the differences take few values (a 0/1 metric's are -1, 0 or 1) the counts are drawn
    directly, ``Multinomial(n, share of each value)`` per resample: time per resample, not per
    item, with exactly the distribution of the item resampler. Many distinct values (a float
    metric) resample item indices as before. Deterministic given ``seed``.
    """
    import numpy as np

    data = np.asarray(diffs, dtype=float)
    return _draw_means(data, _categories(data), n_resamples, seed)


def _categories(data: Any) -> Any:
    """(distinct values, index of first appearance, counts) when there are at most
    `_MAX_CATEGORIES` distinct values, else None; `np.unique`'s answer, without its sort for
    the differences of 0/1 values."""
    import numpy as np

    minus, zero, plus = data == -1.0, data == 0.0, data == 1.0
    if bool((minus | zero | plus).all()):
        found = [(v, mask) for v, mask in ((-1.0, minus), (0.0, zero), (1.0, plus)) if mask.any()]
        return (np.array([v for v, _ in found]), np.array([int(m.argmax()) for _, m in found]),
                np.array([int(np.count_nonzero(m)) for _, m in found]))
    values, first, counts = np.unique(data, return_index=True, return_counts=True)
    return (values, first, counts) if values.size <= _MAX_CATEGORIES else None


def _draw_means(data: Any, categories: Any, n_resamples: int, seed: int) -> Any:
    import numpy as np

    n = data.size
    rng = np.random.default_rng(seed)
    if categories is not None:
        values, first, counts = categories
        # categories in order of first appearance: b - a then draws the same counts as a - b
        # (for the negated values), so swapping the models mirrors the interval exactly
        order = np.argsort(first)
        drawn = rng.multinomial(n, counts[order] / n, size=n_resamples)
        return drawn @ values[order] / n
    chunk = max(1, 1_000_000 // n)  # ~8 MB of indices per step: cache-friendly and fast
    out = []
    for start in range(0, n_resamples, chunk):
        rows = min(chunk, n_resamples - start)
        out.append(data[rng.integers(0, n, size=(rows, n))].mean(axis=1))
    return np.concatenate(out)


def bootstrap_interval(diffs: Any, n_resamples: int, seed: int, confidence: float = 0.95) -> tuple[float, float]:
    """The percentile interval of `bootstrap_means` (numpy's 'linear' percentile); needs 2+ values.

    From `bootstrap_limit.MIN_ITEMS` (10,000) values with more than `_MAX_CATEGORIES` distinct
    ones and a near-normal resampled mean, the interval is the one this converges to as
    ``n_resamples`` grows, computed from the exact cumulants of the resampled mean
    (`bootstrap_limit.limit_interval`) instead of drawn: it then does not depend on ``seed``
    or ``n_resamples``, and agrees with the drawn one within its Monte-Carlo error.
    """
    import numpy as np

    from evalnb.results.bootstrap_limit import MIN_ITEMS, limit_interval

    data = np.asarray(diffs, dtype=float)
    categories = _categories(data)
    if categories is None and data.size >= MIN_ITEMS:
        limit = limit_interval(data, confidence)
        if limit is not None:
            return limit
    means = np.sort(_draw_means(data, categories, n_resamples, seed))
    alpha = 1.0 - confidence
    return _percentile(means, alpha / 2), _percentile(means, 1 - alpha / 2)


def _resample_means_python(diffs: list[float], n_resamples: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    n = len(diffs)
    return [math.fsum(rng.choices(diffs, k=n)) / n for _ in range(n_resamples)]


def _percentile(sorted_values: Any, q: float) -> float:
    """Linear interpolation between order statistics (numpy's default 'linear' method)."""
    pos = q * (len(sorted_values) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(sorted_values) - 1)
    return float(sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low))


# --------------------------------------------------------------------------- McNemar


def mcnemar_exact(a: Pairable, b: Pairable) -> McNemar:
    """Exact McNemar test on paired 0/1 outcomes (e.g. per-item correctness of two models)."""
    pairs, _, _ = _pair(a, b)
    n01 = n10 = 0
    for x, y in pairs:
        if x not in (0.0, 1.0) or y not in (0.0, 1.0):
            raise ValueError(f"McNemar needs 0/1 outcomes, got the pair ({x!r}, {y!r})")
        n01 += x == 0.0 and y == 1.0
        n10 += x == 1.0 and y == 0.0
    return mcnemar_from_counts(n01, n10)


def mcnemar_from_counts(n01: int, n10: int) -> McNemar:
    """Exact two-sided binomial test on the discordant counts: p = min(1, 2·P(X <= min)).

    Exact integer arithmetic up to 2,000 discordant pairs; beyond, a log-space sum of the
    binomial terms (relative error ~1e-12), so 100k pairs neither overflow nor crawl.
    """
    for name, count in (("n01", n01), ("n10", n10)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {count!r}")
    n, k = n01 + n10, min(n01, n10)
    if n == 0:
        return McNemar(n01, n10, k, 1.0)
    if n <= 2000:
        tail = sum(math.comb(n, i) for i in range(k + 1))
        p = min(1.0, 2 * tail / 2**n)
    else:
        p = min(1.0, 2 * math.exp(_log_binom_cdf_half(n, k)))
    return McNemar(n01, n10, k, p)


def _log_binom_cdf_half(n: int, k: int) -> float:
    """log P(X <= k) for X ~ Binomial(n, 1/2), summing terms downward from k."""
    log_term = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) - n * math.log(2)
    ratio_sum, ratio = 1.0, 1.0
    for i in range(k, 0, -1):
        ratio *= i / (n - i + 1)  # C(n, i-1) / C(n, i)
        ratio_sum += ratio
        if ratio < 1e-17 * ratio_sum:
            break
    return log_term + math.log(ratio_sum)


# --------------------------------------------------------------------------- many tests, many tries


def holm(p_values: Iterable[float | None]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (same order; missing stay NaN).

    The i-th smallest of m p-values becomes ``max_{j<=i} min(1, (m - j + 1) · p_(j))``: a
    claim that survives it keeps the chance of *any* false claim in the family at or below
    alpha, whatever the dependence between the tests (Holm 1979).
    """
    values = list(p_values)
    present: list[tuple[float, int]] = []
    for i, raw in enumerate(values):
        p = as_value(raw, i)
        if p is None:
            continue
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-value at {i} must be between 0 and 1, got {p!r}")
        present.append((p, i))
    out = [math.nan] * len(values)
    m = len(present)
    running = 0.0
    for rank, (p, i) in enumerate(sorted(present)):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of one item asked ``n`` times with ``c`` correct (Chen et al. 2021).

    The chance that at least one of k answers drawn without replacement from the n is correct:
    ``1 - C(n-c, k) / C(n, k)``, computed as a product so large n neither overflows nor loses
    precision.
    """
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if c > n:
        raise ValueError(f"c (correct answers, {c}) cannot exceed n (answers, {n})")
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and n ({n}), got {k}")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss
