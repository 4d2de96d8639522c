"""Cluster-robust standard errors: when items are not independent draws.

Belebele asks several questions about one passage; a model that misreads the passage tends to
miss all of them, so the questions carry less information than their count suggests and the
ordinary standard error is too small. Grouping items into clusters (the unit that was really
sampled) gives the CR1 estimator (Miller 2024, eq. 5; Stata's and statsmodels' default)::

    stderr = sqrt(G / (G - 1) * Σ_g (Σ_{i in g} (s_i - s̄))²) / n

over G clusters and n items; with one item per cluster it is the ordinary sd / √n. The
interval is ``mean ± t_{G-1} · stderr``: G, not n, is the number of independent draws.
Pure functions, stdlib only.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from evalnb.results._tdist import t_quantile
from evalnb.results.stats import as_value, check_confidence

__all__ = ["ClusteredSummary", "clustered_stderr", "clustered_summary"]


@dataclass(frozen=True)
class ClusteredSummary:
    """One metric's mean with a cluster-robust (CR1) stderr and a t_{G-1} interval."""

    n: int
    n_clusters: int
    mean: float | None
    stderr: float | None
    ci_low: float | None
    ci_high: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def clustered_stderr(values: Sequence[float], clusters: Sequence[Hashable]) -> float:
    """The CR1 standard error of the mean of ``values`` (floats) grouped by ``clusters``.

    Needs at least two clusters: with one, nothing varies between independent draws.
    """
    n = len(values)
    if n != len(clusters):
        raise ValueError(f"values and clusters must have the same length, got {n} and {len(clusters)}")
    groups: dict[Hashable, list[float]] = {}
    for value, cluster in zip(values, clusters):
        groups.setdefault(cluster, []).append(value)
    g = len(groups)
    if g < 2:
        raise ValueError(f"clustered errors need at least 2 clusters, got {g}")
    mean = math.fsum(values) / n
    total = math.fsum(math.fsum(v - mean for v in part) ** 2 for part in groups.values())
    return math.sqrt(g / (g - 1) * total) / n


def clustered_summary(
    values: Iterable[float | bool | None],
    clusters: Iterable[Hashable],
    *,
    confidence: float = 0.95,
) -> ClusteredSummary:
    """n, number of clusters, mean, CR1 stderr and a ``mean ± t_{G-1} · stderr`` interval.

    ``values[i]`` belongs to cluster ``clusters[i]``; missing values (None, NaN) are left out
    together with their cluster label. As for every t-interval in evalnb, a score that lives
    in [0, 1] gets its interval clipped to [0, 1]. No values: everything but n is None.
    """
    check_confidence(confidence)
    raw_values, raw_clusters = list(values), list(clusters)
    if len(raw_values) != len(raw_clusters):
        raise ValueError(f"values and clusters must have the same length, got {len(raw_values)} and {len(raw_clusters)}")
    present: list[float] = []
    labels: list[Hashable] = []
    for i, (raw, cluster) in enumerate(zip(raw_values, raw_clusters)):
        value = as_value(raw, i)
        if value is None:
            continue
        if cluster is None:
            raise ValueError(f"value at {i} has no cluster (None)")
        present.append(value)
        labels.append(cluster)
    n = len(present)
    if n == 0:
        return ClusteredSummary(0, 0, None, None, None, None)
    g = len(set(labels))
    stderr = clustered_stderr(present, labels)
    mean = math.fsum(present) / n
    if stderr == 0.0:
        return ClusteredSummary(n, g, mean, 0.0, mean, mean)
    half = t_quantile(0.5 + confidence / 2, g - 1) * stderr
    low, high = mean - half, mean + half
    if all(0.0 <= v <= 1.0 for v in present):
        low, high = max(0.0, low), min(1.0, high)
    return ClusteredSummary(n, g, mean, stderr, low, high)
