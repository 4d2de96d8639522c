"""Per-sample cost at scale, side by side: evalnb and the bare aiohttp loop on the shared mock.

Each tool runs the shared bench's script (``anchors/evalnb_qa.py``, ``anchors/raw_client.py``)
on 2,000 and on 20,000 rows (``make_data.py 20000``; the 2,000 are its first rows), in turn,
``--repeats`` times, against one mock at ``--latency-ms``. The marginal cost of the 18,000 more
samples is (T(20,000) - T(2,000)) / 18,000 per tool and repeat: process start-up, imports and
exit cancel out. Wall and CPU (user + system of the process and everything it waited for) are
both recorded; only ratios within one sitting mean anything on a shared machine.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_marginal.py --latency-ms 0 --repeats 5
    PYTHONPATH=. .venv/bin/python benchmarks/bench_marginal.py --latency-ms 50 --repeats 3 --rows 20000

The shared bench folder is read-only: it is copied to ``--work`` (data made there once).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
# ../shared/bench beside the checkout (main), or beside its worktrees' folder
SHARED = next((p for p in (HERE.parent / "shared" / "bench", HERE.parent.parent / "shared" / "bench") if p.exists()),
              HERE.parent / "shared" / "bench")


def _prepare(work: Path, shared: Path) -> None:
    if not (work / "data" / "qa_20000.jsonl").exists():
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(shared, work)
        for p in work.rglob("*"):
            p.chmod(p.stat().st_mode | 0o200)
        subprocess.run([sys.executable, "make_data.py", "20000"], cwd=work, check=True, stdout=subprocess.DEVNULL)
    lines = (work / "data" / "qa_20000.jsonl").read_text().splitlines(keepends=True)
    (work / "data" / "qa_2000_of_20000.jsonl").write_text("".join(lines[:2000]))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, method: str = "GET") -> dict:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"{}")


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _run(cmd: list[str], env: dict[str, str], cwd: Path, stats: str) -> dict:
    _get(stats + "/reset", "POST")
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=1800)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    mock = _get(stats)
    return {"wall": wall, "cpu": cpu, "samples": out["samples"], "accuracy": out["accuracy"],
            "requests": mock["requests"], "phase": mock["first_to_last_s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency-ms", type=float, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=25)
    ap.add_argument("--rows", type=int, nargs="*", default=[2000, 20000], help="row counts (of the 20,000)")
    ap.add_argument("--tools", default="evalnb,raw")
    ap.add_argument("--work", type=Path, default=Path("/tmp/evalnb-bench-marginal"))
    ap.add_argument("--shared", type=Path, default=SHARED)
    ap.add_argument("--python", default=sys.executable, help="the interpreter both tools run with")
    ap.add_argument("--out", type=Path, default=None, help="append every run as a JSON line here")
    a = ap.parse_args()
    _prepare(a.work, a.shared)
    subprocess.run([a.python, "-m", "compileall", "-q", str(HERE / "evalnb")], check=True)
    port = _free_port()
    mock = subprocess.Popen([a.python, "mock_openai.py", "--port", str(port), "--latency-ms", str(a.latency_ms),
                             "--answers", "data/answers_80_20000.jsonl"], cwd=a.work,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base, stats = f"http://127.0.0.1:{port}/v1", f"http://127.0.0.1:{port}/stats"
    try:
        for _ in range(100):
            try:
                _get(stats)
                break
            except OSError:
                time.sleep(0.1)
        data = {2000: "data/qa_2000_of_20000.jsonl", 20000: "data/qa_20000.jsonl"}
        scripts = {"evalnb": "anchors/evalnb_qa.py", "raw": "anchors/raw_client.py"}
        tools = a.tools.split(",")
        runs: dict[tuple[str, int], list[dict]] = {(t, n): [] for t in tools for n in a.rows}
        load = []
        for repeat in range(-1, a.repeats):  # -1: a warm-up of each, not counted
            for n in a.rows:
                for tool in (tools if repeat % 2 else tools[::-1]):  # alternate who goes first
                    env = {**os.environ, "PYTHONPATH": str(HERE)}
                    home = tempfile.mkdtemp(prefix="evalnb-home-")
                    env["EVALNB_HOME"] = home
                    cmd = [a.python, scripts[tool], "--base-url", base, "--concurrency", str(a.concurrency),
                           "--data", data[n]]
                    r = _run(cmd, env, a.work, stats)
                    shutil.rmtree(home, ignore_errors=True)
                    r.update(tool=tool, rows=n, repeat=repeat, latency_ms=a.latency_ms, load=os.getloadavg()[0])
                    load.append(r["load"])
                    if a.out:
                        with a.out.open("a") as f:
                            f.write(json.dumps(r) + "\n")
                    if repeat >= 0:
                        runs[(tool, n)].append(r)
                    print(f"{tool:7s} {n:6d} rows  wall {r['wall']:6.2f} s  cpu {r['cpu']:6.2f} s  "
                          f"acc {r['accuracy']:.3f}  load {r['load']:.1f}", flush=True)
    finally:
        mock.terminate()
        mock.wait()
    _report(runs, tools, a, load)


def _report(runs: dict, tools: list[str], a: argparse.Namespace, load: list[float]) -> None:
    print(f"\nlatency {a.latency_ms:g} ms, concurrency {a.concurrency}, {a.repeats} repeats, "
          f"load average {min(load):.1f}-{max(load):.1f}")
    print("| tool | rows | wall s (runs) | median wall s | median CPU s | samples/s |")
    print("|---|---:|---|---:|---:|---:|")
    for tool in tools:
        for n in a.rows:
            rs = runs[(tool, n)]
            walls = [r["wall"] for r in rs]
            print(f"| {tool} | {n} | {' · '.join(f'{w:.2f}' for w in walls)} | {statistics.median(walls):.2f} | "
                  f"{statistics.median(r['cpu'] for r in rs):.2f} | {n / statistics.median(walls):.0f} |")
    if len(a.rows) == 2 and len(tools) == 2:
        small, big = a.rows
        extra = big - small
        per = {t: [((b["wall"] - s["wall"]) / extra * 1e6, (b["cpu"] - s["cpu"]) / extra * 1e6)
                   for s, b in zip(runs[(t, small)], runs[(t, big)])] for t in tools}
        print(f"\nmarginal cost of {extra} more samples, µs per sample (per repeat; same repeat = same minute)")
        print("| repeat | " + " | ".join(f"{t} wall | {t} CPU" for t in tools) + " | wall ratio | CPU ratio |")
        print("|---|" + "---:|" * (2 * len(tools) + 2))
        ratios = []
        for i in range(a.repeats):
            (ew, ec), (rw, rc) = per[tools[0]][i], per[tools[1]][i]
            ratios.append((ew / rw, ec / rc))
            print(f"| {i + 1} | {ew:.0f} | {ec:.0f} | {rw:.0f} | {rc:.0f} | {ew / rw:.2f} | {ec / rc:.2f} |")
        med = [statistics.median(x[k] for x in per[t]) for t in tools for k in (0, 1)]
        print(f"| median | {med[0]:.0f} | {med[1]:.0f} | {med[2]:.0f} | {med[3]:.0f} | "
              f"{statistics.median(r[0] for r in ratios):.2f} | {statistics.median(r[1] for r in ratios):.2f} |")
    for n in a.rows:
        if len(tools) == 2:
            share = [r0["wall"] and r1["wall"] / r0["wall"] for r0, r1 in zip(runs[(tools[0], n)], runs[(tools[1], n)])]
            print(f"{n} rows: {tools[0]} throughput ÷ {tools[1]}'s per repeat: "
                  f"{' · '.join(f'{x:.2f}' for x in share)} (median {statistics.median(share):.2f})")


if __name__ == "__main__":
    main()
