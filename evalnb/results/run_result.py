"""`RunResult`: one run's samples, scores and metrics as pandas DataFrames, and a compact report.

A RunResult is a snapshot: it reads the store once, lazily (samples on first use), and
`refresh()` reads it again. Metric definitions (id, aggregation, higher_is_better) come from
the suite manifest stored with the run, read as a plain dict.

Frames (pandas is imported only when one is built):
- `samples`: one row per (task, model, item, epoch). Each score is a column named by its
  metric id (`df["accuracy"].mean()`); a metric id that would clash with a fixed column
  (`target`, `status`, ...) becomes `score:<id>`, and `metric_columns` maps ids to columns.
- `scores`: long form (task_id, model, sample_index, metric, value), one row per *item*: with
  epochs, the item's mean over its scored epochs; NaN = not scored. The input of
  `evalnb.results.comparison`, `diff` and `evalnb.plots`.
- `metrics`: one row per (task, model, metric): n (items), n_failed, n_unscored,
  n_missing_field, epochs, mean, stderr, 95% CI, and pass@k for 0/1 metrics of a run with
  epochs. `summarize()` is the same table with other intervals or clustered errors. n_failed
  and n_unscored count samples (asks): with one epoch, every sample of a (task, model) is in
  exactly one of n, n_failed and n_unscored; n_missing_field counts the prompts that had a
  `{{field}}` their row lacks.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

from evalnb.results.judging import JudgeCostViews
from evalnb.results.report_views import ReportViews

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from evalnb.store import Store

__all__ = ["METRICS_COLUMNS", "SAMPLE_COLUMNS", "RunResult", "metric_specs"]

from evalnb.results.frames import SAMPLE_COLUMNS, lean_frame, metric_columns, metric_specs, samples_frame  # noqa: E402

METRICS_COLUMNS = (
    "task_id", "model", "metric", "n", "n_failed", "n_unscored", "n_missing_field", "epochs", "mean", "stderr",
    "ci_low", "ci_high", "higher_is_better", "aggregation", "source", "error",
)
_SCORE_COLUMNS = ("task_id", "model", "sample_index", "metric", "value")


def _columns(samples: Iterable[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Sample dicts as the columns `Store.sample_columns` gives (missing fields are None)."""
    from evalnb.store import SAMPLE_FIELDS

    columns: dict[str, list[Any]] = {f: [] for f in SAMPLE_FIELDS}
    for s in samples:
        for field, values in columns.items():
            values.append(s.get(field))
    return columns


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _task_model_rows(
    task: str, model: str, part: pd.DataFrame | None, specs: list[dict[str, Any]], columns: Mapping[str, str],
    batch: Mapping[str, Any], batch_ids: list[str], *, epochs: int = 1, confidence: float = 0.95,
    clusters: Mapping[tuple[str, int], Any] | None = None, cluster_by: str | None = None,
    n_missing_field: int = 0,
) -> list[dict[str, Any]]:
    """The metrics rows of one (task, model): sample metrics, then batch metrics over them.

    Each item is reduced to one score first (its mean over epochs); with ``clusters`` the
    stderr is the CR1 cluster-robust one over those item scores. ``n_unscored`` counts the
    samples that neither failed nor have a value: the grader returned None/NaN for the
    metric, or a stopped run never graded them.
    """
    from evalnb.results import stats
    from evalnb.results.epochs import item_values, pass_at_k_ks, pass_at_k_means

    done = part[part["status"] == "completed"] if part is not None else None
    n_done = 0 if done is None else int(done["sample_index"].nunique())
    ks = pass_at_k_ks(epochs)
    if part is None:
        failed = kept = None
        n_failed = 0
    else:
        failed = part["status"] == "failed"
        kept = part[~failed]  # scored or unscored
        n_failed = int(failed.sum())
    base = {"task_id": task, "model": model, "n_failed": n_failed, "n_missing_field": n_missing_field,
            "epochs": epochs, "stderr": math.nan, "ci_low": math.nan, "ci_high": math.nan, "aggregation": "mean",
            "error": None, "n_clusters": None, **{f"pass_at_{k}": math.nan for k in ks}}
    better = {spec["id"]: bool(spec["higher_is_better"]) for spec in specs}
    rows: dict[str, dict[str, Any]] = {}
    for spec in specs:
        metric = spec["id"]
        values = item_values(done, columns[metric], epochs) if done is not None and metric in columns else None
        if clusters is None or spec["aggregation"] == "none":
            summary = stats.summarize([] if values is None else values.tolist(), aggregation=spec["aggregation"],
                                      confidence=confidence)
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
    from evalnb.results.clustered import clustered_summary

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


