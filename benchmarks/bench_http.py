#!/usr/bin/env python3
"""HTTP stack benchmark (run by hand): the same 2,000-row run through different builds and
routes, alternated in one sitting, against a LocalModelServer in a process of its own.

Variants (each a fresh process, with its own EVALNB_HOME, so nothing is reused):
  - ``NAME=TREE``        evalnb imported from TREE (e.g. ``main=/work/main``, ``branch=.``)
  - ``NAME=TREE:httpx``  the same, with the lean keep-alive path switched off, so every call goes
                         through httpx's own client (``ClientPool.raw_route`` returns None): the
                         ratio that path has to earn.

    .venv/bin/python benchmarks/bench_http.py --latency-ms 0 --repeats 5 \\
        main=/work/main branch=. branch-httpx=.:httpx

Prints, per variant, the wall time of ``evalnb.run`` and of the whole process (median and
each run), the process's CPU time (user + system, children included: steadier than wall
time on a shared machine), and the samples/s of the run. benchmarks/README.md records them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import evalnb
from evalnb.suite import Suite
if sys.argv[3] == "httpx":
    from evalnb.providers import ClientPool
    ClientPool.raw_route = lambda self, base_url: None  # every call through httpx's own client
rows, base_url, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[4])
GRADER = "def grade(sample, item):\n    return 1.0 if sample['extracted_output'] == item['target'] else 0.0\n"
suite = Suite.from_dict({"tasks": [{
    "id": "qa", "type": "qa", "dataset": {"path": rows, "format": "jsonl"},
    "prompt_template": "{{question}}", "target_template": "{{answer}}",
    "output_extraction": {"type": "none"}, "metrics": [{"id": "exact_match"}],
    "grader": {"type": "python", "contract": "sample", "metric_id": "exact_match", "source": GRADER},
}]})
model = evalnb.Model("bench", base_url=base_url, api="chat", api_key="none")
t1 = time.perf_counter()
result = evalnb.run(suite, models=[model], concurrency=concurrency, progress=False,
                    generation={"temperature": 0, "max_gen_toks": 16})
t2 = time.perf_counter()
m = result.metrics
print(json.dumps({"run_s": t2 - t1, "samples": len(result.samples),
                  "accuracy": float(m[m["metric"] == "exact_match"]["mean"].iloc[0])}))
"""


def make_rows(path: Path, n: int) -> None:
    with path.open("w") as f:
        for i in range(n):
            a, b = (i * 7919) % 10000, (i * 104729) % 10000
            f.write(json.dumps({"question": f"What is {a} + {b}?", "answer": str(a + b)}) + "\n")


def once(tree: str, route: str, rows: Path, base_url: str, concurrency: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve()), "EVALNB_FAST_EXIT": "1",
           "EVALNB_HOME": tempfile.mkdtemp(prefix="bench-http-")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, str(rows), base_url, route, str(concurrency)],
                          capture_output=True, text=True, env=env, timeout=900)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{tree} ({route}) failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return {**out, "process_s": wall, "cpu_s": cpu}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("variants", nargs="+", help="NAME=TREE or NAME=TREE:httpx")
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--concurrency", type=int, default=25)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    variants = []
    for spec in args.variants:
        name, _, where = spec.partition("=")
        tree, _, route = where.partition(":")
        variants.append((name, tree, route or "default"))

    folder = Path(tempfile.mkdtemp(prefix="bench-http-"))
    rows = folder / "rows.jsonl"
    make_rows(rows, args.rows)
    server = subprocess.Popen([sys.executable, str(HERE / "serve_local.py"), "--latency-ms", str(args.latency_ms),
                               "--seconds", "3600"], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(HERE.parent)})
    try:
        line = server.stdout.readline().split()
        base_url = line[1]
        results: dict[str, list[dict]] = {name: [] for name, _, _ in variants}
        for rep in range(args.repeats + 1):  # the first round is a warm-up
            for name, tree, route in variants:
                out = once(tree, route, rows, base_url, args.concurrency)
                if out["samples"] != args.rows:
                    raise SystemExit(f"{name}: {out['samples']} samples, expected {args.rows}")
                if rep:
                    results[name].append(out)
                print(f"  {'warm-up' if not rep else f'run {rep}'} {name}: run {out['run_s']:.2f} s, "
                      f"process {out['process_s']:.2f} s", file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait(10)
    print(f"rows={args.rows} latency_ms={args.latency_ms:g} concurrency={args.concurrency} "
          f"repeats={args.repeats} load={os.getloadavg()[0]:.2f}")
    print("| variant | evalnb.run s (median) | runs | process s (median) | process CPU s (median) | samples/s |")
    print("|---|---:|---|---:|---:|---:|")
    for name, _, _ in variants:
        runs = [r["run_s"] for r in results[name]]
        procs = [r["process_s"] for r in results[name]]
        cpus = [r["cpu_s"] for r in results[name]]
        med = statistics.median(runs)
        print(f"| {name} | {med:.2f} | {' / '.join(f'{x:.2f}' for x in runs)} | "
              f"{statistics.median(procs):.2f} | {statistics.median(cpus):.2f} | {args.rows / med:.0f} |")


if __name__ == "__main__":
    main()
