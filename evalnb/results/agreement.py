"""How far a judge agrees with people: accuracy with a Wilson interval, Cohen's kappa, confusion.

The judge's verdicts are a metric of the run (e.g. ``judged``, 0/1); a person's verdicts
on the same answers are ``labels``. Values are compared as categories (rounded to 9
decimals, so 0.1 + 0.2 equals 0.3): label the answers on the scale the metric uses.

- ``accuracy``: the share of answers where the judge gave the person's value, with the 95%
  Wilson interval (each answer is agree / disagree: a proportion).
- ``cohen_kappa``: (p_o − p_e) / (1 − p_e) over the values either rater used, p_e the
  agreement expected if judge and person chose independently at their own rates. NaN when
  p_e = 1 (both always gave one and the same value: agreement says nothing then).
- ``confusion``: {person's value: {judge's value: count}}.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

AGREEMENT_COLUMNS = (
    "task_id", "model", "metric", "n", "n_unscored", "accuracy", "ci_low", "ci_high", "cohen_kappa", "confusion",
)
_SHOWN = 5  # unknown samples named in an error


def cohen_kappa(first: list[Any], second: list[Any]) -> float:
    """Cohen's kappa of two raters' category lists (same length, paired by position)."""
    n = len(first)
    if n == 0 or n != len(second):
        raise ValueError(f"cohen_kappa needs two lists of the same, non-zero length; got {n} and {len(second)}")
    observed = sum(a == b for a, b in zip(first, second)) / n
    a_counts, b_counts = Counter(first), Counter(second)
    expected = sum(a_counts[k] * b_counts.get(k, 0) for k in a_counts) / (n * n)
    if expected >= 1.0:
        return math.nan
    return (observed - expected) / (1.0 - expected)


def _category(value: float) -> float | int:
    value = round(float(value), 9)
    return int(value) if value.is_integer() else value


def _check_labels(labels: Any, models: list[str]) -> pd.DataFrame:
    import pandas as pd

    if not isinstance(labels, pd.DataFrame):
        raise TypeError(f"labels must be a DataFrame with task_id, sample_index and label columns, "
                        f"got {type(labels).__name__}")
    missing = [c for c in ("task_id", "sample_index", "label") if c not in labels.columns]
    if missing:
        raise ValueError(f"labels is missing column(s) {', '.join(missing)}; it has: "
                         f"{', '.join(map(str, labels.columns)) or 'none'}")
    frame = labels.reset_index(drop=True)
    if "model" not in frame.columns:
        if len(models) != 1:
            raise ValueError(f"labels has no 'model' column, but the run has {len(models)} models ({', '.join(models)}): "
                             "a person's label is for one model's answer; add a model column")
        frame = frame.assign(model=models[0])
    if "epoch" not in frame.columns:
        frame = frame.assign(epoch=0)
    for i, row in enumerate(frame[["task_id", "model", "sample_index", "epoch", "label"]].itertuples(index=False)):
        where = f"labels row {i} (task_id={row.task_id!r}, model={row.model!r}, sample_index={row.sample_index!r})"
        for name in ("sample_index", "epoch"):
            value = getattr(row, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or int(value) != value:
                raise ValueError(f"{where}: {name} must be an integer, got {value!r}")
        label = row.label
        if isinstance(label, bool):
            continue
        if not isinstance(label, (int, float)) or not math.isfinite(label):
            raise ValueError(f"{where}: label must be a finite number on the metric's scale (e.g. 0/1), got {label!r}")
    frame = frame.astype({"sample_index": "int64", "epoch": "int64"})
    dupes = frame.duplicated(["task_id", "model", "sample_index", "epoch"], keep=False)
    if dupes.any():
        first = frame[dupes].iloc[0]
        raise ValueError(f"labels has {int(dupes.sum())} rows for the same sample, e.g. task_id={first.task_id!r}, "
                         f"model={first.model!r}, sample_index={int(first.sample_index)}: give one label per answer")
    return frame


def judge_agreement(samples: pd.DataFrame, column: str | None, labels: Any, *, metric: str,
                    models: list[str], available: list[str]) -> pd.DataFrame:
    """The agreement table of `RunResult.judge_agreement`: one row per (task_id, model) labelled.

    ``column``: the samples column of ``metric`` (None if the run has no such metric;
    ``available`` lists the ones it has).
    """
    import pandas as pd

    if column is None:
        raise ValueError(f"metric {metric!r} is not a metric of this run; its metrics: {', '.join(available) or 'none'}")
    frame = _check_labels(labels, models)
    keys = ["task_id", "model", "sample_index", "epoch"]
    judged = samples[keys].assign(judged=samples[column].where(samples["status"] == "completed"))
    merged = frame.merge(judged, on=keys, how="left", indicator=True)
    unknown = merged[merged["_merge"] == "left_only"]
    if len(unknown):
        shown = "; ".join(f"task_id={r.task_id!r}, model={r.model!r}, sample_index={r.sample_index}"
                          + (f", epoch={r.epoch}" if r.epoch else "")
                          for r in unknown.head(_SHOWN).itertuples(index=False))
        more = f" (and {len(unknown) - _SHOWN} more)" if len(unknown) > _SHOWN else ""
        raise ValueError(f"labels name {len(unknown)} sample(s) this run does not have: {shown}{more}")
    rows = []
    for (task, model), part in merged.groupby(["task_id", "model"], sort=False):
        scored = part[part["judged"].notna()]
        person = [_category(v) for v in scored["label"]]
        judge = [_category(v) for v in scored["judged"]]
        rows.append({"task_id": task, "model": model, "metric": metric, "n": len(person),
                     "n_unscored": len(part) - len(person), **_agreement(person, judge)})
    table = pd.DataFrame.from_records(rows, columns=list(AGREEMENT_COLUMNS))
    return table.astype({"n": "int64", "n_unscored": "int64", "accuracy": "float64", "ci_low": "float64",
                         "ci_high": "float64", "cohen_kappa": "float64"})


def _agreement(person: list[Any], judge: list[Any]) -> dict[str, Any]:
    """accuracy [95% Wilson], cohen_kappa and confusion of two raters' paired categories."""
    from evalnb.results.stats import wilson_interval

    n = len(person)
    confusion: dict[Any, dict[Any, int]] = {}
    for p, j in zip(person, judge):
        confusion.setdefault(p, {}).setdefault(j, 0)
        confusion[p][j] += 1
    agree = sum(p == j for p, j in zip(person, judge))
    low, high = wilson_interval(agree, n) if n else (math.nan, math.nan)
    return {"accuracy": agree / n if n else math.nan, "ci_low": low, "ci_high": high,
            "cohen_kappa": cohen_kappa(person, judge) if n else math.nan,
            "confusion": {k: dict(sorted(v.items())) for k, v in sorted(confusion.items())}}


