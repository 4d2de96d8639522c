#!/usr/bin/env python3
"""Results benchmark (run by hand): what reading a big stored run costs.

Builds a synthetic run straight through the store's writer (no model calls: the point is the
results side): one task, two models, N/2 items each, a 0/1 ``accuracy`` and a float ``f1``
per sample, a dataset row and a prompt per item. Then, each in a fresh process so peak RSS is
its own:

  - ``metrics``: `RunResult(store, run_id).metrics` (target: <= 5 s and <= 400 MB at 1M samples),
  - ``paired``: `result.paired("a", "b", task_id="qa")` on the 0/1 metric and on the float one
    (target: <= 0.5 s per pair and task at 200k items),
  - ``compare``: `result.compare()` (reads metrics only),
  - ``page``: `result.samples_page(k)` for a late page (seeks by key).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_results.py --samples 1000000
    PYTHONPATH=. .venv/bin/python benchmarks/bench_results.py --samples 400000 --only paired

Prints one JSON line per measurement; benchmarks/README.md records them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MANIFEST = {
    "schema_version": "1",
    "id": "bench-results",
    "version": "1",
    "tasks": [{
        "id": "qa", "dataset": {"source": "inline", "rows": [{"question": "q", "answer": "a"}]},
        "prompt_template": "Question: {{question}}\nAnswer:", "target_template": "{{answer}}",
        "grader": {"type": "builtin", "name": "exact_match", "metric_id": "accuracy"},
        "metrics": [{"id": "accuracy"}, {"id": "f1"}],
    }],
}


def build(path: Path, n: int, seed: int = 0) -> str:
    """A run of ``n`` samples (two models, n/2 items) written through `Store.writer`."""
    from evalnb.store import Store

    rng = random.Random(seed)
    store = Store(path)
    run_id = store.create_run("bench-v1", models=[{"name": "a", "label": "a"}, {"name": "b", "label": "b"}],
                              task_ids=["qa"], manifest=MANIFEST, status="completed")
    items = n // 2
    writer = store.writer(run_id)
    t0 = time.perf_counter()
    for model, p in (("a", 0.62), ("b", 0.60)):
        batch = []
        for i in range(items):
            row = {"question": f"What is {i} + {i}?", "answer": str(2 * i)}
            if i % 97 == 0:
                row.pop("answer")  # a row missing a template field: n_missing_field counts it
            correct = rng.random() < p
            batch.append({
                "task_id": "qa", "model": model, "sample_index": i, "epoch": 0, "status": "completed",
                "prompt": f"Question: {row['question']}\nAnswer:", "target": row.get("answer", ""),
                "output_text": "x" * 40, "extracted_output": "x", "dataset_row": row,
                "scores": {"accuracy": float(correct), "f1": rng.random()},
                "usage": {"input_tokens": 20, "output_tokens": 5}, "latency_s": 0.01, "cost_usd": 0.0,
                "missing_field": "answer" not in row,
            })
            if len(batch) == 20_000:
                writer.add_samples(batch)
                batch = []
        writer.add_samples(batch)
    writer.close()
    store.close()
    print(json.dumps({"build_s": round(time.perf_counter() - t0, 1), "samples": 2 * items}), flush=True)
    return run_id


class PeakMemory:
    """Peak resident memory split as the kernel counts it: anonymous (the heap) and file-backed
    (SQLite reads the store through a 256 MB memory map: page cache the kernel can drop, but
    counted in RSS), sampled every 20 ms."""

    def __init__(self) -> None:
        import threading

        self.peaks = {"VmRSS": 0, "RssAnon": 0, "RssFile": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for line in Path("/proc/self/status").read_text().splitlines():
                name, _, value = line.partition(":")
                if name in self.peaks:
                    self.peaks[name] = max(self.peaks[name], int(value.split()[0]))
            self._stop.wait(0.02)

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        return {f"peak_{k}_mb": round(v / 1024) for k, v in self.peaks.items()}


def measure(path: str, run_id: str, what: str) -> dict:
    """One measurement in this (fresh) process: seconds and peak RSS."""
    memory = PeakMemory()
    import evalnb
    from evalnb.results import RunResult

    t0 = time.perf_counter()
    result = RunResult(path, run_id)
    out: dict = {"what": what}
    if what == "metrics":
        table = result.metrics
        out["rows"] = len(table)
        out["n_missing_field"] = int(table["n_missing_field"].iloc[0])
    elif what == "paired":
        result.scores  # noqa: B018 - read once; then time the pairing itself
        out["read_s"] = round(time.perf_counter() - t0, 2)
        for metric in ("accuracy", "f1"):
            t1 = time.perf_counter()
            table = result.paired("a", "b", task_id="qa", metric=metric)
            out[f"paired_{metric}_s"] = round(time.perf_counter() - t1, 3)
            out[f"{metric}_ci"] = [round(table["ci_low"].iloc[0], 5), round(table["ci_high"].iloc[0], 5)]
    elif what == "compare":
        result.compare()
    elif what == "page":
        t1 = time.perf_counter()
        page = result.samples_page(40, page_size=10_000)
        out["page_s"] = round(time.perf_counter() - t1, 2)
        out["rows"] = len(page)
    else:
        raise SystemExit(f"unknown measurement {what!r}")
    out["total_s"] = round(time.perf_counter() - t0, 2)
    times = os.times()
    out["cpu_s"] = round(times.user + times.system, 2)  # this process, import included: steadier on a busy machine
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    out.update(memory.stop())
    out["evalnb"] = os.path.dirname(evalnb.__file__)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--only", action="append", help="metrics, paired, compare, page (repeatable)")
    parser.add_argument("--keep", help="a directory to build the store in (reused when it has one)")
    parser.add_argument("--measure", nargs=3, metavar=("DB", "RUN", "WHAT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(*args.measure)), flush=True)
        return
    folder = Path(args.keep or tempfile.mkdtemp(prefix="evalnb-bench-results-"))
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / f"results-{args.samples}.db"
    marker = folder / f"results-{args.samples}.run"
    if db.exists() and marker.exists():
        run_id = marker.read_text().strip()
    else:
        run_id = build(db, args.samples)
        marker.write_text(run_id)
    for what in args.only or ["metrics", "paired", "compare", "page"]:
        subprocess.run([sys.executable, __file__, "--measure", str(db), run_id, what], check=True)


if __name__ == "__main__":
    main()
