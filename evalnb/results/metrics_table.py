"""The `metrics` table of a run, one (task, model) at a time: n, n_failed, n_unscored, mean, intervals.

Pure functions over the lean score frame (`frames.lean_frame`): `RunResult.metrics` and
`summarize` call `task_model_rows` for every (task, model) and stack the rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["task_model_rows"]


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def task_model_rows(
    task: str, model: str, part: pd.DataFrame | None, specs: list[dict[str, Any]], columns: Mapping[str, str],
    batch: Mapping[str, Any], batch_ids: list[str], *, epochs: int = 1, confidence: float = 0.95,
    clusters: Mapping[tuple[str, int], Any] | None = None, cluster_by: str | None = None,
    n_missing_field: int = 0, planned: int | None = None,
) -> list[dict[str, Any]]:
    """The metrics rows of one (task, model): sample metrics, then batch metrics over them.

    Each item is reduced to one score first (its mean over epochs); with ``clusters`` the
    stderr is the CR1 cluster-robust one over those item scores. ``n_unscored`` counts the
    samples that neither failed nor have a value: the grader returned None/NaN for the
    metric, or a stopped run never graded them. ``n_not_run`` counts the samples never run: those
    marked so (a stopped model or task) and, against ``planned``, those a cancelled or
    budget-stopped run never reached.
    """
    from evalnb.results import stats
    from evalnb.results.epochs import item_values, pass_at_k_ks, pass_at_k_means

    done = part[part["status"] == "completed"] if part is not None else None
    n_done = 0 if done is None else int(done["sample_index"].nunique())
    ks = pass_at_k_ks(epochs)
    if part is None:
        failed = kept = None
        n_failed = n_marked = 0
    else:
        failed = part["status"] == "failed"
        not_run = part["status"] == "not_run"
        kept = part[~failed & ~not_run]  # scored or unscored
        n_failed, n_marked = int(failed.sum()), int(not_run.sum())
    stored = 0 if part is None else len(part)
    n_not_run = n_marked + (max(planned - stored, 0) if planned is not None else 0)
    base = {"task_id": task, "model": model, "n_failed": n_failed, "n_not_run": n_not_run,
            "n_missing_field": n_missing_field,
            "epochs": epochs, "stderr": math.nan, "ci_low": math.nan, "ci_high": math.nan, "aggregation": "mean",
            "error": None, "n_clusters": None, **{f"pass_at_{k}": math.nan for k in ks}}
    better = {spec["id"]: bool(spec["higher_is_better"]) for spec in specs}
    rows: dict[str, dict[str, Any]] = {}
    for spec in specs:
        metric = spec["id"]
        values = item_values(done, columns[metric], epochs) if done is not None and metric in columns else None
        if clusters is None or spec["aggregation"] == "none":
            summary = stats.summarize([] if values is None else values.to_numpy(dtype="float64"),
                                      aggregation=spec["aggregation"], confidence=confidence)
            n_clusters = summary.n
        else:
            summary = _clustered(task, model, metric, values, clusters, cluster_by, confidence)
            n_clusters = summary.n_clusters
        rows[metric] = {**base, "metric": metric, "n": summary.n, "n_unscored": _unscored(kept, columns.get(metric)),
                        "mean": _nan(summary.mean),
                        "stderr": _nan(summary.stderr), "ci_low": _nan(summary.ci_low), "ci_high": _nan(summary.ci_high),
                        "higher_is_better": better[metric], "aggregation": spec["aggregation"], "source": "samples",
                        "n_clusters": n_clusters}
        if ks and values is not None:
            rows[metric].update({f"pass_at_{k}": v for k, v in pass_at_k_means(done, columns[metric], ks).items()})
    n_ungraded = 0 if kept is None else int((kept["status"] != "completed").sum())
    for metric, value in (batch.get("metrics") or {}).items():  # final task metrics win
        rows[metric] = {**base, "metric": metric, "n": n_done, "n_unscored": n_ungraded, "source": "batch",
                        "mean": _nan(value if isinstance(value, (int, float)) else None),
                        "higher_is_better": better.get(metric, True)}
    if batch.get("error"):
        for metric in [] if rows else batch_ids:  # failed before reporting: the metrics other models got
            rows[metric] = {**base, "metric": metric, "n": 0, "n_unscored": 0 if kept is None else len(kept),
                            "mean": math.nan,
                            "source": "batch", "higher_is_better": better.get(metric, True)}
        for row in rows.values():
            row["error"] = batch["error"]
    return list(rows.values())


def _unscored(kept: pd.DataFrame | None, column: str | None) -> int:
    """Samples that did not fail but have no value in ``column``: not graded, or graded None/NaN."""
    if kept is None:
        return 0
    if column is None:
        return len(kept)
    return int(((kept["status"] != "completed") | kept[column].isna()).sum())


def _clustered(task: str, model: str, metric: str, values: pd.Series | None,
               clusters: Mapping[tuple[str, int], Any], cluster_by: str | None, confidence: float) -> Any:
    """`clustered_summary` of one metric's item scores, with an error that names where it failed."""
    from evalnb.results.cluster_robust import clustered_summary

    if values is None:
        return clustered_summary([], [], confidence=confidence)
    present = values.dropna()
    labels = [clusters[(task, int(i))] for i in present.index]
    found = set(labels)
    if len(present) and len(found) < 2:
        raise ValueError(
            f"task {task!r}, model {model!r}, metric {metric!r}: all {len(present)} scored items have the same "
            f"{cluster_by!r} ({next(iter(found))!r}); clustered errors need at least 2 clusters"
        )
    return clustered_summary(present.tolist(), labels, confidence=confidence)
