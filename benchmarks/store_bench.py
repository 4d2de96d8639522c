"""Store benchmark: group-commit write rate, output-cache lookups, file size, read memory.

Run: `python benchmarks/store_bench.py [--samples 100000] [--keep DIR]`. Not a timed test:
it prints numbers to compare against the targets (>= 30,000 samples/s written with group
commit, >= 100,000 cache keys/s looked up) on the machine at hand.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import random
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalnb.store import Store, request_key  # noqa: E402

TASKS = 5
MODELS = 4
WORDS = "the of and to in is was for on that with as by at from his her an were are which this be".split()


def make_samples(n: int, seed: int = 0) -> tuple[list[dict], list[str]]:
    """Realistic samples: few-shot prompts (~1.5 kB) shared by every model, ~300-char outputs."""
    rng = random.Random(seed)
    per_task_model = n // (TASKS * MODELS)
    shots = " ".join(rng.choice(WORDS) for _ in range(200))
    samples, keys = [], []
    for t in range(TASKS):
        items = []
        for i in range(per_task_model):
            question = " ".join(rng.choice(WORDS) for _ in range(40))
            row = {"id": f"t{t}-{i}", "question": question, "answer": rng.choice("ABCD"), "meta": {"src": "bench", "n": i}}
            items.append((row, f"{shots}\n\nQuestion: {question}\nAnswer:", row["answer"]))
        for m in range(MODELS):
            for i, (row, prompt, target) in enumerate(items):
                out = " ".join(rng.choice(WORDS) for _ in range(60)) + f" Answer: {rng.choice('ABCD')}"
                key = request_key(f"model-{m}", "http://127.0.0.1:8000/v1", "chat", prompt, {"temperature": 0})
                keys.append(key)
                samples.append(
                    {
                        "task_id": f"task_{t}", "model": f"model-{m}", "sample_index": i, "status": "completed",
                        "prompt": prompt, "target": target, "output_text": out, "extracted_output": out[-1],
                        "scores": {"accuracy": float(out[-1] == target), "f1": rng.random()},
                        "judge": None, "error": None, "latency_s": rng.random(),
                        "usage": {"input_tokens": 400, "output_tokens": 70}, "response_id": f"resp_{m}_{t}_{i}",
                        "dataset_row": row, "request_key": key, "grader_key": "g" * 16,
                    }
                )
    return samples, keys


def mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--keep", help="folder to keep the database in")
    args = parser.parse_args()
    folder = Path(args.keep or tempfile.mkdtemp(prefix="evalnb-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "bench.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)

    samples, keys = make_samples(args.samples)
    n = len(samples)
    raw = sum(len(s["prompt"]) + len(s["output_text"]) + len(json.dumps(s["dataset_row"])) for s in samples)
    print(f"{n:,} samples ({TASKS} tasks x {MODELS} models), {mib(raw)} of prompt+output+row text before dedup")
    print(f"sqlite {__import__('sqlite3').sqlite_version}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs")

    store = Store(path)
    store.save_suite("bench", {"tasks": [{"id": f"task_{t}"} for t in range(TASKS)]})
    run_id = store.create_run("bench", models=[{"name": f"model-{m}"} for m in range(MODELS)], status="in_progress")

    # 1. group commit through the background writer (what the runner uses)
    gc.collect()
    t0 = time.perf_counter()
    caller = 0.0
    with store.writer(run_id) as writer:
        for s in samples:
            c0 = time.perf_counter()
            writer.add(s)
            caller += time.perf_counter() - c0
        writer.flush()
        committed = writer.committed
    dt = time.perf_counter() - t0
    assert committed == n and store.sample_counts(run_id)["total"] == n
    print(f"StoreWriter.add + flush: {n / dt:,.0f} samples/s ({dt:.2f} s); caller pays {caller / n * 1e6:.1f} us per add()")

    # 2. the same samples again as upserts (a re-graded run), synchronous write_samples in batches
    t0 = time.perf_counter()
    for start in range(0, n, 1000):
        store.write_samples(samples[start : start + 1000], run_id=run_id)
    dt = time.perf_counter() - t0
    print(f"Store.write_samples (1,000 per call, all upserts): {n / dt:,.0f} samples/s")

    # 3. the output cache
    outputs = [
        {"request_key": s["request_key"], "output_text": s["output_text"], "usage": s["usage"],
         "response_id": s["response_id"], "latency_s": s["latency_s"]}
        for s in samples
    ]
    t0 = time.perf_counter()
    store.put_outputs(outputs)
    dt = time.perf_counter() - t0
    print(f"Store.put_outputs: {n / dt:,.0f} outputs/s")
    random.Random(1).shuffle(keys)
    t0 = time.perf_counter()
    hits = store.lookup_outputs(keys)
    dt = time.perf_counter() - t0
    assert len(hits) == len(set(keys))
    print(f"Store.lookup_outputs ({len(keys):,} keys, all hits): {len(keys) / dt:,.0f} keys/s")
    misses = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(len(keys))]
    t0 = time.perf_counter()
    assert not store.lookup_outputs(misses)
    dt = time.perf_counter() - t0
    print(f"Store.lookup_outputs ({len(misses):,} keys, all misses): {len(misses) / dt:,.0f} keys/s")

    # 4. reads
    t0 = time.perf_counter()
    done = store.completed_keys(run_id)
    print(f"Store.completed_keys: {len(done):,} keys in {time.perf_counter() - t0:.3f} s")
    del samples, outputs, hits
    gc.collect()
    tracemalloc.start()
    t0 = time.perf_counter()
    count = sum(1 for _ in store.iter_samples(run_id))
    dt = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"Store.iter_samples: {count / dt:,.0f} samples/s, peak Python memory {mib(peak)} for {count:,} samples")
    t0 = time.perf_counter()
    store.list_runs()
    print(f"Store.list_runs: {time.perf_counter() - t0:.3f} s")
    try:
        from evalnb.results import RunResult

        t0 = time.perf_counter()
        result = RunResult(store, run_id)
        frame, metrics = result.samples, result.metrics
        print(f"RunResult.samples + .metrics: {time.perf_counter() - t0:.2f} s ({len(frame):,} rows, {len(metrics)} metric rows)")
    except ImportError as exc:  # results/stats not importable yet
        print(f"RunResult skipped: {exc}")

    store.close()  # last connection: checkpoints and removes the WAL
    size = path.stat().st_size
    print(f"file size: {mib(size)} ({size / n:,.0f} bytes/sample incl. output cache; raw text {mib(raw)})")
    if not args.keep:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        folder.rmdir()


if __name__ == "__main__":
    main()
