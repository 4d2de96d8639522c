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

from evalnb.results.judging import JudgeCosts
from evalnb.results.pairwise_views import PairwiseJudging
from evalnb.results.report_views import Report

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from evalnb.store import Store

__all__ = ["METRICS_COLUMNS", "SAMPLE_COLUMNS", "RunResult", "metric_specs"]

from evalnb.results.frames import FRAME_FIELDS, SAMPLE_COLUMNS, lean_frame, metric_columns, metric_specs, samples_frame  # noqa: E402

METRICS_COLUMNS = (
    "task_id", "model", "metric", "n", "n_failed", "n_unscored", "n_not_run", "n_missing_field", "epochs", "mean",
    "stderr",
    "ci_low", "ci_high", "higher_is_better", "aggregation", "source", "error",
)
_SCORE_COLUMNS = ("task_id", "model", "sample_index", "metric", "value")


def _joined(pages: Iterable[Mapping[str, list[Any]]], fields: Iterable[str]) -> dict[str, list[Any]]:
    """Pages of columns (`Store.column_pages` of `fields`) as one dict of columns."""
    columns: dict[str, list[Any]] = {f: [] for f in fields}
    for page in pages:
        for field, values in page.items():
            columns[field].extend(values)
    return columns


def _columns(samples: Iterable[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Sample dicts as the columns `Store.column_pages` gives (missing fields are None)."""
    from evalnb.store import SAMPLE_FIELDS

    columns: dict[str, list[Any]] = {f: [] for f in SAMPLE_FIELDS}
    for s in samples:
        for field, values in columns.items():
            values.append(s.get(field))
    return columns


class RunResult:
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
        self._helpers()

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
        self._helpers()
        return self

    def _helpers(self) -> None:
        """The objects this result owns: its judge/cost views and its report (fresh on refresh)."""
        from evalnb.results.candidates import names_of
        from evalnb.results.variant_views import RunVariants

        self._variants = RunVariants(self._run)
        self._judging = JudgeCosts(self._store, self._run_id, self._run, frames=self._cost_frame,
                                   lean=lambda: self._lean, models=lambda: self.models)
        self._pairwise = PairwiseJudging(self._store, self._run_id, samples=lambda: self.samples,
                                         models=lambda: names_of(self.models, self.variants), tasks=self._own_task_ids)
        self._report = Report(self)

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
        for name in ("samples", "scores", "_scores", "metrics", "metric_columns", "_frame", "_lean"):
            self.__dict__.pop(name, None)
        self._helpers()
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
    def title(self) -> str:
        """How the run is named to a reader: its name first, then its id ("v1: as written (eval_run_…)")."""
        run_id = self._run_id or "not stored"
        return f"{self.name} ({run_id})" if self.name else str(run_id)

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
    def variants(self) -> list[str]:
        """The run's prompt variants in the order given (``evalnb.run(..., variants=...)``); [] without."""
        return list(self._variants.names)

    @property
    def candidates(self) -> list[str]:
        """What was compared: the model labels, or with variants each "model · variant" (models first)."""
        from evalnb.results.variant_views import candidate_label

        if not self._variants:
            return self.models
        return [candidate_label(m, v) for m in self.models for v in self._variants.names]

    @property
    def task_ids(self) -> list[str]:
        """Tasks in run order (the run's task_ids, else the manifest's), then any other found in the samples;
        a run with variants lists each task once (as the ``task_id`` column of `samples` has it)."""
        from evalnb.suite.variants import split_slot

        return list(dict.fromkeys(split_slot(t)[0] for t in self._slots))

    @property
    def _slots(self) -> list[str]:
        """Tasks as stored, in run order (with variants: one per (task, variant), `suite.variants`) (the run's task_ids, else the manifest's), then any other found in the samples."""
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
            flag = ["missing_field"] if "missing_field" in frame.columns else []
            return frame[["task_id", "model", "sample_index", "epoch", "status", *flag, *columns.values()]], columns
        frame, columns, self._score_keys = lean_frame(self._store, self._run_id, self._manifest,
                                                      order=self._groups_in_run_order)
        return frame, columns

    def _run_ranks(self, tasks_found: Iterable[str], models_found: Iterable[str]) -> tuple[list[str], list[str]]:
        """Tasks and models in run order (as the run listed them), then any other found, by name."""
        tasks = list(self._run.get("task_ids") or metric_specs(self._manifest))
        tasks += sorted(set(tasks_found) - set(tasks))
        models = [m["label"] if isinstance(m, Mapping) else str(m) for m in self._run.get("models") or []]
        models += sorted(set(models_found) - set(models))
        return tasks, models

    def _groups_in_run_order(self, groups: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """(task, model) pairs in run order: what `_run_order` gives a frame, applied before reading it."""
        tasks, models = self._run_ranks((t for t, _ in groups), (m for _, m in groups))
        rank_t, rank_m = {t: i for i, t in enumerate(tasks)}, {m: i for i, m in enumerate(models)}
        return sorted(groups, key=lambda g: (rank_t[g[0]], rank_m[g[1]]))

    def _run_order(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Rows in run order (tasks, then models, as the run listed them), then by item and epoch;
        the store reads them sorted by name, often the same order, and then nothing moves."""
        import numpy as np
        import pandas as pd

        tasks, models = self._run_ranks(frame["task_id"].unique(), frame["model"].unique())
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
            cols = _joined(self._store.column_pages(self._run_id, FRAME_FIELDS, batch_size=5000), FRAME_FIELDS)
        frame = self._run_order(samples_frame(cols, columns, self._judging.cost_by_sample()))
        self._cached_input = frame.pop("_cached_input").to_numpy()
        return frame, columns

    def iter_samples(self, batch_size: int = 50_000) -> Iterator[pd.DataFrame]:
        """`samples` a page at a time: the same columns and row order, at most `batch_size` rows each.

        For a run too big for one frame (a million samples of `samples` take ~1.5 GB): each
        page is read from the store when it is reached, one (task, model) at a time.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if self._store is None:
            frame = self.samples
            for start in range(0, len(frame), batch_size):
                yield frame.iloc[start:start + batch_size].reset_index(drop=True)
            return
        for task in self._slots:
            for model in self.models:
                for page in self._store.column_pages(self._run_id, FRAME_FIELDS, task_id=task, model=model,
                                                     batch_size=batch_size):
                    yield self._page_frame(page)

    def _page_frame(self, page: Mapping[str, list[Any]]) -> pd.DataFrame:
        frame = samples_frame(page, self._lean[1], self._judging.cost_by_sample()).drop(columns="_cached_input")
        return self._variants.split(frame)

    def samples_page(self, page: int, page_size: int = 10_000) -> pd.DataFrame:
        """Rows ``page * page_size`` to ``(page + 1) * page_size`` of `samples`, read alone.

        The lean frame (keys in `samples` order, already read for `metrics`) says which sample
        starts the page; the store is then read from that key on (keyset seek), so a page deep
        in a big run costs what the first one does.
        """
        import pandas as pd

        if isinstance(page, bool) or not isinstance(page, int) or page < 0:
            raise ValueError(f"page must be an integer >= 0, got {page!r}")
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"page_size must be a positive integer, got {page_size!r}")
        start = page * page_size
        if self._store is None:
            return self.samples.iloc[start:start + page_size].reset_index(drop=True)
        lean = self._lean[0]
        keys = lean.iloc[start:start + page_size]
        if keys.empty:
            from evalnb.store import SAMPLE_FIELDS

            return self._page_frame({f: [] for f in SAMPLE_FIELDS})
        parts = []
        for (task, model), part in keys.groupby(["task_id", "model"], sort=False):
            at = int(part.index[0])
            after = None
            if at > 0 and lean["task_id"].iat[at - 1] == task and lean["model"].iat[at - 1] == model:
                after = (int(lean["sample_index"].iat[at - 1]), int(lean["epoch"].iat[at - 1]))  # seek past it
            pages = self._store.column_pages(self._run_id, FRAME_FIELDS, task_id=task, model=model, after=after,
                                             batch_size=len(part))
            parts.append(self._page_frame(next(pages)))
        return pd.concat(parts, ignore_index=True).iloc[:page_size]

    @cached_property
    def samples(self) -> pd.DataFrame:
        """One row per (task, model, item, epoch); see the module docstring for the columns.

        `prompt` is an object column whose rows share one str per distinct prompt (every model
        of an item has the same one), so a large run's frame holds each prompt once. A run with
        prompt variants has a ``variant`` column after ``model`` (one row per variant too).
        """
        return self._variants.split(self._frame[0])

    @cached_property
    def metric_columns(self) -> dict[str, str]:
        """Metric id -> its column in `samples` (the id itself unless it clashed)."""
        return dict(self._lean[1])

    @cached_property
    def scores(self) -> pd.DataFrame:
        """Long form: one row per (item, metric of its task); value NaN = not scored (a ``variant``
        column with variants); see `_scores`."""
        return self._variants.split(self._scores)

    @cached_property
    def _scores(self) -> pd.DataFrame:
        """Long form: one row per (item, metric of its task); value NaN = not scored.

        Metrics of a task are its declared ones, then any other score key its samples carry;
        samples that are not `completed` are NaN, as in `metrics`. With epochs, an item's
        value is its mean over its scored epochs (what `paired`, `diff` and the plots compare).
        """
        import pandas as pd

        frame, columns = self._lean
        specs = self._specs()
        parts = []
        for task in self._slots:
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
        graded them), `n_not_run` the samples never run (a stopped model or task, a cancelled or
        budget-stopped run): with one epoch, n + n_failed + n_unscored + n_not_run is every
        planned sample of the task and model. `n_missing_field` counts the samples whose prompt or target template named a
        field their row lacks (rendered as ""). `aggregation: "none"` reports n alone. A batch
        grader's metrics replace same-named rows (source "batch", no stderr or interval) and
        its error is shown on every row of that task and model. A run with epochs also gets
        ``pass_at_<k>`` columns for 0/1 metrics (`evalnb.results.epochs`). With prompt variants, a
        ``variant`` column after ``model`` (one row per task, model, variant and metric).
        """
        from evalnb.results.compact import compact_metrics

        # every column is there; a notebook and repr show the main ones (evalnb.results.compact)
        return compact_metrics(self._variants.split(self._metrics_table().drop(columns="n_clusters")))

    def summarize(self, *, task_id: str | Iterable[str] | None = None, cluster_by: str | None = None,
                  confidence: float = 0.95) -> pd.DataFrame:
        """The `metrics` table of some tasks, at another ``confidence``, or with errors clustered by a row field.

        ``task_id``: one task id or several (default: every task); an unknown id is a ValueError
        naming the run's tasks. ``cluster_by``: a field of the untouched dataset row (a dotted
        path such as ``"meta.passage_id"`` is allowed) shared by items that are not independent,
        e.g. the passage several questions are asked about. The stderr is then the CR1
        cluster-robust one over item scores, ``sqrt(G/(G-1) · Σ_g (Σ_{i∈g}(s_i − s̄))²) / n``, and
        the interval ``mean ± t_{G−1} · stderr`` (clipped to [0, 1] for scores in [0, 1]). Column
        ``n_clusters`` gives G (= n without clustering). ``summarize()`` is `metrics` plus
        ``n_clusters``. Clustering applies to the tasks whose rows all have the field: any other
        task keeps its ordinary errors, gets ``n_clusters`` <NA>, and a warning names it and why
        (``table.attrs["unclustered"]``: task -> reason). A field no chosen task has, or a task
        whose items share one cluster, is a ValueError naming the task and row.
        """
        from evalnb.results.cluster_labels import check_path
        from evalnb.results.stats import check_confidence

        check_confidence(confidence)
        tasks = self._chosen_tasks(task_id)
        clusters, unclustered = None, {}
        if cluster_by is not None:
            check_path(cluster_by)
            clusters, unclustered = self._cluster_keys(cluster_by, tasks)
        table = self._metrics_table(confidence=confidence, clusters=clusters, cluster_by=cluster_by, tasks=tasks,
                                    unclustered=unclustered)
        table = self._variants.split(table)
        table.attrs["unclustered"] = dict(unclustered)
        return table

    def _own_task_ids(self, task_id: str | Iterable[str] | None) -> list[str]:
        """The chosen tasks by their own ids, as `samples` has them (a run with variants: each task once)."""
        from evalnb.suite.variants import split_slot

        return list(dict.fromkeys(split_slot(t)[0] for t in self._chosen_tasks(task_id)))

    def _chosen_tasks(self, task_id: str | Iterable[str] | None) -> list[str]:
        """The tasks ``task_id`` names (one id or several), in run order; unknown ids are a ValueError."""
        known = self._slots
        if task_id is None:
            return known
        wanted = [task_id] if isinstance(task_id, str) else list(task_id)
        if not wanted or not all(isinstance(t, str) for t in wanted):
            raise ValueError(f"task_id must be a task id or a list of them, got {task_id!r}; "
                             f"the run's tasks: {', '.join(map(repr, known)) or 'none'}")
        if self._variants:  # a task's own id names each of its variants' slots
            from evalnb.suite.variants import split_slot

            wanted = [s for s in known if s in wanted or split_slot(s)[0] in wanted]
            wanted += [t for t in ([task_id] if isinstance(task_id, str) else task_id) if t not in known
                       and not any(split_slot(s)[0] == t for s in known)]
        unknown = [t for t in wanted if t not in known]
        if unknown:
            raise ValueError(f"unknown task_id {', '.join(map(repr, unknown))}; "
                             f"the run's tasks: {', '.join(map(repr, known)) or 'none'}")
        return [t for t in known if t in set(wanted)]

    def _metrics_table(self, *, confidence: float = 0.95, clusters: Mapping[tuple[str, int], Any] | None = None,
                       cluster_by: str | None = None, tasks: list[str] | None = None,
                       unclustered: Mapping[str, str] | None = None) -> pd.DataFrame:
        import pandas as pd

        from evalnb.results.epochs import pass_at_k_ks
        from evalnb.results.metrics_table import task_model_rows

        frame, columns = self._lean
        unclustered = unclustered or {}
        missing = self._missing_field_counts()
        planned = (self._run.get("summary") or {}).get("planned") or {}
        specs = self._specs()
        epochs = self.epochs
        batch = {(t["task_id"], t["model"]): t for t in self._task_metrics}
        batch_ids: dict[str, list[str]] = {}  # metric ids any model's batch grader reported, per task
        for entry in self._task_metrics:
            ids = batch_ids.setdefault(entry["task_id"], [])
            ids.extend(k for k in entry.get("metrics") or {} if k not in ids)
        groups = dict(iter(frame.groupby(["task_id", "model"], sort=False)))
        rows: list[dict[str, Any]] = []
        for task in self._slots if tasks is None else tasks:
            for model in self.models:
                part = groups.get((task, model))
                found = task_model_rows(task, model, part, specs.get(task, []), columns,
                                        batch.get((task, model)) or {}, batch_ids.get(task) or ["score"],
                                        epochs=epochs, confidence=confidence,
                                        clusters=None if task in unclustered else clusters,
                                        cluster_by=cluster_by, n_missing_field=missing.get((task, model), 0),
                                        planned=(planned.get(task) or {}).get(model))
                if task in unclustered:
                    for row in found:
                        row["n_clusters"] = None
                rows.extend(found)
        order = list(METRICS_COLUMNS)
        order.insert(order.index("n") + 1, "n_clusters")
        order += [f"pass_at_{k}" for k in pass_at_k_ks(epochs)]
        table = pd.DataFrame.from_records(rows, columns=order)
        table["error"] = pd.Series([r["error"] for r in rows], dtype="object")
        table["n_clusters"] = pd.array([r.get("n_clusters") for r in rows], dtype="Int64")
        return table.astype({"n": "int64", "n_failed": "int64", "n_unscored": "int64", "n_not_run": "int64",
                             "n_missing_field": "int64",
                             "epochs": "int64", "mean": "float64", "stderr": "float64", "ci_low": "float64",
                             "ci_high": "float64", "higher_is_better": "bool"})

    # ---- comparisons ----------------------------------------------------------------------------
    def _clusters(self, cluster_by: str | None, tasks: list[str]) -> tuple[dict[tuple[str, int], Any] | None, dict[str, str]]:
        if cluster_by is None:
            return None, {}
        return self._cluster_keys(cluster_by, tasks)

    def _row_pages(self, status: str | None = None, tasks: list[str] | None = None) -> Iterator[pd.DataFrame]:
        """(task_id, model, sample_index, status, dataset_row) of the samples of ``tasks``, a page at a time."""
        import pandas as pd

        fields = ["task_id", "model", "sample_index", "status", "dataset_row"]
        if self._store is None:
            frame = self._frame[0]
            part = frame if status is None else frame[frame["status"] == status]
            if tasks is not None:
                part = part[part["task_id"].isin(tasks)]
            yield part[fields]
            return
        for task in self._slots if tasks is None else tasks:
            for page in self._store.column_pages(self._run_id, fields, task_id=task, status=status):
                yield pd.DataFrame(page)

    def _cluster_keys(self, cluster_by: str, tasks: list[str]) -> tuple[dict[tuple[str, int], Any], dict[str, str]]:
        """(task, index) -> cluster for the ``tasks`` whose rows have ``cluster_by``, and task -> why
        not for the others (warned once). No task with the field at all is a ValueError."""
        import warnings

        from evalnb.results.cluster_labels import cluster_keys, clustered_only

        keys: dict[tuple[str, int], Any] = {}
        problems: dict[str, str] = {}
        for page in self._row_pages("completed", tasks):
            cluster_keys(page, cluster_by, keys, problems)
        keys = clustered_only(keys, problems)
        if problems and not keys:
            raise ValueError(problems[min(problems)])  # the first task in store order
        if problems:
            left = "; ".join(problems.values())
            warnings.warn(f"cluster_by={cluster_by!r} left task(s) {', '.join(map(repr, problems))} unclustered "
                          f"(ordinary errors; n_clusters <NA>): {left}", UserWarning, stacklevel=3)
        return keys, problems

    def _missing_field_counts(self) -> dict[tuple[str, str], int]:
        """(task, model) -> samples whose prompt named a field their row lacks (`n_missing_field`).

        The one place this count comes from: the store's per-sample ``missing_field`` column
        (recorded when the prompt was rendered) as read into the lean frame; only samples
        stored before that column existed (NaN there) are worked out from their rows.
        """
        frame = self._lean[0]
        if "missing_field" in frame.columns and frame["missing_field"].notna().all():
            sums = frame.groupby(["task_id", "model"], sort=False)["missing_field"].sum()
            return {key: int(n) for key, n in sums.items() if n}
        # a run stored before the store recorded the flag: worked out from its rows (decoded)
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
        task_id: str | Iterable[str] | None = None,
        metric: str | None = None,
        n_resamples: int = 2000,
        seed: int = 0,
        cluster_by: str | None = None,
    ) -> pd.DataFrame:
        """Per-task paired differences a - b on the items both models were scored on.

        Bootstrap interval, t stderr and, for 0/1 metrics, exact McNemar (see
        `evalnb.results.comparison.paired`); `metric=None` takes each task's first metric.
        ``task_id``: one task or several (an unknown id is a ValueError naming the run's tasks).
        With epochs, each item's score is its mean over epochs. ``cluster_by`` (a dataset-row
        field, as in `summarize`) clusters the per-item differences of the tasks whose rows have
        it: CR1 stderr, a t_{G-1} interval and an ``n_clusters`` column; a task whose rows lack
        it keeps ordinary statistics and says so in ``note`` (with a warning). A batch-grader
        metric has no per-item scores: its row says so in ``note`` (and asking for it alone is a
        ValueError saying so).
        """
        from evalnb.results.comparison import paired

        tasks = self._chosen_tasks(task_id)
        clusters, unclustered = self._clusters(cluster_by, tasks)
        kind = self._variants.check_names([model_a, model_b], self.models)
        if self._variants:
            return self._variant_compare(kind, [model_a, model_b], tasks, clusters, unclustered, lambda scores, names, **kw: paired(
                scores, names[0], names[1], metric=metric, n_resamples=n_resamples, seed=seed, **kw))
        return paired(self._scores, model_a, model_b, task_id=_as_given(task_id, tasks), metric=metric,
                      n_resamples=n_resamples, seed=seed, clusters=clusters, batch_metrics=self._batch_metrics(),
                      unclustered=_reasons(unclustered))

    def _variant_compare(self, kind: str, names: list[str], tasks: list[str], clusters: Any, unclustered: Any,
                         compare: Any) -> pd.DataFrame:
        """`paired`/`paired_all` in a run with variants: two variants of each model, or models within each variant."""
        from evalnb.suite.variants import split_slot

        scores = self._scores[self._scores["task_id"].isin(tasks)]
        own = {split_slot(t)[0] for t in tasks}
        options = dict(
            clusters=None if clusters is None else {(split_slot(t)[0], i): c for (t, i), c in clusters.items()},
            batch_metrics={(split_slot(t)[0], m) for t, m in self._batch_metrics()},
            unclustered={split_slot(t)[0]: r for t, r in _reasons(unclustered).items()},
            task_id=sorted(own) if len(own) > 1 else next(iter(own)),
        )
        if kind == "variant":
            return self._variants.by_model(scores, self.models, lambda frame, chosen: compare(frame, chosen, **options),
                                           names)
        return self._variants.by_variant(scores, lambda frame, chosen: compare(frame, chosen, **options), names)

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
        task_id: str | Iterable[str] | None = None,
        metric: str | None = None,
        n_resamples: int = 2000,
        seed: int = 0,
        cluster_by: str | None = None,
    ) -> pd.DataFrame:
        """Every pair of models (in run order) as `paired` rows, with ``p_value`` and Holm's ``p_holm``.

        With three or more models, read ``p_holm``: it is adjusted over all the pairs of a
        (task, metric), so a "best model" claim that survives it holds across the comparisons.
        ``task_id`` and ``cluster_by`` as in `paired`.
        """
        from evalnb.results.comparison import paired_all

        tasks = self._chosen_tasks(task_id)
        clusters, unclustered = self._clusters(cluster_by, tasks)
        if self._variants:  # every pair of models within each variant, and of variants within each model
            import pandas as pd

            chosen = models if models is not None else self.models
            kind = self._variants.check_names(list(chosen), self.models)

            def run_all(scores: Any, names: list[str], **kw: Any) -> pd.DataFrame:
                return paired_all(scores, names, metric=metric, n_resamples=n_resamples, seed=seed, **kw)

            parts = []
            if kind == "model" and len(chosen) > 1:
                parts.append(self._variant_compare("model", list(chosen), tasks, clusters, unclustered, run_all))
            names = self._variants.names if kind == "model" else list(chosen)
            if len(names) > 1:
                parts.append(self._variant_compare("variant", names, tasks, clusters, unclustered, run_all))
            table = pd.concat(parts, ignore_index=True)
            lead = [c for c in ("model_a", "model_b", "variant", "model", "variant_a", "variant_b") if c in table]
            return table[lead + [c for c in table.columns if c not in lead]]
        return paired_all(self._scores, models if models is not None else self.models,
                          task_id=_as_given(task_id, tasks), metric=metric, n_resamples=n_resamples,
                          seed=seed, clusters=clusters, batch_metrics=self._batch_metrics(),
                          unclustered=_reasons(unclustered))

    def diff(self, baseline: RunResult | str, *, task_id: str | Iterable[str] | None = None, confidence: float = 0.95,
             cluster_by: str | None = None, store: Store | str | os.PathLike[str] | None = None) -> pd.DataFrame:
        """This run against ``baseline`` (an earlier run of the same tasks), item by item.

        ``baseline``: a `RunResult`, or a run id, ``"latest"`` or a run's name, looked up in
        ``store`` (a `Store` or the path of a ``.sqlite`` file, e.g. one a colleague sent;
        default: this run's own store). Reading it sends nothing anywhere.

        One row per (task_id, model, metric) in both runs; items pair by (task_id, model label,
        sample_index). A run with prompt variants pairs each variant with the baseline's same-named
        variant, or, against a baseline without variants, each variant with the baseline's one
        prompt (a ``variant`` column either way); a baseline with variants against a run without
        is refused (diff the other way round, or compare variants of one run with `paired`). In a
        notebook (and as text) the table is shown after `changes` (what changed in the prompt).
        Columns: task_id, model, metric, n_pairs, mean_baseline, mean,
        mean_diff (= mean − mean_baseline), stderr (SD of the per-item differences / √n_pairs),
        ci_low, ci_high (mean_diff ± t_{n−1} · stderr), n_fixed (0 in the baseline, 1 here),
        n_broken (the reverse), mcnemar_p (exact, 0/1 metrics; NaN otherwise) and mde, the
        smallest true difference these pairs detect with 80% power at α = 0.05
        (2.8016 · stderr). With epochs an item's score is its mean over epochs. ``task_id``: one
        task or several of this run. ``cluster_by`` clusters the differences by a dataset-row
        field (CR1 stderr, t_{G−1}, ``n_clusters``) for the tasks whose rows have it; the others
        keep ordinary errors with ``n_clusters`` <NA> (and a warning).
        """
        from evalnb.results.compact import led
        from evalnb.results.diff import diff_scores

        baseline = _stored_baseline(baseline, self._store if store is None else store)
        tasks = self._chosen_tasks(task_id)
        clusters, unclustered = self._clusters(cluster_by, tasks)
        mine, theirs = self._scores, self._variants.against(baseline._scores, baseline._variants, baseline.title)
        if task_id is not None:
            mine, theirs = mine[mine["task_id"].isin(tasks)], theirs[theirs["task_id"].isin(tasks)]
        table = diff_scores(mine, theirs, confidence=confidence, clusters=clusters, unclustered=set(unclustered))
        table = self._variants.split(table)
        table.attrs.update(run=self.title, baseline=baseline.title)  # verdicts name both runs
        return led(table, self.changes(baseline))  # what changed in the prompt, shown first

    def changed_items(self, baseline: RunResult) -> set[tuple[str, int]]:
        """(task_id, sample_index) of the items whose score differs from ``baseline``'s (any model, variant or metric)."""
        from evalnb.results.diff import changed_items
        from evalnb.suite.variants import split_slot

        return {(split_slot(t)[0], int(i)) for t, i in changed_items(self._scores, baseline._scores)}

    def changes(self, baseline: RunResult | None = None) -> Any:
        """What changed in the suite: per task, each field that differs (old and new) and, for text, the words.

        With a ``baseline`` run: this run's tasks against the baseline's (a variant of this run
        against the baseline's same-named variant, else its plain task). Without one, in a run
        with prompt variants: each variant against the first. Returns a `results.changes.Changes`:
        ``.table`` (task_id, variant, field, old, new), shown as HTML in a notebook (inserted
        words ``<ins>[+…+]</ins>``, deleted ``<del>[-…-]</del>``) and as text by ``print``.
        """
        from evalnb.results.changes import Change, manifest_tasks, suite_changes

        slots = set(self._slots)
        mine = {k: v for k, v in manifest_tasks(self._manifest).items()
                if (f"{k[0]}@{k[1]}" if k[1] else k[0]) in slots}
        if baseline is None:
            if not self._variants:
                raise ValueError("changes() needs a baseline run (e.g. result.changes(evalnb.load_run(run_id))); "
                                 "only a run with prompt variants compares its variants without one")
            first = self._variants.names[0]
            pairs = [(key, (key[0], first)) for key in mine if key[1] != first]
            return suite_changes(mine, mine, new_name=f"{self.title}: each variant", old_name=f"variant {first!r}",
                                 pairs=pairs)
        if not isinstance(baseline, RunResult):
            raise TypeError(f"changes() needs the baseline RunResult, got {type(baseline).__name__}")
        theirs = manifest_tasks(baseline._manifest)
        pairs = []
        for task, variant in mine:
            same = [k for k in ((task, variant), (task, "")) if k in theirs]
            pairs.append(((task, variant), same[0] if same else next((k for k in theirs if k[0] == task), None)))
        found = suite_changes(mine, theirs, new_name=self.title, old_name=baseline.title, pairs=pairs)
        for task in dict.fromkeys(k[0] for k in theirs):
            if task not in {k[0] for k in mine} and task in set(baseline.task_ids):
                found.changes.append(Change(task, "", "(task)", "present", "removed"))
        return found

    def compare(self, **options: Any) -> go.Figure:
        """The default Plotly comparison: metric by model with 95% intervals (`evalnb.plots.compare`)."""
        from evalnb.plots import compare

        fig = compare(self._variants.candidates(self._metrics_table().drop(columns="n_clusters")), **options)
        if self._variants:  # every model under every variant: say so in the title
            title = str(fig.layout.title.text or "")
            shown = f"{len(self.models)} model(s) × {len(self._variants.names)} variants"
            fig.update_layout(title_text=title.rsplit(" (", 1)[0] + f" ({shown})")
        return fig

    # ---- judge calls and costs (`judging.JudgeCosts`) ------------------------------------------
    @property
    def judge_calls(self) -> pd.DataFrame:
        """Every model call the run's graders made: task_id, model, sample_index, epoch, call, kind,
        judge_model, request (the body as sent), output_text, usage, input_tokens, output_tokens,
        latency_s, cost_usd, cached (answered from the store), reply (the whole reply).

        One row per call, in sample order; a batch grader's calls have sample_index <NA>.
        """
        return self._variants.split(self._judging.judge_calls)

    @property
    def costs(self) -> pd.DataFrame:
        """Per (task_id, model, role): calls, cached, input_tokens, cached_input_tokens,
        output_tokens, cost_usd, billed_model. ``role`` is ``candidate`` (the model's own calls)
        or ``judge`` (its samples' grader calls, costed at the judge's price), and ``pairwise
        judge`` for the run's pairwise judge calls (``model`` is then the pair, "a vs b"); see
        `evalnb.results.costs.costs_frame`."""
        return self._variants.split(self._judging.costs)

    @property
    def cost_usd(self) -> float:
        """USD the run's recorded calls cost, candidates and judges: the priced calls summed, with a
        warning naming the `costs` rows that hold calls without a price (they are not counted)."""
        return self._judging.cost_usd

    # ---- pairwise judging (`pairwise_views.PairwiseJudging`) ------------------------------------
    def pairwise(self, a: str, b: str, *, judge_model: Any, task_id: str | Iterable[str] | None = None,
                 template: str | None = None, swap: bool = True, concurrency: int = 4,
                 judge_generation: Any = None, max_cost_usd: float | None = None) -> pd.DataFrame:
        """Which of two candidates' outputs is better, item by item, as a judge model sees it.

        ``a``, ``b``: candidate names (model labels; with prompt variants also variant names, when
        the run has one model, and "model · variant"; see `evalnb.results.candidates`). One row per
        (task_id, sample_index, epoch) both answered: task_id, sample_index, epoch, a, b,
        verdict ("a", "b" or "tie"; None with ``error``), verdict_ab (``a`` shown first),
        verdict_ba (``b`` shown first), consistent and error. ``template``: the judge prompt with
        ``{{prompt}}``, ``{{output_a}}`` (shown first), ``{{output_b}}`` and optionally
        ``{{target}}``; default MT-Bench's pairwise instruction. The reply's last ``[[A]]``,
        ``[[B]]`` or ``[[C]]`` (tie) is the verdict; a reply without one is an error on its row.
        ``swap=True`` judges both orders: a verdict that flips with the order is a tie with
        consistent False. Calls go through the judge cache (asked again: nothing is sent), are
        priced at ``judge_model``'s price, stop at ``max_cost_usd`` and are stored with the run
        (a crashed pass resumes; `evalnb.report` shows them). ``judge_generation``: e.g.
        ``{"temperature": 0, "max_output_tokens": 512}``.
        """
        judged = self._pairwise.judge([(a, b)], judge_model=judge_model, task_id=task_id, template=template,
                                      swap=swap, concurrency=concurrency, judge_generation=judge_generation,
                                      max_cost_usd=max_cost_usd)
        self._judging.forget_costs()
        return judged[(a, b)][0]

    def win_rate(self, a: str, b: str, *, judge_model: Any, task_id: str | Iterable[str] | None = None,
                 template: str | None = None, swap: bool = True, concurrency: int = 4,
                 judge_generation: Any = None, max_cost_usd: float | None = None) -> pd.DataFrame:
        """``a``'s win rate against ``b`` per task, from `pairwise` (same options; judged pairs are not asked again).

        Columns: task_id, a, b, n (pairs with a verdict), a_wins, b_wins, ties, win_rate ((a_wins
        + ties/2) / n), ci_low, ci_high (95% bootstrap over items), inconsistent (pairs whose
        verdict flipped with the order), position_bias (the share of those the output shown
        first won both times) and errors (pairs without a verdict). See `evalnb.results.win_rates`.
        """
        from evalnb.results.win_rates import win_rate_table

        return win_rate_table(self.pairwise(a, b, judge_model=judge_model, task_id=task_id, template=template,
                                            swap=swap, concurrency=concurrency, judge_generation=judge_generation,
                                            max_cost_usd=max_cost_usd))

    def rank(self, *, judge_model: Any, models: list[str] | None = None,
             task_id: str | Iterable[str] | None = None, template: str | None = None, swap: bool = True,
             length_control: bool = False, concurrency: int = 4, judge_generation: Any = None,
             max_cost_usd: float | None = None) -> pd.DataFrame:
        """Every pair of candidates judged (`pairwise`), then Bradley–Terry scores, best first.

        ``models``: candidate names (default: every candidate, `candidates`: the run's models, or
        with prompt variants each "model · variant"). One row per candidate: model,
        score (Elo scale, averaging 1000), ci_low, ci_high (95% bootstrap over items), rank,
        wins, losses, ties (over its judged pairs). Equal scores share a rank; a candidate none of
        whose pairs got a verdict has NaN scores and rank <NA>, with a warning and
        ``.attrs["note"]`` (no verdict at all: every score NaN). ``length_control=True`` fits AlpacaEval 2's
        length term with the scores and adds ``lc_win_rate`` (its modelled win rate against the
        others at equal length; the length coefficient is in ``.attrs["length_coef"]``). See
        `evalnb.results.bradley_terry`.
        """
        import pandas as pd

        from evalnb.results.bradley_terry import rank_table
        from evalnb.results.pairwise_views import all_pairs

        names = list(self.candidates if models is None else models)
        if len(names) < 2 or len(set(names)) != len(names):
            raise ValueError(f"rank needs two or more different candidates, got {names!r}")
        judged = self._pairwise.judge(all_pairs(names), judge_model=judge_model, task_id=task_id, template=template,
                                      swap=swap, concurrency=concurrency, judge_generation=judge_generation,
                                      max_cost_usd=max_cost_usd)
        self._judging.forget_costs()
        frames, lengths = [], []
        for frame, both in judged.values():
            keep = frame["verdict"].notna().to_numpy()
            frames.append(frame[keep])
            lengths.extend((both["out_a"].str.len() - both["out_b"].str.len())[keep].tolist())
        pairs = pd.concat(frames, ignore_index=True)
        table = rank_table(pairs, names, lengths=lengths if length_control else None)
        if table.attrs.get("note"):  # a candidate (or all) without a verdict: say so, not only in attrs
            import warnings

            warnings.warn(f"rank: {table.attrs['note']}; see the errors in result.pairwise(...)", stacklevel=2)
        return table

    @property
    def pairwise_judgements(self) -> pd.DataFrame:
        """The stored pairwise verdicts of the judge set-up used last (a `pairwise` frame over every pair
        judged), without calling anyone; its set-up (judge model, template) is in ``.attrs["judge"]``."""
        judge, frame = self._pairwise.stored()
        frame.attrs["judge"] = judge
        return frame

    def judge_agreement(self, labels: Any, *, metric: str | None = None, judge_model: Any = None,
                        template: str | None = None, swap: bool = True) -> pd.DataFrame:
        """How far the judge agrees with people's ``labels`` on the same answers.

        Pairwise labels (columns ``task_id, sample_index, a, b, label``, label "a", "b" or
        "tie", optional ``epoch``): compared with the pairwise verdicts, judged now with
        ``judge_model`` (and ``template``, ``swap``; cached pairs are not asked again) or, without
        it, the stored ones. One row per (task_id, a, b): n, n_unjudged, accuracy [95% Wilson],
        cohen_kappa, confusion ({label: {verdict: count}}).

        Otherwise the judge's ``metric``:

        ``labels``: a DataFrame with ``task_id, sample_index, label`` (a person's score for the
        model's answer, on the metric's scale), plus ``model`` when the run has several models
        (and ``epoch`` for a run with epochs; default 0). Returns one row per (task_id, model):
        n (answers both scored), n_unscored (labelled but not scored by the judge), accuracy with
        its 95% Wilson interval (ci_low, ci_high), cohen_kappa and confusion ({label: {judged:
        count}}; `evalnb.plots.judge_confusion` draws it). Labels for samples the run does not
        have are a ValueError naming them.
        """
        from evalnb.results.agreement import is_pairwise_labels, pairwise_agreement

        if is_pairwise_labels(labels):
            return pairwise_agreement(labels, lambda a, b, tasks: self._pairwise_for_labels(
                a, b, tasks, judge_model=judge_model, template=template, swap=swap))
        if metric is None:
            raise TypeError("judge_agreement needs metric=... (the judge's metric) unless labels are pairwise "
                            "(columns task_id, sample_index, a, b, label)")
        return self._judging.judge_agreement(labels, metric=metric)

    def _pairwise_for_labels(self, a: str, b: str, tasks: list[str], *, judge_model: Any, template: str | None,
                             swap: bool) -> pd.DataFrame:
        """The verdicts of (a, b) on ``tasks``: judged now with ``judge_model``, else the stored ones."""
        import pandas as pd

        if judge_model is not None:
            return self.pairwise(a, b, judge_model=judge_model, task_id=tasks, template=template, swap=swap)
        frame = self.pairwise_judgements
        if frame.empty:
            raise ValueError("this run has no stored pairwise judgements: pass judge_model=... to judge the "
                             "labelled pairs")
        flipped = frame.rename(columns={"a": "b", "b": "a", "verdict_ab": "verdict_ba", "verdict_ba": "verdict_ab"})
        flipped["verdict"] = flipped["verdict"].map({"a": "b", "b": "a", "tie": "tie"})
        for name in ("verdict_ab", "verdict_ba"):
            flipped[name] = flipped[name].map({"a": "b", "b": "a", "tie": "tie"})
        both = [frame[(frame["a"] == a) & (frame["b"] == b)], flipped[(flipped["a"] == a) & (flipped["b"] == b)]]
        found = pd.concat(both, ignore_index=True)
        return found[found["task_id"].isin(tasks)]

    def _cost_frame(self) -> tuple[pd.DataFrame, Any]:
        """(frame with the cost columns, cached input tokens per row) for `costs`: the samples
        frame when it is built anyway, else only those columns read from the store."""
        if self._store is None or "_frame" in self.__dict__:
            return self._frame[0], self._cached_input
        from evalnb.results.costs import cost_columns

        fields = ["task_id", "model", "cached", "output_text", "usage", "cost_usd"]
        store, run_id = self._store, self._run_id
        return cost_columns(page for task in self._slots for model in self.models  # in run order
                            for page in store.column_pages(run_id, fields, task_id=task, model=model))

    # ---- the report (`report_views.Report`) -----------------------------------------------------
    def summary(self) -> str:
        """A plain-text report: the run line, then mean [95% CI] (n) per task x metric x model."""
        return self._report.summary()

    def __str__(self) -> str:
        return self._report.summary()

    def _repr_html_(self) -> str:
        """A static table (inline styles only, no scripts): reads the same in Jupyter and in exported HTML."""
        return self._report.html()

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
        not_run = f" not_run={counts['not_run']}" if counts.get("not_run") else ""
        reasons = self.failure_reasons(1) if counts.get("failed") or counts.get("not_run") else []
        why = f": {reasons[0][0]} ({reasons[0][1]})" if reasons else ""
        if not why and self.status == "failed" and self._run.get("error"):  # failed before any sample
            why = f": {' '.join(str(self._run['error']).split())[:300]}"
        return (f"<RunResult {self.run_id or '(not stored)'} status={self.status or 'unknown'} "
                f"samples={counts.get('total', '?')} failed={counts.get('failed', '?')}{not_run}{why}>")

    def failure_reasons(self, limit: int = 3) -> list[tuple[str, int]]:
        """The commonest reasons samples failed or were not run, with counts, most first:
        ``[("model 'm' stopped after 3 consecutive failed calls (auth): HTTP 401: ...", 97), ...]``."""
        if self._store is not None and self._run_id is not None:
            return self._store.failure_reasons(self._run_id, limit)
        from collections import Counter

        frame = self._frame[0]
        errors = frame.loc[frame["status"].isin(["failed", "not_run"]), "error"]
        found = Counter(e.get("message") for e in errors if isinstance(e, dict) and e.get("message"))
        return found.most_common(limit)

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
        frame = self._variants.candidates(self._judging.with_judge_calls(self._one_epoch(epoch, slots=True)))
        chosen = self._chosen_candidates(models) if models is not None or not self._variants else self.candidates
        if baseline is None:
            intro = self.changes().html() if self._variants and len(self._variants.names) > 1 else None
            return browse(frame, suite=suite, filter=filter, models=chosen, intro=intro, **view)
        if not isinstance(baseline, RunResult):
            raise TypeError(f"baseline must be a RunResult, got {type(baseline).__name__}")
        import html

        import pandas as pd

        chosen = [m for m in chosen or self.candidates if m in set(baseline.candidates)]
        before = baseline._variants.candidates(baseline._one_epoch(
            epoch if epoch is not None and epoch < baseline.epochs else None))
        before = before.assign(model=before["model"].map(lambda m: f"{m} (baseline)"))
        both = pd.concat([before, frame], ignore_index=True)
        order = [label for m in chosen for label in (f"{m} (baseline)", m)]
        changed = self.changed_items(baseline)
        intro = (f"<div>this run: <b>{html.escape(self.title)}</b> &middot; baseline: "
                 f"<b>{html.escape(baseline.title)}</b></div>" + self.changes(baseline).html())
        return browse(both, suite=suite, filter=filter or "changed", models=order, changed=changed, intro=intro,
                      **view)

    def _chosen_candidates(self, models: list[str] | None) -> list[str] | None:
        """``browse(models=...)``: model labels (each with all its variants) or "model · variant" names."""
        if models is None or not self._variants:
            return models
        from evalnb.results.variant_views import candidate_label

        return [c for m in models for c in ([m] if m in self.candidates else
                                             [candidate_label(m, v) for v in self._variants.names])]

    def _one_epoch(self, epoch: int | None, *, slots: bool = False) -> pd.DataFrame:
        """`samples` of one epoch (all of them for a run of one); ``slots``: task ids as stored (variants unsplit)."""
        frame = self._frame[0] if slots else self.samples
        if epoch is None and self.epochs == 1:
            return frame
        epoch = 0 if epoch is None else epoch
        if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch < self.epochs:
            raise ValueError(f"epoch must be an integer from 0 to {self.epochs - 1}, got {epoch!r}")
        return frame[frame["epoch"] == epoch]


def _as_given(task_id: str | Iterable[str] | None, tasks: list[str]) -> str | list[str] | None:
    """``task_id`` as the comparison tables take it: None, the one id as given, or the checked list."""
    if task_id is not None and tasks and isinstance(task_id, str) and task_id not in tasks:
        return tasks  # a task's own id in a run with variants: its slots
    return _given(task_id, tasks)


def _given(task_id: str | Iterable[str] | None, tasks: list[str]) -> str | list[str] | None:
    """``task_id`` as the comparison tables take it: None, the one id as given, or the checked list."""
    return task_id if task_id is None or isinstance(task_id, str) else tasks


def _reasons(unclustered: Mapping[str, str]) -> dict[str, str]:
    """task -> the ``note`` a paired row of an unclustered task carries."""
    return {task: f"not clustered: {reason}" for task, reason in unclustered.items()}


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


def _stored_baseline(baseline: Any, store: Any) -> RunResult:
    """A baseline given as a RunResult, or as a run id, ``"latest"`` or a run name in ``store``."""
    if isinstance(baseline, RunResult):
        return baseline
    if not isinstance(baseline, str):
        raise TypeError(f"diff() needs the baseline RunResult (e.g. evalnb.load_run(run_id)) or a run id "
                        f"(with store= the .sqlite file it is in), got {type(baseline).__name__}")
    from evalnb.store import UnknownRunError, open_store

    opened = open_store(store)  # what evalnb.load_run does; importing it would make a cycle
    run_id = opened.latest_run_id() if baseline == "latest" else baseline
    try:
        if run_id is None:
            raise UnknownRunError(f"no runs in {opened.path} yet, so there is no 'latest' run")
        opened.get_run(run_id)
        return RunResult(opened, run_id)
    except UnknownRunError:
        if baseline == "latest":
            raise
        runs = opened.list_runs()
        named = list(runs.loc[runs["name"] == baseline, "run_id"])
        if len(named) != 1:
            what = "no run" if not named else f"{len(named)} runs"
            raise UnknownRunError(f"{what} with the id or name {baseline!r} in {opened.path}") from None
        return RunResult(opened, named[0])
