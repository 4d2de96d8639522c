#!/usr/bin/env python3
"""`paired` alone on a synthetic scores frame (run by hand): seconds per pair and task.

Two models, one task, N items (default 200,000), a 0/1 metric and a float one: `paired` per
metric, then `paired_all` on the two models (per metric) and `diff_scores` against a second
synthetic run (2 models x 2 metrics, 4 rows), each timed on its own. Run it with PYTHONPATH
pointing at the code to measure; run two builds alternately on a busy machine:

    PYTHONPATH=. .venv/bin/python benchmarks/bench_paired.py --items 200000
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import pandas as pd


def scores(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    parts = []
    for model, p in (("a", 0.62), ("b", 0.60)):
        for metric, values in (("accuracy", (rng.random(n) < p).astype(float)), ("f1", rng.random(n))):
            parts.append(pd.DataFrame({"task_id": "qa", "model": model, "sample_index": np.arange(n),
                                       "metric": metric, "value": values}))
    return pd.concat(parts, ignore_index=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--metric", action="append")
    args = parser.parse_args()
    import evalnb
    from evalnb.results.comparison import paired, paired_all
    from evalnb.results.diff import diff_scores

    frame = scores(args.items)
    out = {"evalnb": evalnb.__file__, "items": args.items}
    for metric in args.metric or ["accuracy", "f1"]:
        t0, c0 = time.perf_counter(), os.times()
        table = paired(frame, "a", "b", metric=metric)
        c1 = os.times()
        out[f"{metric}_s"] = round(time.perf_counter() - t0, 3)
        out[f"{metric}_cpu_s"] = round(c1.user + c1.system - c0.user - c0.system, 3)
        out[f"{metric}_ci"] = [round(float(table["ci_low"].iloc[0]), 5), round(float(table["ci_high"].iloc[0]), 5)]
        out[f"{metric}_p"] = float(table["mcnemar_p"].iloc[0])
    for metric in args.metric or ["accuracy", "f1"]:
        t0, c0 = time.perf_counter(), os.times()
        table = paired_all(frame, ["a", "b"], metric=metric)
        c1 = os.times()
        out[f"paired_all_{metric}_s"] = round(time.perf_counter() - t0, 3)
        out[f"paired_all_{metric}_cpu_s"] = round(c1.user + c1.system - c0.user - c0.system, 3)
    baseline = scores(args.items, seed=1)
    t0, c0 = time.perf_counter(), os.times()
    table = diff_scores(frame, baseline)
    c1 = os.times()
    out["diff_4_rows_s"] = round(time.perf_counter() - t0, 3)
    out["diff_4_rows_cpu_s"] = round(c1.user + c1.system - c0.user - c0.system, 3)
    out["diff_f1_ci"] = [round(float(v), 5) for v in table.loc[table["metric"] == "f1", "ci_low"].iloc[:1]]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
