"""Win rates of one candidate against another from pairwise verdicts, with bootstrap intervals.

Per task: ``n`` pairs with a verdict (rows with an error are left out and counted in
``errors``), ``a_wins``, ``b_wins``, ``ties``, ``win_rate = (a_wins + ties / 2) / n`` and its
95% percentile bootstrap interval over *items* (`stats.bootstrap_interval`, 2,000 resamples,
seed 0, as every evalnb interval: with epochs an item's score is its mean over epochs, so
the asks of one item move together). ``inconsistent`` counts the pairs whose verdict changed
with the order (judged both ways), and ``position_bias`` is the share of those that the output
shown first won both times (1.0: the judge picks whatever it reads first; NaN: nothing was
inconsistent).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["WIN_RATE_COLUMNS", "win_rate_table"]

WIN_RATE_COLUMNS = ("task_id", "a", "b", "n", "a_wins", "b_wins", "ties", "win_rate", "ci_low", "ci_high",
                    "inconsistent", "position_bias", "errors")
_SCORE = {"a": 1.0, "tie": 0.5, "b": 0.0}
N_RESAMPLES, SEED = 2000, 0


def win_rate_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per (task_id, a, b) of a `RunResult.pairwise` frame, in the frame's order."""
    import pandas as pd

    from evalnb.results.stats import bootstrap_interval

    rows = []
    for (task, a, b), part in pairs.groupby(["task_id", "a", "b"], sort=False):
        judged = part[part["verdict"].notna()]
        n = len(judged)
        counts = judged["verdict"].value_counts()
        a_wins, b_wins, ties = (int(counts.get(v, 0)) for v in ("a", "b", "tie"))
        per_item = judged.assign(_s=judged["verdict"].map(_SCORE)).groupby("sample_index", sort=False)["_s"].mean()
        low = high = math.nan
        if len(per_item) >= 2:
            low, high = bootstrap_interval(per_item.to_numpy(dtype=float), N_RESAMPLES, SEED)
        flipped = judged[judged["consistent"].eq(False).fillna(False).astype(bool)]
        first_won = int(((flipped["verdict_ab"] == "a") & (flipped["verdict_ba"] == "b")).sum())
        rows.append({
            "task_id": task, "a": a, "b": b, "n": n, "a_wins": a_wins, "b_wins": b_wins, "ties": ties,
            "win_rate": (a_wins + ties / 2) / n if n else math.nan, "ci_low": low, "ci_high": high,
            "inconsistent": len(flipped), "position_bias": first_won / len(flipped) if len(flipped) else math.nan,
            "errors": int(part["error"].notna().sum()),
        })
    table = pd.DataFrame.from_records(rows, columns=list(WIN_RATE_COLUMNS))
    ints = {c: "int64" for c in ("n", "a_wins", "b_wins", "ties", "inconsistent", "errors")}
    floats = {c: "float64" for c in ("win_rate", "ci_low", "ci_high", "position_bias")}
    return table.astype({**ints, **floats})
