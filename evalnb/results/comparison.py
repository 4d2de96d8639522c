"""Paired comparisons of models on the same items: the tables behind "is model A better than B?".

Two models answered the same items, so their per-item differences carry the comparison: the
item-to-item variation both models share cancels out, and the interval is far tighter than two
independent intervals side by side would suggest. ``paired`` gives the table (bootstrap interval,
t stderr, exact McNemar for 0/1 metrics); ``agreement`` gives the item-level view behind it.

Inputs are the long ``scores`` frame (task_id, model, sample_index, metric, value) and the
``samples`` frame of a run. NaN values are "not scored" and never pair. pandas is imported lazily.
The frame helpers at the bottom are shared with ``evalnb.plots`` (not part of ``__all__``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evalnb.results import stats

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["ALL_TASKS", "agreement", "paired", "paired_all"]

ALL_TASKS = "all tasks"
"""``task_id`` of the pooled row of ``paired`` (items keyed by (task_id, sample_index))."""

SCORE_COLUMNS = ("task_id", "model", "sample_index", "metric", "value")
PAIRED_COLUMNS = (
    "model_a", "model_b", "task_id", "metric", "n_pairs", "mean_a", "mean_b", "mean_diff",
    "ci_low", "ci_high", "stderr", "n01", "n10", "mcnemar_p", "note",
)
_NO_OVERLAP = "no item has a score from both models"


def _batch_note(metric: str) -> str:
    return (f"{metric} is a batch metric: grade_batch gives one value per task and model, not a score per "
            "item, so there is nothing to pair; compare the models' values in result.metrics")


def paired(
    scores: pd.DataFrame,
    model_a: str,
    model_b: str,
    *,
    task_id: str | Sequence[str] | None = None,
    metric: str | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
    clusters: Mapping[tuple[str, int], Hashable] | None = None,
    batch_metrics: Iterable[tuple[str, str]] = (),
    unclustered: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """One row per task comparing ``model_a`` with ``model_b`` on the items both were scored on.

    ``mean_diff`` is a − b over paired items (``mean_a``/``mean_b`` are over the same items);
    ``ci_low``/``ci_high`` are the paired percentile bootstrap, ``stderr`` the t stderr of the
    differences. For 0/1 metrics ``n01`` (a wrong, b right), ``n10`` and the exact McNemar p are
    filled in. ``metric=None`` takes each task's first metric. With two or more tasks that share
    the metric, a last row ``task_id == "all tasks"`` pools items keyed by (task_id, sample_index).
    A task where the two models share no scored item gets ``n_pairs == 0``, empty statistics and
    a ``note`` saying why; ``batch_metrics`` names the (task_id, metric) pairs that are batch-grader
    metrics (one value per task and model), for which that is always so.

    ``clusters`` ((task_id, sample_index) -> cluster, e.g. the passage): the differences are
    clustered: ``stderr`` is the CR1 cluster-robust one, the interval ``mean_diff ± t_{G−1} ·
    stderr`` (an item bootstrap would assume independent items) and ``n_clusters`` is added.
    McNemar's test still treats items as independent. ``unclustered`` (task -> note): tasks
    ``clusters`` does not cover; they keep the ordinary statistics and carry the note.
    """
    from evalnb.results.pairing import code_scores

    require_columns(scores, SCORE_COLUMNS, "scores")
    stats.check_resamples(n_resamples)
    if model_a == model_b:
        raise ValueError(f"paired() needs two different models, got {model_a!r} twice")
    coded = code_scores(scores)
    models = sorted(coded.models, key=str)
    for model in (model_a, model_b):
        check_choice(model, models, "model")
    chosen = _ChosenItems(scores, coded, [model_a, model_b], task_id, metric)
    batch = set(batch_metrics)
    rows = _pair_rows(chosen, model_a, model_b, n_resamples, seed, clusters, batch, unclustered)
    if not any(row["n_pairs"] for row in rows):
        where = f"task {task_id!r}" if isinstance(task_id, str) else "any task"
        if rows and all((row["task_id"], row["metric"]) in batch for row in rows):
            raise ValueError(f"models {model_a!r} and {model_b!r} in {where}: {_batch_note(rows[0]['metric'])}")
        raise ValueError(
            f"models {model_a!r} and {model_b!r} have no scored items in common in {where} "
            f"(metric {metric or 'first per task'}); nothing to pair"
        )
    return _paired_table(rows, clusters is not None)


class _ChosenItems:
    """The rows `paired`/`paired_all` compare (the chosen (task, metric) of ``models``), split
    once into per-(task, metric, model) item arrays (`pairing.group_items`)."""

    def __init__(self, scores: pd.DataFrame, coded: Any, models: Sequence[str], task_id: Any, metric: Any) -> None:
        import numpy as np

        from evalnb.results.pairing import group_items

        self.scores, self.models = scores, list(models)
        self.mask = metric_mask(scores, coded.task, coded.tasks, coded.metric, coded.metrics,
                                task_id=task_id, metric=metric, frame_name="scores")
        wanted = [k for k, m in enumerate(coded.models) if m in self.models]
        self.mask &= np.isin(coded.model, wanted)
        self.groups = group_items(coded, self.mask)

    def check_unique(self, model_a: str, model_b: str) -> None:
        """The error `check_unique` gives on the two models' rows, when a group has a key twice."""
        if any(key[2] in (model_a, model_b) for key in self.groups.duplicated):
            rows = self.scores.loc[self.mask]
            check_unique(rows[rows["model"].isin([model_a, model_b])],
                         ("task_id", "model", "metric", "sample_index"), "scores")

    def task_metrics(self, model_a: str, model_b: str) -> list[tuple[Any, Any]]:
        """The (task, metric) pairs either model has rows for, sorted (as a groupby would)."""
        return sorted({(t, m) for t, m, model in self.groups.items if model in (model_a, model_b)})

    def items(self, task: Any, metric: Any, model: str) -> tuple[Any, Any]:
        import numpy as np

        empty = (np.array([], dtype="int64"), np.array([], dtype=float))
        return self.groups.items.get((task, metric, model), empty)


