#!/usr/bin/env python3
"""Scale benchmark (run by hand): a 2-field QA task of N rows (default 100,000; the manifest's
limit is 1,000,000) against a zero-latency model server.

Measures, in one process:
  - peak RSS after the run (target: under 1 GB at 1M rows),
  - throughput per window of finished samples while the store grows (target: no slowdown),
  - a second run of the same suite, everything reused from the store, and peak RSS after it,
  - `result.metrics` of the second run (read from the store's score columns) and peak RSS after.

    .venv/bin/python benchmarks/bench_scale.py --rows 1000000          # starts benchmarks/serve_local.py
    .venv/bin/python benchmarks/bench_scale.py --base-url http://127.0.0.1:18091/v1 --rows 100000

Without --base-url it serves `evalnb.testing.LocalModelServer` in a process of its own (so the
server does not share this process's GIL). Prints one JSON line; benchmarks/README.md records them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import tempfile
import threading
import time
from pathlib import Path


def make_rows(path: Path, n: int) -> None:
    with path.open("w") as f:
        for i in range(n):
            a, b = (i * 7919) % 10000, (i * 104729) % 10000
            f.write(json.dumps({"question": f"What is {a} + {b}?", "answer": str(a + b)}) + "\n")


def watch(db: Path, stop: threading.Event, marks: list[tuple[float, int]]) -> None:
    """Count stored samples every second from a separate read-only connection."""
    while not stop.is_set():
        if db.exists():
            try:
                con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
                (count,) = con.execute("SELECT count(*) FROM samples").fetchone()
                con.close()
                marks.append((time.perf_counter(), count))
            except sqlite3.Error:
                pass
        stop.wait(1.0)


class RssSampler:
    """Peak resident memory split as the kernel counts it: anonymous (the heap) and file-backed
    (SQLite reads through a memory map: page cache the kernel can drop, but counted in RSS)."""

    def __init__(self) -> None:
        self.peaks: dict[str, dict[str, int]] = {}
        self.phase = "start"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
            except OSError:  # not Linux
                return
            peak = self.peaks.setdefault(self.phase, {})
            for name in ("VmRSS", "RssAnon", "RssFile"):
                mb = int(fields.get(name, "0 kB").split()[0]) // 1024
                peak[name] = max(peak.get(name, 0), mb)
            self._stop.wait(0.25)

    def stop(self) -> dict[str, dict[str, int]]:
        self._stop.set()
        self._thread.join()
        return self.peaks


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", default=None, help="a running server (default: start serve_local.py)")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--concurrency", type=int, default=25)
    args = ap.parse_args()

    server = None
    if args.base_url is None:
        import subprocess
        import sys

        server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("serve_local.py")), "--port", "0"],
                                  stdout=subprocess.PIPE, text=True)
        args.base_url = server.stdout.readline().split()[1]
    home = Path(tempfile.mkdtemp(prefix="evalnb-scale-"))
    os.environ["EVALNB_HOME"] = str(home)
    data = home / "rows.jsonl"
    make_rows(data, args.rows)

    import evalnb

    grader = "def grade(sample, item):\n    return sample['extracted_output'] == item['target']\n"
    suite = evalnb.Suite.from_dict({"tasks": [{
        "id": "qa_scale", "type": "qa", "dataset": {"path": str(data)},
        "prompt_template": "Question: {{question}}\nAnswer:", "target_template": "{{answer}}",
        "metrics": [{"id": "exact_match"}],
        "grader": {"type": "python", "metric_id": "exact_match", "source": grader},
    }]})
    model = evalnb.Model("mock-model", base_url=args.base_url, api="chat", api_key="mock")

    sampler = RssSampler()
    sampler.phase = "first_run"
    marks: list[tuple[float, int]] = []
    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(home / "evalnb.sqlite", stop, marks), daemon=True)
    watcher.start()
    t0 = time.perf_counter()
    first = evalnb.run(suite, [model], concurrency=args.concurrency, progress=False)
    t1 = time.perf_counter()
    stop.set()
    watcher.join()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    sampler.phase = "second_run"
    t2 = time.perf_counter()
    second = evalnb.run(suite, [model], concurrency=args.concurrency, progress=False)
    t3 = time.perf_counter()
    n2 = int(second.run["counts"]["completed"])
    rss2_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    sampler.phase = "metrics"
    t4 = time.perf_counter()
    metrics = second.metrics
    t5 = time.perf_counter()
    if server is not None:
        server.terminate()

    # Throughput per quarter of the run, from the watcher's (time, stored count) marks.
    quarters = []
    if len(marks) >= 5:
        step = max(1, len(marks) // 4)
        for i in range(0, len(marks) - step, step):
            (ta, ca), (tb, cb) = marks[i], marks[i + step]
            if tb > ta and cb > ca:
                quarters.append(round((cb - ca) / (tb - ta)))
    print(json.dumps({
        "rows": args.rows,
        "first_run_s": round(t1 - t0, 2),
        "first_run_samples_per_s": round(args.rows / (t1 - t0)),
        "throughput_by_window": quarters,
        "peak_rss_mb_after_first_run": round(rss_mb),
        "second_run_s": round(t3 - t2, 2),
        "second_run_samples_per_s": round(n2 / (t3 - t2)),
        "peak_rss_mb_after_second_run": round(rss2_mb),
        "metrics_s": round(t5 - t4, 2),
        "exact_match": round(float(metrics["mean"].iloc[0]), 4),
        "status": [first.status, second.status],
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "sampled_peaks_mb": sampler.stop(),
    }))


if __name__ == "__main__":
    main()
