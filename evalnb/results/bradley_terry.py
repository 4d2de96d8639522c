"""Bradley–Terry scores of candidates from pairwise verdicts, with bootstrap intervals over items.

The model (as Arena-Hard-Auto fits it): P(i beats j) = σ(θ_i − θ_j). Every judged pair is one
observation whose outcome is i's share of the win: 1, 0 (a loss) or 0.5 for a tie (a tie is
half a win each way, which is what Arena-Hard's doubled-win weighting amounts to). θ is the
maximum-likelihood fit under a practically flat Gaussian prior (ridge ``RIDGE`` = 1e-4 on θ):
where the plain maximum-likelihood fit exists it moves the scores by less than a hundredth of a
point, and where it does not (a candidate that won every comparison) the scores stay finite
instead of running off. Scores are on the Elo scale Arena-Hard reports:
``1000 + 400 · θ / ln 10``, centred so the candidates average 1000 (a 400-point lead is 10:1
odds).

``length_control=True`` adds AlpacaEval 2's length term to the same regression: P(i beats j)
= σ(θ_i − θ_j + γ · tanh(Δ / sd(Δ))), Δ the difference in output length (characters) of the
pair and sd(Δ) its standard deviation over the pairs. The scores then come from θ alone (what is
left once longer-is-better is taken out) and ``lc_win_rate`` is each candidate's average,
over the others, of σ(θ_i − θ_j): its win rate had the outputs been the same length.

A candidate with no judged pair (every one of its pairs an error: the judge's replies named no
verdict) has no score: ``score``, ``ci_low``, ``ci_high`` NaN and ``rank`` <NA>, listed last, and
``.attrs["note"]`` says so; when no pair at all has a verdict every score is NaN (as `win_rate`
gives n=0 then) rather than a fit of nothing. Equal scores share a rank (the best place, as
``rank(method="min")``): three candidates a judge cannot tell apart are all rank 1.

Intervals: 95% percentile bootstrap over items (an item's judged pairs, every epoch, move
together), `N_RESAMPLES` resamples, seed 0, each refitted from the full fit.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RANK_COLUMNS", "elo_scale", "fit_bradley_terry", "rank_table"]

RANK_COLUMNS = ("model", "score", "ci_low", "ci_high", "rank", "wins", "losses", "ties")
RIDGE = 1e-4
N_RESAMPLES, SEED = 2000, 0
SCALE, BASE = 400.0, 1000.0


def elo_scale(theta: Any) -> Any:
    """θ (natural log-odds, centred) on the Elo scale: ``1000 + 400 · θ / ln 10``."""
    return BASE + SCALE * theta / math.log(10)


def fit_bradley_terry(design: Any, share: Any, weight: Any, start: Any = None) -> Any:
    """The coefficients maximising Σ w [s log σ(Xβ) + (1 − s) log σ(−Xβ)] − RIDGE/2 · |β|² (damped Newton)."""
    import numpy as np

    X, s, w = np.asarray(design, float), np.asarray(share, float), np.asarray(weight, float)
    beta = np.zeros(X.shape[1]) if start is None else np.array(start, float)

    def objective(b: Any) -> float:
        z = X @ b
        return float(w @ (s * -np.logaddexp(0, -z) + (1 - s) * -np.logaddexp(0, z)) - RIDGE / 2 * b @ b)

    current = objective(beta)
    for _ in range(200):
        p = 1 / (1 + np.exp(-(X @ beta)))
        grad = X.T @ (w * (s - p)) - RIDGE * beta
        hess = (X * (w * p * (1 - p))[:, None]).T @ X + RIDGE * np.eye(X.shape[1])
        step = np.linalg.solve(hess, grad)
        size = 1.0
        while True:
            trial = beta + size * step
            value = objective(trial)
            if value >= current - 1e-12 or size < 1e-8:
                break
            size /= 2
        beta, moved, current = trial, float(np.max(np.abs(size * step))), value
        if moved < 1e-10:
            break
    return beta


def _design(pairs: pd.DataFrame, names: list[str], lengths: Any) -> tuple[Any, Any, Any]:
    """(X, share of the win for a, item index) of the judged pairs, one row each; X has a column per
    candidate (+1 for a, −1 for b) and, with ``lengths``, the tanh length term last."""
    import numpy as np

    column = {n: i for i, n in enumerate(names)}
    X = np.zeros((len(pairs), len(names) + (lengths is not None)))
    rows = np.arange(len(pairs))
    X[rows, pairs["a"].map(column).to_numpy()] = 1.0
    X[rows, pairs["b"].map(column).to_numpy()] = -1.0
    if lengths is not None:
        delta = np.asarray(lengths, float)
        sd = float(delta.std(ddof=1)) if len(delta) > 1 else 0.0
        X[:, -1] = np.tanh(delta / sd) if sd > 0 else 0.0
    share = pairs["verdict"].map({"a": 1.0, "tie": 0.5, "b": 0.0}).to_numpy(dtype=float)
    items = pairs.groupby(["task_id", "sample_index"], sort=False).ngroup().to_numpy()
    return X, share, items


def _by_item(X: Any, share: Any, items: Any, k: int) -> tuple[Any, Any, Any]:
    """Without a length term a row only matters through its pair of candidates: (one design row per
    pair of candidates, pairs judged per item and pair, i's win share per item and pair), so a
    resample is two matrix products and a fit over at most k(k−1)/2 rows, whatever the item count."""
    import numpy as np

    first, second = X[:, :k].argmax(axis=1), X[:, :k].argmin(axis=1)
    low, high = np.minimum(first, second), np.maximum(first, second)
    cell_of = {(i, j): c for c, (i, j) in enumerate((i, j) for i in range(k) for j in range(i + 1, k))}
    cells = np.array([cell_of[(i, j)] for i, j in zip(low.tolist(), high.tolist())], dtype=int)
    won = np.where(first == low, share, 1.0 - share)  # the lower-numbered candidate's share
    n_items = int(items.max()) + 1 if len(items) else 0
    counts, wins = np.zeros((n_items, len(cell_of))), np.zeros((n_items, len(cell_of)))
    np.add.at(counts, (items, cells), 1.0)
    np.add.at(wins, (items, cells), won)
    design = np.zeros((len(cell_of), k))
    for (i, j), c in cell_of.items():
        design[c, i], design[c, j] = 1.0, -1.0
    return design, counts, wins


def rank_table(pairs: pd.DataFrame, names: list[str], *, lengths: Any = None) -> pd.DataFrame:
    """The `RunResult.rank` table from a frame of judged pairs (verdict not None), best first.

    ``lengths``: per row, len(a's output) − len(b's output), for length control (None: without).
    """
    import numpy as np
    import pandas as pd

    pairs = pairs.reset_index(drop=True)
    if lengths is not None:
        lengths = np.asarray(lengths, float)
    if pairs.empty:
        table = _unscored(names, "no pair got a verdict (every judge reply was an error): no scores")
        return table.assign(lc_win_rate=math.nan) if lengths is not None else table
    X, share, items = _design(pairs, names, lengths)
    k = len(names)
    n_items = int(items.max()) + 1 if len(items) else 0
    rng = np.random.default_rng(SEED)
    draws = rng.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=N_RESAMPLES) if n_items else None
    if lengths is None:
        design, counts, wins = _by_item(X, share, items, k)

        def fit(weights: Any, start: Any = None) -> Any:
            n, s = weights @ counts, weights @ wins
            keep = n > 0
            return fit_bradley_terry(design[keep], s[keep] / n[keep], n[keep], start)
    else:
        def fit(weights: Any, start: Any = None) -> Any:
            return fit_bradley_terry(X, share, weights[items], start)
    beta = fit(np.ones(n_items))
    boot = np.array([fit(d.astype(float), beta) for d in draws]) if draws is not None else np.zeros((0, len(beta)))
    scores = elo_scale(beta[:k])
    if len(boot):
        low, high = (elo_scale(np.percentile(boot[:, :k], q, axis=0)) for q in (2.5, 97.5))
    else:
        low = high = np.full(k, math.nan)
    rows = []
    for i, name in enumerate(names):
        as_a, as_b = pairs[pairs["a"] == name]["verdict"], pairs[pairs["b"] == name]["verdict"]
        rows.append({"model": name, "score": scores[i], "ci_low": low[i], "ci_high": high[i],
                     "wins": int((as_a == "a").sum() + (as_b == "b").sum()),
                     "losses": int((as_a == "b").sum() + (as_b == "a").sum()),
                     "ties": int((as_a == "tie").sum() + (as_b == "tie").sum())})
        if lengths is not None:
            others = [beta[i] - beta[j] for j in range(k) if j != i]
            rows[-1]["lc_win_rate"] = float(np.mean(1 / (1 + np.exp(-np.array(others))))) if others else math.nan
    seen = set(pairs["a"]) | set(pairs["b"])
    unjudged = [name for name in names if name not in seen]
    for row in rows:
        if row["model"] in unjudged:  # the prior alone holds its θ at 0: that is no score
            row.update(score=math.nan, ci_low=math.nan, ci_high=math.nan)
    table = pd.DataFrame.from_records(rows)
    table = table.sort_values("score", ascending=False, kind="stable", na_position="last").reset_index(drop=True)
    table.insert(4, "rank", _ranks(table["score"]))
    if lengths is not None:
        table.attrs["length_coef"] = float(beta[-1])
    if unjudged:
        table.attrs["note"] = f"no pair with a verdict for {', '.join(unjudged)}: no score"
    return table.astype({"wins": "int64", "losses": "int64", "ties": "int64"})


def _ranks(scores: pd.Series) -> Any:
    """1 for the best score; equal scores (to a millionth of a point, what is left of a fit's
    rounding) share the best place of their group; NaN scores have no rank (<NA>). ``int64`` when
    every candidate is ranked, ``Int64`` otherwise."""
    ranks = scores.round(6).rank(method="min", ascending=False)
    return ranks.astype("int64") if ranks.notna().all() else ranks.astype("Int64")


def _unscored(names: list[str], note: str) -> pd.DataFrame:
    """The rank table when nothing can be fitted: every candidate listed, no score, no rank."""
    import pandas as pd

    table = pd.DataFrame({"model": list(names), "score": math.nan, "ci_low": math.nan, "ci_high": math.nan,
                          "rank": pd.array([pd.NA] * len(names), dtype="Int64"), "wins": 0, "losses": 0, "ties": 0})
    table = table.astype({"score": "float64", "ci_low": "float64", "ci_high": "float64",
                          "wins": "int64", "losses": "int64", "ties": "int64"})
    table.attrs["note"] = note
    return table