class RunResult(JudgeCostViews, ReportViews):
    """The results of one run: `samples`, `scores` and `metrics` DataFrames, `paired`, `compare`.

    `RunResult(store, run_id)` reads a stored run (`store` may also be a path, or None for the
    default store); `RunResult.from_data(...)` wraps samples that never touched a store.
    """

    def __init__(self, store: Store | str | os.PathLike[str] | None, run_id: str) -> None:
        from evalnb.store import Store

        self._store = store if isinstance(store, Store) else Store(store)
        self._run_id = run_id
        self._sample_source: Iterable[Mapping[str, Any]] | None = None
        self.interrupted = False  # set by the run that made it: stopped by Ctrl-C / a cancelled task
        self._load()

    @classmethod
    def from_data(
        cls,
        samples: Iterable[Mapping[str, Any]],
        *,
        run: Mapping[str, Any] | None = None,
        manifest: Mapping[str, Any] | None = None,
        task_metrics: Iterable[Mapping[str, Any]] | None = None,
    ) -> RunResult:
        """A result built from sample dicts (the store's shape); without a manifest every score
        key becomes a metric (mean, higher is better)."""
        self = cls.__new__(cls)
        self.interrupted = False
        self._store = None
        self._run = dict(run or {})
        self._run_id = self._run.get("run_id")
        self._manifest = dict(manifest) if manifest is not None else None
        self._task_metrics = [dict(t) for t in task_metrics or []]
        self._sample_source = list(samples)
        return self

    def _load(self) -> None:
        from evalnb.store import UnknownSuiteError

        assert self._store is not None
        self._run = self._store.get_run(self._run_id)
        try:
            self._manifest = self._store.get_suite(self._run["suite_version"])
        except UnknownSuiteError:
            self._manifest = None
        self._task_metrics = self._store.task_metrics(self._run_id)

    def refresh(self) -> RunResult:
        """Read the run again (for a run still in progress); returns self."""
        if self._store is not None:
            self._load()
        for name in ("samples", "scores", "metrics", "metric_columns", "_frame", "_lean", "judge_calls", "costs"):
            self.__dict__.pop(name, None)
        return self

    # ---- the run record -------------------------------------------------------------------------
    @property
    def run_id(self) -> str | None:
        return self._run_id

    @property
    def status(self) -> str | None:
        return self._run.get("status")

    @property
    def name(self) -> str | None:
        """The run's name (``evalnb.run(..., name=...)``), or None."""
        return self._run.get("name")

    @property
    def run(self) -> dict[str, Any]:
        """The stored run record (models, generation, versions, counts, ...)."""
        return dict(self._run)

    @property
    def epochs(self) -> int:
        """How many times the run asked each item (1 unless it was run with ``epochs=K``)."""
        from evalnb.results.epochs import epoch_count

        return epoch_count(self._lean[0], self._run.get("epochs"))

    @property
    def models(self) -> list[str]:
        """Model labels in run order, then any other label found in the samples."""
        labels = [m["label"] if isinstance(m, Mapping) else str(m) for m in self._run.get("models") or []]
        return labels + sorted(set(self._lean[0]["model"].unique()) - set(labels))

    @property
    def task_ids(self) -> list[str]:
        """Tasks in run order (the run's task_ids, else the manifest's), then any other found in the samples."""
        ids = list(self._run.get("task_ids") or metric_specs(self._manifest))
        return ids + sorted(set(self._lean[0]["task_id"].unique()) - set(ids))

    def _specs(self) -> dict[str, list[dict[str, Any]]]:
        """Each task's metrics: the declared ones (SPEC: metrics say which score keys count).

        A task that declares none gets the grader's default `metric_id` plus every other score
        key its grader returned; the default is left out when the grader never returned it.
        """
        specs = metric_specs(self._manifest)
        declared = {t.get("id") for t in (self._manifest or {}).get("tasks", []) if t.get("metrics")}
        frame, columns = self._lean
        for task in frame["task_id"].unique():
            found = self._score_keys.get(task, [])
            current = specs.get(task, [])
            known = {m["id"] for m in current}
            extra = [k for k in found if k not in known] if task not in declared else []
            if extra:
                current = [m for m in current if m["id"] in found]
            specs[task] = current + [{"id": k, "aggregation": "mean", "higher_is_better": True} for k in extra]
        return specs

    # ---- frames -----------------------------------------------------------------------------
    @cached_property
    def _lean(self) -> tuple[pd.DataFrame, dict[str, str]]:
        """(scores frame, metric id -> column): keys, status and a float column per metric, no texts.

        Everything `metrics`, `summarize`, `scores` and the comparisons need. A stored run is read
        from its key, status and scores columns a page at a time (~50 bytes a sample), so a
        million-sample run is summarised without ever building `samples`.
        """
        if self._store is None:  # from_data: the samples are in memory anyway
            frame, columns = self._frame
            return frame[["task_id", "model", "sample_index", "epoch", "status", *columns.values()]], columns
        frame, columns, self._score_keys = lean_frame(self._store, self._run_id, self._manifest)
        return self._run_order(frame), columns

    def _run_order(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Rows in run order (tasks, then models, as the run listed them), then by item and epoch;
        the store reads them sorted by name, often the same order, and then nothing moves."""
        import numpy as np
        import pandas as pd

        tasks = list(self._run.get("task_ids") or metric_specs(self._manifest))
        tasks += sorted(set(frame["task_id"].unique()) - set(tasks))
        models = [m["label"] if isinstance(m, Mapping) else str(m) for m in self._run.get("models") or []]
        models += sorted(set(frame["model"].unique()) - set(models))
        task_rank = pd.Categorical(frame["task_id"], categories=tasks).codes
        model_rank = pd.Categorical(frame["model"], categories=models).codes
        order = np.lexsort((frame["epoch"].to_numpy(), frame["sample_index"].to_numpy(), model_rank, task_rank))
        if (order != np.arange(len(order))).any():
            frame = frame.take(order).reset_index(drop=True)
        return frame

    @cached_property
    def _frame(self) -> tuple[pd.DataFrame, dict[str, str]]:
        """(samples frame, metric id -> column) built in one pass over the samples."""
        if self._sample_source is not None:
            cols = _columns(self._sample_source)
            keys_by_task: dict[str, dict[str, None]] = {}
            for task_id, sc in zip(cols["task_id"], cols["scores"]):
                if isinstance(sc, Mapping) and sc:
                    keys_by_task.setdefault(task_id, {}).update(dict.fromkeys(sc))
            self._score_keys = {t: list(k) for t, k in keys_by_task.items()}
            columns = metric_columns(self._manifest, keys_by_task)
        else:
            assert self._store is not None
            columns = self._lean[1]
            cols = self._store.sample_columns(self._run_id)
        frame = self._run_order(samples_frame(cols, columns, self._judge_costs()))
        self._cached_input = frame.pop("_cached_input").to_numpy()
        return frame, columns

    def iter_samples(self, batch_size: int = 50_000) -> Iterator[pd.DataFrame]:
        """`samples` a page at a time: the same columns and row order, at most `batch_size` rows each.

        For a run too big for one frame (a million samples of `samples` take ~1.5 GB): each
        page is read from the store when it is reached, one (task, model) at a time.
        """
        if self._store is None:
            frame = self.samples
            for start in range(0, len(frame), batch_size):
                yield frame.iloc[start:start + batch_size].reset_index(drop=True)
            return
        from evalnb.store import SAMPLE_FIELDS

        columns = self._lean[1]
        for task in self.task_ids:
            for model in self.models:
                for page in self._store.column_pages(self._run_id, SAMPLE_FIELDS, task_id=task, model=model,
                                                     batch_size=batch_size):
                    yield samples_frame(page, columns, self._judge_costs()).drop(columns="_cached_input")

    def samples_page(self, page: int, page_size: int = 10_000) -> pd.DataFrame:
        """Rows ``page * page_size`` to ``(page + 1) * page_size`` of `samples`, read alone."""
        import pandas as pd

        if isinstance(page, bool) or not isinstance(page, int) or page < 0:
            raise ValueError(f"page must be an integer >= 0, got {page!r}")
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"page_size must be a positive integer, got {page_size!r}")
        start, parts, seen = page * page_size, [], 0
        for frame in self.iter_samples(batch_size=page_size):
            end = seen + len(frame)
            if end > start:
                parts.append(frame.iloc[max(0, start - seen):start + page_size - seen])
                if sum(len(p) for p in parts) >= page_size:
                    break
            seen = end
        if not parts:
            return self.samples.iloc[0:0] if self._store is None else samples_frame(
                {f: [] for f in self._frame_fields()}, self._lean[1]).drop(columns="_cached_input")
        return pd.concat(parts, ignore_index=True).iloc[:page_size]

    @staticmethod
    def _frame_fields() -> tuple[str, ...]:
        from evalnb.store import SAMPLE_FIELDS

        return SAMPLE_FIELDS

    @cached_property
    def samples(self) -> pd.DataFrame:
        """One row per (task, model, item, epoch); see the module docstring for the columns.

        `prompt` is an object column whose rows share one str per distinct prompt (every model
        of an item has the same one), so a large run's frame holds each prompt once.
        """
        return self._frame[0]

    @cached_property
    def metric_columns(self) -> dict[str, str]:
        """Metric id -> its column in `samples` (the id itself unless it clashed)."""
        return dict(self._lean[1])

    @cached_property
    def scores(self) -> pd.DataFrame:
        """Long form: one row per (item, metric of its task); value NaN = not scored.

        Metrics of a task are its declared ones, then any other score key its samples carry;
        samples that are not `completed` are NaN, as in `metrics`. With epochs, an item's
        value is its mean over its scored epochs (what `paired`, `diff` and the plots compare).
        """
        import pandas as pd

        frame, columns = self._lean
        specs = self._specs()
        parts = []
        for task in self.task_ids:
            ids = [m["id"] for m in specs.get(task, [])]
            ids += [k for k in self._score_keys.get(task, []) if k not in ids]
            rows = frame[frame["task_id"] == task]
            for metric in ids:
                part = rows[["task_id", "model", "sample_index"]].copy()
                part["metric"] = metric
                # only finished, graded samples have scores; anything else is "not scored"
                value = rows[columns[metric]].where(rows["status"] == "completed") if metric in columns else math.nan
                part["value"] = value
                parts.append(part)
        if not parts:
            return pd.DataFrame({c: [] for c in _SCORE_COLUMNS}).astype({"value": "float64"})
        table = pd.concat(parts, ignore_index=True)
        if frame["epoch"].any():  # several asks of an item: one score per item, the mean of its epochs
            keys = ["task_id", "model", "sample_index", "metric"]
            table = table.groupby(keys, sort=False)["value"].mean().reset_index()
        return table.reset_index(drop=True)

    @cached_property
    def metrics(self) -> pd.DataFrame:
        """One row per (task, model, metric): n, n_failed, n_unscored, n_missing_field, epochs, mean, ...

        Only completed samples count. Each item is reduced to one score first (its mean over
        its epochs), so `n` counts items with a value and `stderr` is over those item scores;
        `n_failed` counts failed samples (every failed ask) and `n_unscored` the samples that
        neither failed nor have a value (the grader returned None/NaN, or a stopped run never
        graded them): with one epoch, n + n_failed + n_unscored is every sample of the task
        and model. `n_missing_field` counts the samples whose prompt or target template named a
        field their row lacks (rendered as ""). `aggregation: "none"` reports n alone. A batch
        grader's metrics replace same-named rows (source "batch", no stderr or interval) and
        its error is shown on every row of that task and model. A run with epochs also gets
        ``pass_at_<k>`` columns for 0/1 metrics (`evalnb.results.epochs`).
        """
        return self._metrics_table().drop(columns="n_clusters")

    def summarize(self, *, cluster_by: str | None = None, confidence: float = 0.95) -> pd.DataFrame:
        """The `metrics` table at another ``confidence``, or with errors clustered by a row field.

        ``cluster_by``: a field of the untouched dataset row (a dotted path such as
        ``"meta.passage_id"`` is allowed) shared by items that are not independent, e.g. the
        passage several questions are asked about. The stderr is then the CR1 cluster-robust
        one over item scores, ``sqrt(G/(G-1) · Σ_g (Σ_{i∈g}(s_i − s̄))²) / n``, and the interval
        ``mean ± t_{G−1} · stderr`` (clipped to [0, 1] for scores in [0, 1]). Column
        ``n_clusters`` gives G (= n without clustering). ``summarize()`` is `metrics` plus
        ``n_clusters``. A row without the field, or a task whose items share one cluster,
        is a ValueError naming the task and row.
        """
        from evalnb.results.clusters import check_path
        from evalnb.results.stats import _check_confidence

        _check_confidence(confidence)
        clusters = None
        if cluster_by is not None:
            check_path(cluster_by)
            clusters = self._cluster_keys(cluster_by)
        return self._metrics_table(confidence=confidence, clusters=clusters, cluster_by=cluster_by)

    def _metrics_table(self, *, confidence: float = 0.95, clusters: Mapping[tuple[str, int], Any] | None = None,
                       cluster_by: str | None = None) -> pd.DataFrame:
        import pandas as pd

        from evalnb.results.epochs import pass_at_k_ks

        frame, columns = self._lean
        missing = self._missing_field_counts()
        specs = self._specs()
        epochs = self.epochs
        batch = {(t["task_id"], t["model"]): t for t in self._task_metrics}
        batch_ids: dict[str, list[str]] = {}  # metric ids any model's batch grader reported, per task
        for entry in self._task_metrics:
            ids = batch_ids.setdefault(entry["task_id"], [])
            ids.extend(k for k in entry.get("metrics") or {} if k not in ids)
        groups = dict(iter(frame.groupby(["task_id", "model"], sort=False)))
        rows: list[dict[str, Any]] = []
        for task in self.task_ids:
            for model in self.models:
                part = groups.get((task, model))
                rows.extend(_task_model_rows(task, model, part, specs.get(task, []), columns,
                                             batch.get((task, model)) or {}, batch_ids.get(task) or ["score"],
                                             epochs=epochs, confidence=confidence, clusters=clusters,
                                             cluster_by=cluster_by, n_missing_field=missing.get((task, model), 0)))
        order = list(METRICS_COLUMNS)
        order.insert(order.index("n") + 1, "n_clusters")
        order += [f"pass_at_{k}" for k in pass_at_k_ks(epochs)]
        table = pd.DataFrame.from_records(rows, columns=order)
        table["error"] = pd.Series([r["error"] for r in rows], dtype="object")
        table["n_clusters"] = pd.array([r.get("n_clusters") for r in rows], dtype="Int64")
        return table.astype({"n": "int64", "n_failed": "int64", "n_unscored": "int64", "n_missing_field": "int64",
                             "epochs": "int64", "mean": "float64", "stderr": "float64", "ci_low": "float64",
                             "ci_high": "float64", "higher_is_better": "bool"})

    # ---- comparisons ----------------------------------------------------------------------------
    def _clusters(self, cluster_by: str | None) -> dict[tuple[str, int], Any] | None:
        if cluster_by is None:
            return None
        return self._cluster_keys(cluster_by)

    def _row_pages(self, status: str | None = None) -> Iterator[pd.DataFrame]:
        """(task_id, model, sample_index, status, dataset_row) of the samples, a page at a time."""
        import pandas as pd

        if self._store is None:
            frame = self._frame[0]
            part = frame if status is None else frame[frame["status"] == status]
            yield part[["task_id", "model", "sample_index", "status", "dataset_row"]]
            return
        fields = ["task_id", "model", "sample_index", "status", "dataset_row"]
        for page in self._store.column_pages(self._run_id, fields, status=status):
            yield pd.DataFrame(page)

    def _cluster_keys(self, cluster_by: str) -> dict[tuple[str, int], Any]:
        from evalnb.results.clusters import cluster_keys

        keys: dict[tuple[str, int], Any] = {}
        for page in self._row_pages("completed"):
            keys.update(cluster_keys(page, cluster_by))
        return keys

    def _missing_field_counts(self) -> dict[tuple[str, str], int]:
        from evalnb.results.missing import missing_field_counts

        counts: dict[tuple[str, str], int] = {}
        for page in self._row_pages():
            for key, n in missing_field_counts(page, self._manifest).items():
                counts[key] = counts.get(key, 0) + n
        return counts

    def paired(
        self,
        model_a: str,
        model_b: str,
        *,
        task_id: str | None = None,
        metric: str | None = None,
        n_resamples: int = 2000,
        seed: int = 0,
        cluster_by: str | None = None,
    ) -> pd.DataFrame:
        """Per-task paired differences a - b on the items both models were scored on.

        Bootstrap interval, t stderr and, for 0/1 metrics, exact McNemar (see
        `evalnb.results.comparison.paired`); `metric=None` takes each task's first metric.
        With epochs, each item's score is its mean over epochs. ``cluster_by`` (a dataset-row
        field, as in `summarize`) clusters the per-item differences: CR1 stderr, a t_{G-1}
        interval and an ``n_clusters`` column. A batch-grader metric has no per-item scores: its
        row says so in ``note`` (and asking for it alone is a ValueError saying so).
        """
        from evalnb.results.comparison import paired

        return paired(self.scores, model_a, model_b, task_id=task_id, metric=metric, n_resamples=n_resamples,
                      seed=seed, clusters=self._clusters(cluster_by), batch_metrics=self._batch_metrics())

    def _batch_metrics(self) -> set[tuple[str, str]]:
        """(task_id, metric) of task-level metrics: a batch grader's, reported or declared."""
        found = {(t["task_id"], m) for t in self._task_metrics for m in (t.get("metrics") or {})}
        for task in (self._manifest or {}).get("tasks") or []:
            grader = task.get("grader") or {}
            execution = grader.get("execution") or ("aggregate" if grader.get("contract") == "batch" else None)
            if execution == "aggregate":
                found.update((task["id"], m.get("id") if isinstance(m, Mapping) else str(m))
                             for m in task.get("metrics") or [])
        return found

    def paired_all(
        self,
        models: list[str] | None = None,
        *,
        task_id: str | None = None,
        metric: str | None = None,
        n_resamples: int = 2000,
        seed: int = 0,
        cluster_by: str | None = None,
    ) -> pd.DataFrame:
        """Every pair of models (in run order) as `paired` rows, with ``p_value`` and Holm's ``p_holm``.

        With three or more models, read ``p_holm``: it is adjusted over all the pairs of a
        (task, metric), so a "best model" claim that survives it holds across the comparisons.
        """
        from evalnb.results.comparison import paired_all

        return paired_all(self.scores, models if models is not None else self.models, task_id=task_id, metric=metric,
                          n_resamples=n_resamples, seed=seed, clusters=self._clusters(cluster_by),
                          batch_metrics=self._batch_metrics())

    def diff(self, baseline: RunResult, *, confidence: float = 0.95, cluster_by: str | None = None) -> pd.DataFrame:
        """This run against ``baseline`` (an earlier run of the same tasks), item by item.

        One row per (task_id, model, metric) in both runs; items pair by (task_id, model label,
        sample_index). Columns: task_id, model, metric, n_pairs, mean_baseline, mean,
        mean_diff (= mean − mean_baseline), stderr (SD of the per-item differences / √n_pairs),
        ci_low, ci_high (mean_diff ± t_{n−1} · stderr), n_fixed (0 in the baseline, 1 here),
        n_broken (the reverse), mcnemar_p (exact, 0/1 metrics; NaN otherwise) and mde, the
        smallest true difference these pairs detect with 80% power at α = 0.05
        (2.8016 · stderr). With epochs an item's score is its mean over epochs. ``cluster_by``
        clusters the differences by a dataset-row field (CR1 stderr, t_{G−1}, ``n_clusters``).
        """
        from evalnb.results.diff import diff_scores

        if not isinstance(baseline, RunResult):
            raise TypeError(f"diff() needs the baseline RunResult (e.g. evalnb.load_run(run_id)), "
                            f"got {type(baseline).__name__}")
        return diff_scores(self.scores, baseline.scores, confidence=confidence, clusters=self._clusters(cluster_by))

    def compare(self, **options: Any) -> go.Figure:
        """The default Plotly comparison: metric by model with 95% intervals (`evalnb.plots.compare`)."""
        from evalnb.plots import compare

        return compare(self.metrics, self.scores, self.samples, **options)

    # ---- export and display ---------------------------------------------------------------------
    def to_records(self, what: str = "samples") -> list[dict[str, Any]]:
        """`samples`, `scores` or `metrics` as JSON-ready dicts (NaN and NA become None)."""
        frames = {"samples": "samples", "scores": "scores", "metrics": "metrics"}
        if what not in frames:
            raise ValueError(f"to_records() takes 'samples', 'scores' or 'metrics', not {what!r}")
        frame = getattr(self, frames[what])
        return [{k: _plain(v) for k, v in row.items()} for row in frame.to_dict("records")]

    def __repr__(self) -> str:
        # Cheap on purpose: asyncio and debuggers repr results freely; `print(result)` or
        # `result.summary()` gives the full report.
        counts = self._run.get("counts") or {}
        return (f"<RunResult {self.run_id or '(not stored)'} status={self.status or 'unknown'} "
                f"samples={counts.get('total', '?')} failed={counts.get('failed', '?')}>")

    def browse(self, filter: str | None = None, *, models: list[str] | None = None,
               baseline: RunResult | None = None, epoch: int | None = None, **view: Any) -> Any:
        """A widget paging through this run's outputs, side by side per item.

        ``filter``: ``"all"`` (default), ``"failures"`` or ``"disagreements"``; with a
        ``baseline`` run, each model's baseline output stands beside its output here and
        ``"changed"`` (the default then) shows only the items whose score changed. A run with
        epochs shows one epoch's outputs (``epoch``, default 0). ``view``: `evalnb.widgets.browse`'s
        ``task_id``, ``page_size`` and ``static_pages``.
        """
        from evalnb.widgets import browse

        suite = None
        if self._manifest:
            from evalnb.suite import Suite

            try:
                base_dir = (self._run.get("summary") or {}).get("base_dir")
                suite = Suite.from_dict(self._manifest, base_dir=base_dir)
            except Exception:  # noqa: BLE001 - browsing works without the suite's few-shot view
                suite = None
        frame = self._with_judge_calls(self._one_epoch(epoch))
        if baseline is None:
            return browse(frame, suite=suite, filter=filter, models=models, **view)
        from evalnb.results.diff import changed_items

        if not isinstance(baseline, RunResult):
            raise TypeError(f"baseline must be a RunResult, got {type(baseline).__name__}")
        import pandas as pd

        chosen = models if models is not None else [m for m in self.models if m in set(baseline.models)]
        before = baseline._one_epoch(epoch if epoch is not None and epoch < baseline.epochs else None)
        before = before.assign(model=before["model"].map(lambda m: f"{m} (baseline)"))
        both = pd.concat([before, frame], ignore_index=True)
        order = [label for m in chosen for label in (f"{m} (baseline)", m)]
        changed = changed_items(self.scores, baseline.scores)
        return browse(both, suite=suite, filter=filter or "changed", models=order, changed=changed, **view)

    def _one_epoch(self, epoch: int | None) -> pd.DataFrame:
        frame = self.samples
        if epoch is None and self.epochs == 1:
            return frame
        epoch = 0 if epoch is None else epoch
        if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch < self.epochs:
            raise ValueError(f"epoch must be an integer from 0 to {self.epochs - 1}, got {epoch!r}")
        return frame[frame["epoch"] == epoch]


def _plain(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if type(value).__name__ == "NAType":
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes, dict, list)):
        return value.item()  # numpy scalars
    return value
