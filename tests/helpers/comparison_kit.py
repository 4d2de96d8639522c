"""Frames like a run's (3 models x 2 tasks x 50 items, seeded) with known differences.

The comparison and plot tests both read them (``frames_fixture``).
"""

from __future__ import annotations

import math
import random

import pandas as pd

from evalnb.results import stats

MODELS = ("alpha", "beta-instruct-with-a-rather-long-model-name", "gamma")
TASKS = ("arith", "qa")
N_ITEMS = 50
# Chance of a correct answer per (task, model): gamma > beta > alpha on arith; ties on qa.
P_CORRECT = {
    ("arith", "alpha"): 0.45, ("arith", MODELS[1]): 0.7, ("arith", "gamma"): 0.9,
    ("qa", "alpha"): 0.4, ("qa", MODELS[1]): 0.6, ("qa", "gamma"): 0.6,
}
LATENCY = {"alpha": 0.4, MODELS[1]: 1.1, "gamma": 2.5}
TOKENS = {"alpha": 40, MODELS[1]: 120, "gamma": 300}
A, B = "gamma", "alpha"


def frames_fixture(seed: int = 0) -> dict[str, pd.DataFrame]:
    """Realistic metrics / scores / samples frames with known differences between models.

    Metrics per sample: exact_match (0/1) first, then f1 (continuous). About 5% of samples fail
    (no scores, NaN tokens), about 5% of completed samples have no extracted output (scored 0).
    The metrics frame is built with evalnb.results.stats like the results module does, plus a batch
    metric ``corpus_bleu`` with no stderr or interval.
    """
    rng = random.Random(seed)
    samples, scores = [], []
    for task in TASKS:
        for model in MODELS:
            for i in range(N_ITEMS):
                failed = rng.random() < 0.05
                correct = rng.random() < P_CORRECT[(task, model)]
                unextracted = not failed and rng.random() < 0.05
                if failed:
                    em = f1 = math.nan
                elif unextracted:
                    em, f1 = 0.0, 0.0
                else:
                    em = 1.0 if correct else 0.0
                    f1 = 1.0 if correct else round(rng.uniform(0.0, 0.7), 3)
                answer = None if (failed or unextracted) else str(i if correct else i + 1)
                samples.append({
                    "task_id": task, "model": model, "sample_index": i,
                    "status": "failed" if failed else "completed",
                    "extracted_output": answer,
                    "output_text": None if failed else f"The answer is {answer}",
                    "latency_s": round(LATENCY[model] * rng.uniform(0.5, 1.5), 4),
                    "input_tokens": math.nan if failed else 100 + i,
                    "output_tokens": math.nan if failed else TOKENS[model] + rng.randint(-20, 20),
                    "error": "HTTP 500 from server" if failed else None,
                })
                for metric, value in (("exact_match", em), ("f1", f1)):
                    scores.append({"task_id": task, "model": model, "sample_index": i,
                                   "metric": metric, "value": value})
    scores_df = pd.DataFrame(scores)
    samples_df = pd.DataFrame(samples)
    metrics = []
    for (task, model, metric), part in scores_df.groupby(["task_id", "model", "metric"],
                                                         sort=False):
        s = stats.summarize(part["value"].tolist())
        metrics.append({
            "task_id": task, "model": model, "metric": metric, "n": s.n,
            "n_failed": int(part["value"].isna().sum()), "mean": s.mean,
            "stderr": math.nan if s.stderr is None else s.stderr,
            "ci_low": s.ci_low, "ci_high": s.ci_high, "higher_is_better": True,
        })
    for task in TASKS:
        for k, model in enumerate(MODELS):
            metrics.append({
                "task_id": task, "model": model, "metric": "corpus_bleu", "n": N_ITEMS,
                "n_failed": 0, "mean": 20.0 + 5 * k, "stderr": math.nan, "ci_low": math.nan,
                "ci_high": math.nan, "higher_is_better": True,
            })
    return {"metrics": pd.DataFrame(metrics), "scores": scores_df, "samples": samples_df}
