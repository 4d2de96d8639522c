#!/usr/bin/env python3
"""Scale-out benchmark (run by hand): the Ray executor against latency-bound model servers.

N LocalModelServers (`serve_local.py`, each in its own process) answer after --latency-ms and
work on at most --server-slots calls at once, like a real deployment; one model per server.
With a per-worker concurrency well below the servers' slots, the client's concurrency is the
limit, so a second worker should double throughput (goal >= 1.8x), and one Ray worker should
keep up with the local executor at the same concurrency (goal >= 0.8x).

    .venv/bin/python benchmarks/bench_ray.py --servers 2 --latency-ms 100 --concurrency 8 --rows 1600

Each configuration runs --repeats times, interleaved; wall time is `evalnb.run` end to end
(actors start inside it: that is part of a Ray run's cost). Prints one JSON line.
"""

from __future__ import annotations

import argparse
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
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--latency-ms", type=float, default=100.0)
    ap.add_argument("--server-slots", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8, help="per worker and endpoint (and the local run's)")
    ap.add_argument("--rows", type=int, default=1600)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # Ray on 127.0.0.1
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    home = Path(tempfile.mkdtemp(prefix="evalnb-ray-bench-"))
    os.environ["EVALNB_HOME"] = str(home)
    servers, urls = [], []
    for _ in range(args.servers):
        proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("serve_local.py")), "--port", "0",
                                 "--latency-ms", str(args.latency_ms), "--max-concurrency", str(args.server_slots)],
                                stdout=subprocess.PIPE, text=True)
        servers.append(proc)
        urls.append(proc.stdout.readline().split()[1])
    data = home / "rows.jsonl"
    with data.open("w") as f:
        for i in range(args.rows):
            a, b = (i * 7919) % 10000, (i * 104729) % 10000
            f.write(json.dumps({"question": f"What is {a} + {b}?", "answer": str(a + b)}) + "\n")

    import ray

    import evalnb
    from evalnb.runner.executors.ray_driver import RayExecutor

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray_start_s = time.perf_counter() - t0
    grader = "def grade(sample, item):\n    return sample['extracted_output'] == item['target']\n"
    suite = evalnb.Suite.from_dict({"tasks": [{
        "id": "qa", "type": "qa", "dataset": {"path": str(data)},
        "prompt_template": "Question: {{question}}\nAnswer:", "target_template": "{{answer}}",
        "metrics": [{"id": "exact_match"}], "grader": {"type": "python", "metric_id": "exact_match", "source": grader},
    }]})
    models = [evalnb.Model(f"m{i}", base_url=url, api="chat") for i, url in enumerate(urls)]
    samples = args.rows * len(models)
    configs = {
        "local": dict(executor="local"),
        "ray_1_worker": dict(executor=RayExecutor(1, concurrency_per_worker=args.concurrency)),
        "ray_2_workers": dict(executor=RayExecutor(2, concurrency_per_worker=args.concurrency)),
    }
    walls: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(args.repeats):
        for name, options in configs.items():
            start = time.perf_counter()
            result = evalnb.run(suite, models, concurrency=args.concurrency, reuse=False, progress=False, **options)
            walls[name].append(time.perf_counter() - start)
            assert result.status == "completed" and result.run["counts"]["completed"] == samples, result.run["counts"]
    for proc in servers:
        proc.terminate()
    rate = {name: round(samples / statistics.median(w)) for name, w in walls.items()}
    print(json.dumps({
        "servers": args.servers, "latency_ms": args.latency_ms, "server_slots": args.server_slots,
        "concurrency_per_worker": args.concurrency, "samples_per_run": samples, "ray_start_s": round(ray_start_s, 1),
        "wall_s": {k: [round(x, 2) for x in v] for k, v in walls.items()},
        "samples_per_s": rate,
        "limit_per_worker": round(len(models) * args.concurrency / (args.latency_ms / 1000)),
        "two_vs_one_worker": round(rate["ray_2_workers"] / rate["ray_1_worker"], 2),
        "ray_1_worker_vs_local": round(rate["ray_1_worker"] / rate["local"], 2),
    }))


if __name__ == "__main__":
    main()