def confusion_counts(confusion: Mapping[Any, Mapping[Any, int]]) -> tuple[list[Any], list[list[int]]]:
    """(values, counts[person][judge]) of a ``confusion`` dict, over every value either side used."""
    values = sorted({*confusion, *(j for row in confusion.values() for j in row)})
    return values, [[int(confusion.get(a, {}).get(b, 0)) for b in values] for a in values]


PAIRWISE_AGREEMENT_COLUMNS = (
    "task_id", "a", "b", "n", "n_unjudged", "accuracy", "ci_low", "ci_high", "cohen_kappa", "confusion",
)
_PAIR_LABELS = ("a", "b", "tie")


def is_pairwise_labels(labels: Any) -> bool:
    """Whether ``labels`` are pairwise (a person's verdict on two candidates' answers): a and b columns."""
    columns = getattr(labels, "columns", ())
    return "a" in columns and "b" in columns


def pairwise_agreement(labels: Any, verdicts_of: Any) -> pd.DataFrame:
    """How far pairwise verdicts agree with people's: one row per (task_id, a, b) labelled.

    ``labels``: task_id, sample_index, a, b, label ("a", "b" or "tie"), optional epoch (default
    0). ``verdicts_of(a, b, tasks)`` gives the judge's pairwise frame of that pair. A labelled pair
    the judge gave no verdict (an error) counts in ``n_unjudged``; a labelled item the run has not
    judged for that pair (neither answered, or another task) is a ValueError naming it.
    """
    import pandas as pd

    if not isinstance(labels, pd.DataFrame):
        raise TypeError(f"labels must be a DataFrame, got {type(labels).__name__}")
    missing = [c for c in ("task_id", "sample_index", "a", "b", "label") if c not in labels.columns]
    if missing:
        raise ValueError(f"pairwise labels are missing column(s) {', '.join(missing)}; they have: "
                         f"{', '.join(map(str, labels.columns))}")
    frame = labels.reset_index(drop=True)
    if "epoch" not in frame.columns:
        frame = frame.assign(epoch=0)
    for i, row in enumerate(frame.itertuples(index=False)):
        if row.label not in _PAIR_LABELS:
            raise ValueError(f"labels row {i} (task_id={row.task_id!r}, sample_index={row.sample_index!r}, "
                             f"a={row.a!r}, b={row.b!r}): label must be 'a', 'b' or 'tie', got {row.label!r}")
    keys = ["task_id", "sample_index", "epoch"]
    rows = []
    for (a, b), part in frame.groupby(["a", "b"], sort=False):
        judged = verdicts_of(a, b, list(dict.fromkeys(part["task_id"])))
        merged = part.astype({"sample_index": "int64", "epoch": "int64"}).merge(
            judged[[*keys, "verdict"]], on=keys, how="left", indicator=True)
        unknown = merged[merged["_merge"] == "left_only"]
        if len(unknown):
            first = unknown.iloc[0]
            raise ValueError(f"labels name {len(unknown)} item(s) the judge has no pair for ({a!r} vs {b!r}), e.g. "
                             f"task_id={first.task_id!r}, sample_index={int(first.sample_index)}: both must have "
                             "answered it")
        for task, one in merged.groupby("task_id", sort=False):
            scored = one[one["verdict"].notna()]
            person, judge = scored["label"].tolist(), scored["verdict"].tolist()
            rows.append({"task_id": task, "a": a, "b": b, "n": len(person), "n_unjudged": len(one) - len(person),
                         **_agreement(person, judge)})
    table = pd.DataFrame.from_records(rows, columns=list(PAIRWISE_AGREEMENT_COLUMNS))
    return table.astype({"n": "int64", "n_unjudged": "int64", "accuracy": "float64", "ci_low": "float64",
                         "ci_high": "float64", "cohen_kappa": "float64"})
