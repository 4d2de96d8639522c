"""Comparisons in words: is each difference real, what is its interval, how many items would it need.

A table of differences is easy to misread: an interval that touches zero, a p-value of 0.08,
an effect smaller than the run could ever detect. `verdicts` turns each row of a `paired`,
`paired_all` or `diff` table into one plain verdict and a sentence a report can carry.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from evalnb.results import stats
from evalnb.results.power import min_detectable_effect, sample_size

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["VERDICT_COLUMNS", "verdicts"]

VERDICT_COLUMNS = (
    "comparison", "task_id", "metric", "n_pairs", "mean_diff", "ci_low", "ci_high", "p_value", "test",
    "verdict", "mde", "n_needed", "text",
)


def verdicts(table: pd.DataFrame, *, alpha: float = 0.05, power: float = 0.8) -> pd.DataFrame:
    """One row per comparison: ``verdict`` ("real", "not shown", "borderline", "no difference",
    "no pairs") and ``text``.

    "real": the 95% interval excludes 0 and the test's p is below ``alpha`` (Holm's p when
    the table has ``p_holm``, else McNemar's for 0/1 metrics, else a t-test on the stderr);
    "not shown": neither; "borderline": they disagree. ``mde``: the smallest true difference
    these pairs detect with ``power``; ``n_needed``: the items needed to detect the difference
    seen, from the per-item SD of the differences (None when no difference was seen).
    "no difference": every pair scored the same (an unchanged task, two identical models): one
    short sentence, no talk of noise or sample sizes (``mde`` and ``n_needed`` stay empty).
    """
    import pandas as pd

    if not hasattr(table, "columns") or not {"n_pairs", "mean_diff", "ci_low", "ci_high", "stderr"} <= set(table.columns):
        raise ValueError("verdicts() takes a table from RunResult.paired, paired_all or diff "
                         "(columns n_pairs, mean_diff, ci_low, ci_high, stderr)")
    names = (table.attrs.get("run"), table.attrs.get("baseline"))  # a diff's two runs, name first then id
    rows = [_verdict(r, alpha, power, names) for r in table.to_dict("records")]
    out = pd.DataFrame.from_records(rows, columns=list(VERDICT_COLUMNS))
    out["n_needed"] = pd.array([r["n_needed"] for r in rows], dtype="Int64")
    from evalnb.results.compact import whole_verdicts

    return whole_verdicts(out)  # displays each sentence whole; every column is still there


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or type(value).__name__ == "NAType"


def _test(row: dict[str, Any]) -> tuple[float, str]:
    if "p_holm" in row and not _missing(row["p_holm"]):
        return float(row["p_holm"]), "Holm-adjusted p"
    if not _missing(row.get("mcnemar_p")) and _missing(row.get("n_clusters")):
        return float(row["mcnemar_p"]), "McNemar p"
    n, mean, stderr = row["n_pairs"], row["mean_diff"], row["stderr"]
    df = (row["n_clusters"] if not _missing(row.get("n_clusters")) else n) - 1
    if n < 2 or _missing(stderr) or df < 1:
        return math.nan, "t-test p"
    if stderr == 0.0:
        return (1.0 if mean == 0.0 else 0.0), "t-test p"
    return stats.t_two_sided_p(mean / stderr, df), "t-test p"


def _verdict(row: dict[str, Any], alpha: float, power: float,
             names: tuple[Any, Any] = (None, None)) -> dict[str, Any]:
    variant = row.get("variant") if isinstance(row.get("variant"), str) and row.get("variant") else None
    if isinstance(row.get("variant_a"), str):  # two variants of one model
        comparison = f"{row['model']}: {row['variant_a']} − {row['variant_b']}"
    elif "model_a" in row and isinstance(row.get("model_a"), str):
        comparison = f"{row['model_a']} − {row['model_b']}" + (f" ({variant})" if variant else "")
    else:
        run, baseline = names
        comparison = f"{row['model']}: {run or 'this run'} − {baseline or 'baseline'}"
    n = int(row["n_pairs"])
    out: dict[str, Any] = {"comparison": comparison, "task_id": row["task_id"], "metric": row["metric"], "n_pairs": n,
                           "mean_diff": row["mean_diff"], "ci_low": row["ci_low"], "ci_high": row["ci_high"],
                           "p_value": math.nan, "test": None, "verdict": "no pairs", "mde": math.nan,
                           "n_needed": None, "text": f"{comparison} on {row['task_id']}: no items in common."}
    if n == 0 or _missing(row["mean_diff"]):
        return out
    p, test = _test(row)
    mean, low, high, stderr = row["mean_diff"], row["ci_low"], row["ci_high"], row["stderr"]
    if mean == 0 and stderr == 0:  # every pair the same: nothing to weigh against noise
        out.update(p_value=p, test=test, verdict="no difference",
                   text=f"{comparison} on {row['task_id']} ({row['metric']}): no difference; all {n} items scored "
                        "the same in both.")
        return out
    excludes = not _missing(low) and (low > 0 or high < 0)
    significant = not math.isnan(p) and p < alpha
    verdict = "real" if excludes and significant else "not shown" if not (excludes or significant) else "borderline"
    sd = None if _missing(stderr) else float(stderr) * math.sqrt(n)
    mde = math.nan if sd is None else min_detectable_effect(n, sd, alpha=alpha, power=power)
    needed = None if sd is None or mean == 0 else sample_size(abs(mean), sd, alpha=alpha, power=power)
    out.update(p_value=p, test=test, verdict=verdict, mde=mde, n_needed=needed)
    interval = "no interval" if _missing(low) else f"95% CI [{low:.3f}, {high:.3f}]"
    head = f"{comparison} on {row['task_id']} ({row['metric']}): {mean:+.3f}, {interval}"
    head += "." if math.isnan(p) else f", {test} = {p:.2g}."
    says = {
        "real": "A real difference: the interval excludes 0.",
        "not shown": "Not shown to be real: the interval includes 0, so this could be noise.",
        "borderline": "Borderline: the interval and the test disagree; more items would settle it.",
    }[verdict]
    sizes = []
    if not math.isnan(mde) and sd:  # sd == 0: every pair moved alike; no noise to speak of
        sizes.append(f"With {n} items, a difference under {mde:.3f} could not be told from noise")
    if needed is not None and sd:
        sizes.append(f"detecting a true difference of {abs(mean):.3f} takes about {needed} items "
                     f"({power:.0%} power, α = {alpha:g})")
    tail = ("; ".join(sizes) + ".") if sizes else ""
    out["text"] = " ".join(part for part in (head, says, tail[:1].upper() + tail[1:] if tail else "") if part)
    return out
