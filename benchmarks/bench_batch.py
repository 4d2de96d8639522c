#!/usr/bin/env python3
"""Batch executor overhead (run by hand): a 10k-request run through the Batch API vs live calls.

One LocalModelServer in its own process (`serve_local.py`, 0 ms, batches answered at the first
look after they are created) serves both. Each repeat runs the same 10,000-row task twice,
interleaved, each into a fresh store (nothing reused): ``executor="local"`` (concurrency 25)
and ``executor=BatchExecutor(...)``. The batch run's time is split into its phases by timing
the client's calls: build+upload+create, polls (the server answers all requests inside the
poll that finds the batch due), and reading the output file.

    .venv/bin/python benchmarks/bench_batch.py --rows 10000 --repeats 3

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--poll-interval", type=float, default=1.0)
    args = ap.parse_args()

    home = Path(tempfile.mkdtemp(prefix="evalnb-batch-bench-"))
    os.environ["EVALNB_HOME"] = str(home)
    server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("serve_local.py")), "--port", "0",
                               "--latency-ms", "0"], stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().split()[1]
    data = home / "rows.jsonl"
    with data.open("w") as f:
        for i in range(args.rows):
            a, b = (i * 7919) % 10000, (i * 104729) % 10000
            f.write(json.dumps({"question": f"What is {a} + {b}?", "answer": str(a + b)}) + "\n")

    import evalnb
    from evalnb.providers.batch_api import BatchAPI
    from evalnb.store import Store

    phases: dict[str, float] = {}

    def timed(name, fn):
        @functools.wraps(fn)
        async def wrapper(*a, **kw):
            start = time.perf_counter()
            try:
                return await fn(*a, **kw)
            finally:
                phases[name] = phases.get(name, 0.0) + time.perf_counter() - start
        return wrapper

    BatchAPI.submit = timed("upload_and_create_s", BatchAPI.submit)
    BatchAPI.retrieve = timed("polls_s", BatchAPI.retrieve)
    BatchAPI.outcomes = timed("read_results_s", BatchAPI.outcomes)

    grader = "def grade(sample, item):\n    return sample['extracted_output'] == item['target']\n"
    suite = evalnb.Suite.from_dict({"tasks": [{
        "id": "qa", "type": "qa", "dataset": {"path": str(data)},
        "prompt_template": "Question: {{question}}\nAnswer:", "target_template": "{{answer}}",
        "metrics": [{"id": "exact_match"}], "grader": {"type": "python", "metric_id": "exact_match", "source": grader},
    }]})
    model = evalnb.Model("m", base_url=url, api="chat")
    walls: dict[str, list[float]] = {"local": [], "batch": []}
    batch_phases: list[dict[str, float]] = []
    try:
        for r in range(args.repeats):
            for name in ("local", "batch"):
                executor = "local" if name == "local" else evalnb.BatchExecutor(poll_interval=args.poll_interval)
                phases.clear()
                start = time.perf_counter()
                result = evalnb.run(suite, [model], concurrency=25, progress=False, executor=executor,
                                    store=Store(home / f"{name}-{r}.sqlite"))
                walls[name].append(time.perf_counter() - start)
                assert result.status == "completed" and len(result.samples) == args.rows, result.status
                assert result.metrics["mean"].iloc[0] == 1.0
                if name == "batch":
                    batch_phases.append(dict(phases))
    finally:
        server.terminate()
        server.wait(10)
    med = {k: statistics.median(v) for k, v in walls.items()}
    print(json.dumps({
        "rows": args.rows, "repeats": args.repeats, "poll_interval": args.poll_interval,
        "wall_s": {k: [round(x, 2) for x in v] for k, v in walls.items()},
        "median_s": {k: round(v, 2) for k, v in med.items()},
        "batch_minus_local_s": round(med["batch"] - med["local"], 2),
        "batch_phases_s": [{k: round(v, 2) for k, v in p.items()} for p in batch_phases],
    }))


if __name__ == "__main__":
    main()
