"""`RunResult.rank`'s statistics alone: Bradley–Terry fit plus its 2,000-resample bootstrap.

Synthetic verdicts (no judge): k candidates with normal strengths, every pair judged on every
item (10% ties). Prints seconds per table, without and with length control.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_bradley_terry.py
"""

from __future__ import annotations

import time
from itertools import combinations

import numpy as np
import pandas as pd

from evalnb.results.bradley_terry import rank_table


def verdicts(k: int, items: int, rng: np.random.Generator) -> tuple[pd.DataFrame, list[str], list[float]]:
    names = [f"m{i}" for i in range(k)]
    theta = rng.normal(0, 1, k)
    rows, lengths = [], []
    for a, b in combinations(range(k), 2):
        p = 1 / (1 + np.exp(-(theta[a] - theta[b])))
        for n in range(items):
            u = rng.random()
            verdict = "a" if u < 0.9 * p else "b" if u > 0.9 * p + 0.1 else "tie"
            rows.append({"task_id": "t", "sample_index": n, "epoch": 0, "a": names[a], "b": names[b],
                         "verdict": verdict})
            lengths.append(rng.normal(0, 100))
    return pd.DataFrame(rows), names, lengths


def main() -> None:
    rng = np.random.default_rng(1)
    for k, items, with_length in ((3, 200, False), (5, 500, False), (8, 1000, False), (3, 200, True),
                                  (5, 500, True)):
        frame, names, lengths = verdicts(k, items, rng)
        start = time.perf_counter()
        rank_table(frame, names, lengths=lengths if with_length else None)
        print(f"{k} candidates x {items} items ({len(frame)} judged pairs), length control {with_length}: "
              f"{time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
