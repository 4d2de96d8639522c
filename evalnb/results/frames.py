"""The frames a `RunResult` is built from: the full `samples` frame, and the lean score frame.

`samples_frame` turns sample columns (the store's shape) into the `samples` DataFrame, one row
per sample with every text. `lean_frame` reads only the keys, status and scores of a stored
run, one (task, model) at a time as numpy arrays (`Store.lean_arrays`), into one float column
per metric: what every summary needs (metrics, summarize, scores, paired, diff), at ~50 bytes
a sample instead of the samples frame's ~1.5 kB.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from evalnb.store import Store

__all__ = ["FRAME_FIELDS", "SAMPLE_COLUMNS", "lean_frame", "metric_columns", "metric_specs", "samples_frame"]


def metric_specs(manifest: Mapping[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    """task id -> its metrics [{id, aggregation, higher_is_better}], as the manifest declares them.

    A task without `metrics` gets its grader's `metric_id` (default "score") when the grader is
    per-sample; an aggregate (batch) grader reports its own metrics, so it gets none here.
    """
    specs: dict[str, list[dict[str, Any]]] = {}
    for task in (manifest or {}).get("tasks") or []:
        declared = task.get("metrics") or []
        grader = task.get("grader") or {}
        execution = grader.get("execution") or ("aggregate" if grader.get("contract") == "batch" else "per_sample")
        if declared:
            found = [m if isinstance(m, Mapping) else {"id": str(m)} for m in declared]
        elif execution == "aggregate":
            found = []
        else:
            found = [{"id": grader.get("metric_id") or "score"}]
        specs[task["id"]] = [
            {"id": m["id"], "aggregation": m.get("aggregation") or "mean", "higher_is_better": m.get("higher_is_better", True)}
            for m in found
        ]
    return specs


# Fixed columns of `samples`; metric columns go between LEAD and TAIL.
_LEAD = ("task_id", "model", "sample_index", "epoch", "status", "prompt", "prompt_text", "target", "output_text",
         "extracted_output")
_TAIL = ("error", "log", "latency_s", "input_tokens", "output_tokens", "response_id", "judge", "dataset_row")
# cost columns come last: cost_usd of the candidate call (0 when answered from the store, NaN
# without a price), judge_cost_usd of the sample's grader model calls, cached (from the store)
_COST = ("cost_usd", "judge_cost_usd", "cached")
SAMPLE_COLUMNS = _LEAD + _TAIL + _COST
# the stored fields `samples_frame` reads (tokens come from `usage`, metric columns from
# `scores`): a run's keys, timestamps and digests are not read back for the frame
FRAME_FIELDS = (*(c for c in SAMPLE_COLUMNS if c not in ("input_tokens", "output_tokens", "judge_cost_usd")),
                "usage", "scores")

def _as_score(value: Any) -> float:
    """A stored score as float; bools are 0/1; None, NaN and anything non-numeric are NaN."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    return math.nan


def _error_message(error: Any) -> str | None:
    if error is None or isinstance(error, str):
        return error
    if isinstance(error, Mapping) and "message" in error:
        return f"{error['type']}: {error['message']}" if error.get("type") else str(error["message"])
    import json

    return json.dumps(error, ensure_ascii=False)


def _tokens(usage: Any, *names: str) -> Any:
    if type(usage) is dict or isinstance(usage, Mapping):  # a plain dict skips the ABC check (per sample)
        for name in names:
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None

def metric_columns(manifest: Mapping[str, Any] | None, keys_by_task: Mapping[str, Any]) -> dict[str, str]:
    """Metric id -> its `samples` column: the declared metrics, then any other score key found."""
    declared = [m["id"] for specs in metric_specs(manifest).values() for m in specs]
    found = sorted({k for keys in keys_by_task.values() for k in keys} - set(declared))
    metric_ids = list(dict.fromkeys(declared + found))
    return {m: (f"score:{m}" if m in SAMPLE_COLUMNS else m) for m in metric_ids}


def samples_frame(cols: Mapping[str, list[Any]], columns: Mapping[str, str],
                  judge_costs: Mapping[tuple[str, str, int, int], float] | None = None) -> pd.DataFrame:
    """The `samples` frame of some samples given as columns (`Store.column_pages`' shape, pages joined).

    `judge_costs` ((task, model, index, epoch) -> USD) fills ``judge_cost_usd``. The frame ends
    with a ``_cached_input`` column (input tokens the provider's prompt cache served, for
    `RunResult.costs`) that the caller removes.
    """
    import pandas as pd

    data: dict[str, list[Any]] = {c: cols[c] for c in SAMPLE_COLUMNS if c in cols}
    prompts: dict[str, str] = {}  # every model of an item shares one prompt string: keep one copy
    data["prompt"] = [prompts.setdefault(p, p) if isinstance(p, str) else p for p in cols["prompt"]]
    data["error"] = [None if e is None else _error_message(e) for e in cols["error"]]
    usages = cols["usage"]
    data["input_tokens"] = [None if u is None else _tokens(u, "input_tokens", "prompt_tokens") for u in usages]
    data["output_tokens"] = [None if u is None else _tokens(u, "output_tokens", "completion_tokens") for u in usages]
    score_dicts: list[Mapping[str, Any]] = [sc if type(sc) is dict or isinstance(sc, Mapping) else {}
                                            for sc in cols["scores"]]
    data["epoch"] = [0 if e is None else e for e in cols.get("epoch") or [0] * len(cols["task_id"])]
    frame = pd.DataFrame({c: data[c] for c in _LEAD if c != "prompt"})
    # object dtype keeps the shared str objects: one copy of each prompt, not one per model
    frame.insert(_LEAD.index("prompt"), "prompt", pd.Series(data["prompt"], dtype="object"))
    frame["sample_index"] = frame["sample_index"].astype("int64")
    frame["epoch"] = frame["epoch"].astype("int64")
    for metric, column in columns.items():
        frame[column] = pd.Series([_as_score(d.get(metric)) for d in score_dicts], dtype="float64")
    for c in _TAIL:
        frame[c] = pd.Series(data[c], dtype="object")
    frame["latency_s"] = pd.to_numeric(frame["latency_s"], errors="coerce").astype("float64")
    for c in ("input_tokens", "output_tokens"):
        frame[c] = frame[c].astype("Int64")
    _add_costs(frame, cols, judge_costs or {})
    return frame