def _pair_rows(
    chosen: _ChosenItems, model_a: str, model_b: str, n_resamples: int, seed: int,
    clusters: Mapping[tuple[str, int], Hashable] | None, batch: Collection[tuple[str, str]] = (),
    unclustered: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The rows of `paired` (per task, then pooled) as dicts, model_a and model_b first.

    Each task's items are paired once (`pairing.pair_items`) and every statistic is read from
    the aligned arrays. A row without pairs gets a ``note``: a batch metric (in ``batch``) has
    no per-item scores. ``unclustered``: task -> why ``clusters`` does not cover it (its rows
    lack the field); such a task gets the ordinary statistics and that reason in ``note``.
    """
    from evalnb.results.pairing import concat, pair_items

    chosen.check_unique(model_a, model_b)
    unclustered = unclustered or {}
    rows: list[dict[str, Any]] = []
    pooled = []
    for task, metric_id in chosen.task_metrics(model_a, model_b):
        pairs = pair_items(*chosen.items(task, metric_id, model_a), *chosen.items(task, metric_id, model_b))
        use = None if clusters is None or task in unclustered else clusters
        row = _paired_row(task, metric_id, pairs, n_resamples, seed, use, [task] * len(pairs.keys))
        if clusters is not None and task in unclustered:
            row["n_clusters"] = None
            row["note"] = unclustered[task]
        if not row["n_pairs"]:
            row["note"] = _batch_note(metric_id) if (task, metric_id) in batch else _NO_OVERLAP
        rows.append(row)
        pooled.append((task, pairs))
    one_metric = len({row["metric"] for row in rows}) == 1
    if len(rows) > 1 and one_metric and all(row["task_id"] != ALL_TASKS for row in rows):
        pairs = concat([p for _, p in pooled])  # tasks in name order, items by index: (task, index) order
        tasks = [t for t, p in pooled for _ in range(len(p.keys))]
        left_out = [t for t, _ in pooled if t in unclustered]
        use = None if clusters is None or left_out else clusters
        row = _paired_row(ALL_TASKS, rows[0]["metric"], pairs, n_resamples, seed, use, tasks)
        if clusters is not None and left_out:
            row["n_clusters"] = None
            row["note"] = f"not clustered: task(s) {', '.join(map(repr, left_out))} are not"
        rows.append(row)
    return [{"model_a": model_a, "model_b": model_b, **r} for r in rows]


def _paired_table(rows: list[dict[str, Any]], clustered: bool) -> pd.DataFrame:
    import pandas as pd

    extra = ["n_clusters"] if clustered else []
    table = pd.DataFrame(rows)
    table = table[list(PAIRED_COLUMNS) + extra + [c for c in ("p_value", "p_holm") if c in table.columns]]
    for column in ("n01", "n10", *extra):
        table[column] = table[column].astype("Int64")
    table["note"] = pd.Series([r["note"] for r in rows], dtype="object", index=table.index)  # None, not NaN
    return table


def paired_all(
    scores: pd.DataFrame,
    models: Sequence[str],
    *,
    task_id: str | Sequence[str] | None = None,
    metric: str | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
    clusters: Mapping[tuple[str, int], Hashable] | None = None,
    batch_metrics: Iterable[tuple[str, str]] = (),
    unclustered: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Every pair of ``models`` (a before b, in the order given) as `paired` rows, with p-values.

    ``p_value``: McNemar's exact p for 0/1 metrics, otherwise a paired t-test on the
    differences (with ``clusters``: a t-test on the CR1 stderr with G − 1 degrees of freedom,
    for every metric). ``p_holm``: Holm-adjusted within each (task_id, metric) family of model
    pairs, so a "best model" claim that survives it holds across all the pairs compared.
    """
    models = [models] if isinstance(models, str) else list(models)
    if len(models) < 2 or len(set(models)) != len(models):
        raise ValueError(f"paired_all() needs two or more distinct models, got {models!r}")
    from evalnb.results.pairing import code_scores

    require_columns(scores, SCORE_COLUMNS, "scores")
    stats.check_resamples(n_resamples)
    coded = code_scores(scores)
    available = sorted(coded.models, key=str)
    for model in models:
        check_choice(model, available, "model")
    chosen = _ChosenItems(scores, coded, models, task_id, metric)  # split once for every pair
    rows: list[dict[str, Any]] = []
    for i, model_a in enumerate(models):
        for model_b in models[i + 1:]:
            rows.extend(_pair_rows(chosen, model_a, model_b, n_resamples, seed, clusters, set(batch_metrics),
                                   unclustered))
    if not any(row["n_pairs"] for row in rows):
        raise ValueError(f"models {', '.join(map(repr, models))} share no scored items; nothing to pair")
    for row in rows:
        row["p_value"] = _p_value(row, clustered=clusters is not None and row.get("n_clusters") is not None)
    families: dict[tuple[str, str], list[int]] = {}
    for i, row in enumerate(rows):
        families.setdefault((row["task_id"], row["metric"]), []).append(i)
    for members in families.values():
        for i, p in zip(members, stats.holm([rows[i]["p_value"] for i in members])):
            rows[i]["p_holm"] = p
    order = {m: k for k, m in enumerate(models)}
    tasks = list(dict.fromkeys(r["task_id"] for r in rows))
    rows.sort(key=lambda r: (tasks.index(r["task_id"]), order[r["model_a"]], order[r["model_b"]]))
    return _paired_table(rows, clusters is not None)


def _p_value(row: dict[str, Any], *, clustered: bool) -> float:
    """McNemar for 0/1 metrics (unclustered), else the two-sided t-test of mean_diff / stderr."""
    if not clustered and not math.isnan(row["mcnemar_p"]):
        return row["mcnemar_p"]
    n, mean, stderr = row["n_pairs"], row["mean_diff"], row["stderr"]
    df = (row["n_clusters"] if clustered else n) - 1
    if n < 2 or math.isnan(stderr) or df < 1:
        return math.nan
    if stderr == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    return stats.t_two_sided_p(mean / stderr, df)


def _paired_row(
    task: str, metric: str, pairs: Any, n_resamples: int, seed: int,
    clusters: Mapping[tuple[str, int], Hashable] | None, tasks: Sequence[str],
) -> dict[str, Any]:
    """One row of `paired` from aligned pairs; ``tasks[i]`` is the task of pair i (for its cluster)."""
    from evalnb.results.pairing import paired_statistics

    row: dict[str, Any] = {"task_id": task, "metric": metric, "note": None}
    row.update(paired_statistics(pairs, n_resamples=None if clusters is not None else n_resamples, seed=seed))
    if clusters is None:
        return row
    row["n_clusters"] = 0
    if row["n_pairs"]:
        labels = [clusters.get((t, k)) for t, k in zip(tasks, pairs.keys.tolist())]
        row.update(_clustered_interval(task, metric, (pairs.a - pairs.b).tolist(), labels))
    return row


def _clustered_interval(task: str, metric: str, diffs: list[float], labels: list[Hashable]) -> dict[str, Any]:
    """CR1 stderr of the per-item differences and the 95% t_{G-1} interval around their mean."""
    from evalnb.results.cluster_robust import clustered_stderr

    if None in labels:
        raise ValueError(f"task {task!r}: {labels.count(None)} paired item(s) have no cluster")
    g = len(set(labels))
    if g < 2:
        raise ValueError(f"task {task!r}, metric {metric!r}: all {len(diffs)} paired items are in one cluster "
                         f"({labels[0]!r}); clustered errors need at least 2 clusters")
    mean = math.fsum(diffs) / len(diffs)
    stderr = clustered_stderr(diffs, labels)
    half = stats.t_quantile(0.975, g - 1) * stderr
    return {"stderr": stderr, "ci_low": mean - half, "ci_high": mean + half, "n_clusters": g}


def agreement(
    scores: pd.DataFrame,
    samples: pd.DataFrame | None,
    models: Sequence[str],
    *,
    task_id: str | Sequence[str] | None = None,
    metric: str | None = None,
) -> pd.DataFrame:
    """Item-level table: each model's value and extracted output on the items all of them have.

    Columns: task_id, sample_index, metric, ``value:<model>`` and ``output:<model>`` per model
    (in the order given), ``agree`` (True when every model has the same value, NA when one is not
    scored) and ``flip`` — for exactly two models and a 0/1 metric, "both", "a_only" (only the
    first model scored 1), "b_only" or "neither"; otherwise None. Sorted by task and item.
    ``table.attrs["all_models"]`` lists every model of ``scores`` (for consistent colours).
    """
    import pandas as pd

    require_columns(scores, SCORE_COLUMNS, "scores")
    models = list(models) if not isinstance(models, str) else [models]
    if len(models) < 2 or len(set(models)) != len(models):
        raise ValueError(f"agreement() needs two or more distinct models, got {models!r}")
    available = sorted_unique(scores["model"])
    for model in models:
        check_choice(model, available, "model")
    chosen = select_metric_rows(scores, task_id=task_id, metric=metric, frame_name="scores")
    chosen = chosen[chosen["model"].isin(models)]
    check_unique(chosen, ("task_id", "model", "metric", "sample_index"), "scores")

    keys = ["task_id", "metric", "sample_index"]
    present = chosen.groupby(keys)["model"].nunique()
    common = present[present == len(models)].index
    wide = chosen.pivot(index=keys, columns="model", values="value").reindex(columns=models)
    wide = wide.loc[wide.index.isin(common)]
    if wide.empty:
        raise ValueError(
            f"models {', '.join(map(repr, models))} share no items"
            f" (task {task_id or 'any'}, metric {metric or 'first per task'})"
        )
    table = wide.reset_index().rename(columns={m: f"value:{m}" for m in models})
    table = table[["task_id", "sample_index", "metric", *[f"value:{m}" for m in models]]]
    for model in models:
        table[f"output:{model}"] = _outputs(samples, model, table)
    values = table[[f"value:{m}" for m in models]].astype(float)
    missing = values.isna().any(axis=1)
    same = values.nunique(axis=1, dropna=False) == 1
    table["agree"] = pd.array([None if m else bool(s) for m, s in zip(missing, same, strict=True)],
                              dtype="boolean")
    table["flip"] = _flips(values, models, table["task_id"])
    table = table.sort_values(["task_id", "sample_index"], kind="stable").reset_index(drop=True)
    table.attrs["all_models"] = available  # so plots colour models as in the run's other figures
    return table


def _outputs(samples: pd.DataFrame | None, model: str, table: pd.DataFrame) -> list[str | None]:
    if samples is None:
        return [None] * len(table)
    require_columns(samples, ("task_id", "model", "sample_index", "extracted_output"), "samples")
    part = samples[samples["model"] == model]
    lookup = {
        (t, i): (None if _missing(o) else o)
        for t, i, o in zip(part["task_id"], part["sample_index"], part["extracted_output"],
                           strict=True)
    }
    return [lookup.get((t, i)) for t, i in zip(table["task_id"], table["sample_index"],
                                               strict=True)]


def _flips(values: pd.DataFrame, models: list[str], tasks: pd.Series) -> list[str | None]:
    """Flip kinds for two models, per task only where that task's values are all 0/1."""
    if len(models) != 2:
        return [None] * len(values)
    binary_tasks = {
        task for task, part in values.groupby(tasks.to_numpy())
        if all_binary(part)
    }
    kinds = {(1.0, 1.0): "both", (1.0, 0.0): "a_only", (0.0, 1.0): "b_only", (0.0, 0.0): "neither"}
    out: list[str | None] = []
    for task, a, b in zip(tasks, values.iloc[:, 0], values.iloc[:, 1], strict=True):
        out.append(kinds.get((a, b)) if task in binary_tasks else None)
    return out


# ------------------------------------------------------------------ frame helpers (shared)


def require_columns(frame: Any, columns: Iterable[str], name: str) -> None:
    """A clear error when a frame is not a DataFrame or lacks columns (instead of a KeyError)."""
    if not hasattr(frame, "columns"):
        raise TypeError(f"{name} must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{name} frame is missing column(s) {', '.join(missing)}; "
            f"it has: {', '.join(map(str, frame.columns))}"
        )


def sorted_unique(series: Any) -> list[Any]:
    return sorted(series.dropna().unique().tolist(), key=str)


def check_choice(value: Any, available: Sequence[Any], what: str, where: str = "") -> None:
    if value not in available:
        shown = ", ".join(map(repr, available)) or "none"
        raise ValueError(f"unknown {what} {value!r}{where}; available: {shown}")


def check_unique(frame: pd.DataFrame, keys: Sequence[str], name: str) -> None:
    dup = frame.duplicated(list(keys), keep=False)
    if dup.any():
        first = frame.loc[dup, list(keys)].iloc[0].to_dict()
        raise ValueError(f"{name} frame has more than one row for {first}")


def select_metric_rows(
    frame: pd.DataFrame,
    *,
    task_id: str | Sequence[str] | None,
    metric: str | None,
    frame_name: str,
) -> pd.DataFrame:
    """The rows of the chosen tasks, each restricted to one metric (given, or its first one).

    With ``metric`` given, tasks that lack it are skipped, unless the task was asked for by name
    (then it is an error naming the task and its metrics).
    """
    from evalnb.results.pairing import codes

    task, tasks = codes(frame["task_id"])
    metric_codes, metrics = codes(frame["metric"])
    return frame.loc[metric_mask(frame, task, tasks, metric_codes, metrics, task_id=task_id, metric=metric,
                                 frame_name=frame_name)]


def metric_mask(
    frame: pd.DataFrame, task: Any, tasks: list[Any], metric_codes: Any, metrics: list[Any], *,
    task_id: str | Sequence[str] | None, metric: str | None, frame_name: str,
) -> Any:
    """`select_metric_rows` as a boolean row mask, from the factorised task_id and metric columns
    (codes into ``tasks``/``metrics``, -1 = missing): a few integer passes, no string compares."""
    import numpy as np
    import pandas as pd

    available = sorted(tasks, key=str)
    if task_id is None:
        wanted = available
    else:
        wanted = [task_id] if isinstance(task_id, str) else list(task_id)
        for name in wanted:
            check_choice(name, available, "task")
    width = max(len(metrics), 1)
    pair = np.where((task >= 0) & (metric_codes >= 0), task * width + metric_codes, -1)
    metrics_of: dict[Any, list[Any]] = {}  # each task's metrics in order of appearance
    for code in pd.unique(pair).tolist():  # distinct codes in order of appearance
        if code >= 0:
            metrics_of.setdefault(tasks[code // width], []).append(metrics[code % width])
    keep: list[int] = []
    for name in wanted:
        task_metrics = metrics_of.get(name, [])
        if metric is None:
            keep.append(tasks.index(name) * width + metrics.index(task_metrics[0]))
        elif metric in task_metrics:
            keep.append(tasks.index(name) * width + metrics.index(metric))
        elif task_id is not None:
            check_choice(metric, task_metrics, "metric", f" for task {name!r}")
    if not keep:
        every = sorted_unique(frame.loc[frame["task_id"].isin(wanted), "metric"])
        check_choice(metric, every, "metric", f" in the {frame_name} frame")
    return np.isin(pair, keep)


def all_binary(values: pd.DataFrame) -> bool:
    """True when every present (non-NaN) value is 0 or 1."""
    flat = values.to_numpy(dtype=float).ravel()
    present = flat[flat == flat]  # NaN != NaN
    return bool(((present == 0.0) | (present == 1.0)).all())


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or (
        type(value).__name__ == "NAType"
    )
