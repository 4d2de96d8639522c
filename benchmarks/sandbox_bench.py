"""Sandbox throughput and latency, run by hand: ``.venv/bin/python benchmarks/sandbox_bench.py``.

1. Cold start: a fresh pool, worker start to the first graded sample (spawn + limits + load).
2. Throughput: an exact-match ``sample`` grader over 100,000 realistic samples (sample record
   fields plus an ``item`` built by ``make_item``) through ``Grader.grade_samples`` on a pool of
   ``os.cpu_count()`` workers, measured cold (workers started inside the timing) and warm.
Targets: >= 20,000 samples/s, first result < 300 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalnb.scoring.grading import Grader, make_item  # noqa: E402
from evalnb.sandbox import Job, SandboxPool, UserCode  # noqa: E402

EXACT_MATCH = """
def grade(sample, item):
    return (sample["extracted_output"] or "").strip().lower() == str(item["target"]).strip().lower()
"""


def make_data(n: int) -> tuple[list[dict], list[dict]]:
    samples, items = [], []
    for i in range(n):
        row = {"question": f"What is {i} + {i}? Give only the number.", "answer": str(2 * i), "id": f"q-{i}"}
        prompt = f"Answer concisely.\n\nQuestion: {row['question']}\nAnswer:"
        output = str(2 * i) if i % 4 else str(2 * i + 1)
        samples.append({
            "task_id": "arith", "model": "cand", "sample_index": i, "prompt": prompt, "target": row["answer"],
            "output_text": f"The answer is {output}.", "extracted_output": output, "dataset_row": row,
            "response_id": f"resp_{i:08x}", "usage": {"input_tokens": 24, "output_tokens": 6},
        })  # fmt: skip
        items.append(make_item(row, prompt=prompt, target=row["answer"], choices=None, sample_index=i))
    return samples, items


SETUP: list[tuple[float, float]] = []  # (wall ms, worker CPU ms) of confining each cold worker, when reported


async def first_result_latency(repeats: int) -> list[float]:
    job = Job(UserCode(EXACT_MATCH, "<bench>"), ("grade",), nargs=2, timeout=120)
    samples, items = make_data(1)
    times = []
    for _ in range(repeats):
        pool = SandboxPool(1)
        started = time.perf_counter()
        (result,) = await pool.run(job, [[samples[0], items[0]]])
        times.append(time.perf_counter() - started)
        assert result.ok
        if pool.isolation and "setup_ms" in pool.isolation:
            SETUP.append((pool.isolation["setup_ms"], pool.isolation["setup_cpu_ms"]))
        await pool.aclose()
    return times


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def throughput(n: int, size: int | None) -> dict[str, float]:
    samples, items = make_data(n)
    expected = sum(1 for i in range(n) if i % 4)
    out: dict[str, float] = {}
    async with SandboxPool(size) as pool:
        grader = Grader({"source": EXACT_MATCH, "metric_id": "exact_match"}, task_id="arith", pool=pool)
        for label in ("cold", "warm", "warm2"):
            workers_before = {pid: cpu_seconds(pid) for pid in pool.worker_pids()}
            parent_before = time.process_time()
            started = time.perf_counter()
            grades = await grader.grade_samples(samples, items, model="cand")
            elapsed = time.perf_counter() - started
            parent_cpu = time.process_time() - parent_before
            worker_cpu = sum(cpu_seconds(pid) - workers_before.get(pid, 0.0) for pid in pool.worker_pids())
            correct = sum(g.scores["exact_match"] for g in grades)
            assert correct == expected and not any(g.failed for g in grades), "wrong scores"
            out[label] = n / elapsed
            out[f"{label}_cpu_us"] = (parent_cpu + worker_cpu) / n * 1e6
            out[f"{label}_parent_us"] = parent_cpu / n * 1e6
        out["workers"] = pool.size
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=100_000, help="samples (default 100000)")
    parser.add_argument("--size", type=int, default=None, help="workers (default: CPU count)")
    parser.add_argument("--repeats", type=int, default=15, help="cold starts to time")
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    latencies = asyncio.run(first_result_latency(args.repeats))
    ms = sorted(t * 1000 for t in latencies)
    if SETUP:
        print(f"confining a worker (namespaces, own root, privilege drop): median {statistics.median(w for w, _ in SETUP):.1f} ms "
              f"wall, {statistics.median(c for _, c in SETUP):.1f} ms of the worker's CPU (min {min(c for _, c in SETUP):.1f})")
    print(f"worker start -> first result: median {statistics.median(ms):.0f} ms, "
          f"min {ms[0]:.0f} ms, max {ms[-1]:.0f} ms ({len(ms)} cold pools)")  # fmt: skip
    rates = asyncio.run(throughput(args.n, args.size))
    print(f"exact-match grading, {args.n} samples, {rates['workers']:.0f} workers: "
          f"cold {rates['cold']:,.0f}/s, warm {rates['warm']:,.0f}/s, warm again {rates['warm2']:,.0f}/s")  # fmt: skip
    cpu = min(rates["warm_cpu_us"], rates["warm2_cpu_us"])
    parent = min(rates["warm_parent_us"], rates["warm2_parent_us"])
    cores = os.cpu_count() or 1
    print(f"CPU per sample (parent + workers): {cpu:.1f} us, of which parent {parent:.1f} us; "
          f"CPU-bound ceiling on {cores} idle cores ~ {cores / cpu * 1e6:,.0f}/s")
    load = os.getloadavg()[0]
    print(f"load average during the run: {load:.2f} (others' work on a shared machine lowers wall-clock rates)")


if __name__ == "__main__":
    main()