def _add_costs(frame: pd.DataFrame, cols: Mapping[str, list[Any]],
               judge_costs: Mapping[tuple[str, str, int, int], float]) -> None:
    import pandas as pd

    n = len(frame)
    frame["cost_usd"] = pd.to_numeric(pd.Series(cols.get("cost_usd") or [None] * n, dtype="object"),
                                      errors="coerce").astype("float64")
    frame["judge_cost_usd"] = pd.Series(
        [judge_costs.get(k, math.nan) for k in zip(cols["task_id"], cols["model"], cols["sample_index"],
                                                   [e or 0 for e in cols.get("epoch") or [0] * n])]
        if judge_costs else [math.nan] * n, dtype="float64")
    frame["cached"] = pd.array([None if c is None else bool(c) for c in cols.get("cached") or [None] * n],
                               dtype="boolean")
    frame["_cached_input"] = [(_tokens(u, "cached_input_tokens") or 0) if u is not None else 0 for u in cols["usage"]]


def lean_frame(store: "Store", run_id: str, manifest: Mapping[str, Any] | None,
               order: Callable[[list[tuple[str, str]]], list[tuple[str, str]]] | None = None,
               ) -> tuple["pd.DataFrame", dict[str, str], dict[str, list[str]]]:
    """(frame, metric id -> column, task -> score keys found) of a stored run.

    Keys, status, ``missing_field`` (1.0 when the sample's prompt named a field its row lacks,
    NaN when not recorded) and one float column per metric, read one (task, model) at a time as
    numpy columns (`Store.lean_arrays`: the `scores` table and a covering index): no sample's
    scores or dataset row is decoded in Python. Rows come by (task, model) in the store's key
    order, or as ``order`` arranges those pairs, then by item and epoch.
    """
    import numpy as np
    import pandas as pd

    from evalnb.store import SAMPLE_STATUSES

    keys_by_task = store.score_keys(run_id)
    columns = metric_columns(manifest, keys_by_task)
    groups = store.sample_groups(run_id)  # names not read per row
    parts: dict[str, list[np.ndarray]] = {}
    counts: list[int] = []
    for task, model in groups if order is None else order(groups):
        arrays = store.lean_arrays(run_id, task, model, list(columns))
        counts.append(len(arrays["sample_index"]))
        for name, values in arrays.items():
            parts.setdefault(name, []).append(values)
    ordered = groups if order is None else order(groups)
    n = sum(counts)

    def joined(name: str, dtype: str) -> np.ndarray:  # each field's pages dropped once joined
        found = parts.pop(name, None)
        return np.concatenate(found) if found else np.full(n, np.nan) if dtype == "float64" else np.array([], dtype)

    groups_codes = np.repeat(np.arange(len(ordered), dtype="int32"), counts)
    data: dict[str, Any] = {
        "task_id": _strings([t for t, _ in ordered], groups_codes),
        "model": _strings([m for _, m in ordered], groups_codes),
        "sample_index": joined("sample_index", "int64"),
        "epoch": joined("epoch", "int64"),
        "status": _strings(list(SAMPLE_STATUSES), joined("status", "int32")),
        "missing_field": joined("missing_field", "float64"),
    }
    for metric, column in columns.items():
        data[column] = joined(f"score:{metric}", "float64")
    return pd.DataFrame(data, copy=False), columns, keys_by_task


def _strings(names: list[str], codes: Any) -> Any:
    """``names[codes]`` as the column pandas would make of those strings, built from the codes.

    With pandas' pyarrow-backed ``str`` dtype the column is made in Arrow from a dictionary
    (names + codes) instead of converting a million Python strings one by one; otherwise (or
    for a code past the names) it is the object array pandas infers from.
    """
    import numpy as np
    import pandas as pd

    dtype = pd.Series(["x"]).dtype
    if getattr(dtype, "storage", None) == "pyarrow" and (len(codes) == 0 or int(codes.max()) < len(names)):
        import pyarrow as pa

        column = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(names, pa.large_string()))
        return pd.array(column.cast(pa.large_string()), dtype=dtype)
    return np.array([*names, None], dtype=object)[np.minimum(codes, len(names))]
