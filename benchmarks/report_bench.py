"""The run report at scale: 10,000 items x 2 models (and a baseline run), its size and how fast it opens.

    PYTHONPATH=. .venv/bin/python benchmarks/report_bench.py [--items 10000] [--out /tmp/report_bench]

Builds two stored-free runs with `RunResult.from_data` (realistic text: a ~180-character prompt,
~60-character outputs, a grader log on failures), writes the run report against the baseline,
then opens it from disk in headless Chromium (network refused) and reads the first contentful
paint, the time until the first page of items is drawn, and how long a filter click and a
search take. Prints one Markdown table row per measure.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def make_run(run_id: str, items: int, seed: int):
    from evalnb.results.run_result import RunResult

    rng = random.Random(seed)
    samples = []
    for i in range(items):
        a, b = rng.randint(10, 999), rng.randint(10, 999)
        prompt = (f"Answer the question. Show your working briefly, then end with \"The answer is <number>.\"\n"
                  f"Question: A shop sells {a} apples on Monday and {b} apples on Tuesday. How many in all? (#{i})")
        for model, skill in (("model-large", 0.9), ("model-small", 0.7)):
            right = rng.random() < skill
            answer = a + b if right else a + b + rng.randint(1, 9)
            failed = rng.random() < 0.01
            samples.append({
                "task_id": "arithmetic" if i % 2 else "word_problems", "model": model, "sample_index": i, "epoch": 0,
                "status": "failed" if failed else "completed", "prompt": prompt, "target": str(a + b),
                "output_text": None if failed else f"{a} + {b} = {answer}. The answer is {answer}.",
                "extracted_output": None if failed else str(answer),
                "error": "ProviderError: 500 from the server" if failed else None,
                "log": None if right else f"expected {a + b}, got {answer}\n",
                "scores": {} if failed else {"exact_match": float(right)},
            })
    return RunResult.from_data(samples, run={"run_id": run_id, "status": "completed",
                                             "models": [{"label": "model-large"}, {"label": "model-small"}]})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=Path("/tmp/report_bench"))
    args = parser.parse_args()
    from evalnb.reporting.run_page import write_run_report

    args.out.mkdir(parents=True, exist_ok=True)
    result, baseline = make_run("eval_run_new", args.items, 1), make_run("eval_run_old", args.items, 2)
    start = time.perf_counter()
    path = write_run_report(result, args.out / "run.html", baseline=baseline)
    build_s = time.perf_counter() - start
    plain = write_run_report(result, args.out / "run_no_baseline.html")
    rows = [("items x models", f"{args.items:,} x 2"), ("write the report (with baseline)", f"{build_s:.1f} s"),
            ("size with a baseline (4 columns a row)", f"{path.stat().st_size / 1e6:.1f} MB"),
            ("size without a baseline", f"{plain.stat().st_size / 1e6:.1f} MB")]
    rows += browser_numbers(path)
    for name, value in rows:
        print(f"| {name} | {value} |")
    return 0


def browser_numbers(path: Path) -> list[tuple[str, str]]:
    from playwright.sync_api import expect

    from helpers.offline_browser import offline_page

    out = []
    with offline_page() as (page, _refused):
        start = time.perf_counter()
        page.goto(path.as_uri())
        page.wait_for_selector("#items .item")
        drawn = time.perf_counter() - start
        fcp = page.evaluate("(performance.getEntriesByName('first-contentful-paint')[0]||{}).startTime")
        out.append(("first contentful paint (Chromium, from disk)", f"{fcp:.0f} ms"))
        inside = page.evaluate("[window.evalnbParseMs, window.evalnbDrawnMs]")
        out.append(("JSON.parse of the embedded samples", f"{inside[0]:.0f} ms"))
        out.append(("navigation start until the first 20 items are drawn (in page)", f"{inside[1]:.0f} ms"))
        out.append(("goto until the first item is found (Playwright, incl. browser overhead)", f"{drawn * 1000:.0f} ms"))
        for label, act in (("filter click (Changed vs baseline)", lambda: page.click("button[data-filter='changed']")),
                           ("search (first, builds the index)", lambda: page.fill("#search", "apples on monday and 5")),
                           ("search again", lambda: page.fill("#search", "the answer is 77"))):
            before = page.locator("#where").inner_text()
            start = time.perf_counter()
            act()
            expect(page.locator("#where")).not_to_have_text(before, timeout=30_000)
            out.append((label, f"{(time.perf_counter() - start) * 1000:.0f} ms (incl. the 120 ms typing pause)"
                        if "search" in label else f"{(time.perf_counter() - start) * 1000:.0f} ms"))
    return out


if __name__ == "__main__":
    raise SystemExit(main())
