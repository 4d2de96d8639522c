"""How many of lm-eval's registry tasks import into evalnb, and why the others do not.

Tries every leaf task of the installed lm-eval's registry (``TaskManager().all_subtasks``)
against its YAML alone (no data is read: the import only maps the config), counts the tasks
that become a valid evalnb task, and groups the failures by their reason. Run by hand:

    PYTHONPATH=. .venv/bin/python benchmarks/lm_eval_registry.py [--show N]

The numbers go in README.md, section "Your lm-eval tasks".
"""

from __future__ import annotations

import argparse
import collections
import re
import time

from evalnb import Suite
from evalnb.suite.lm_eval_registry import task_index


def reason(message: str) -> str:
    """The failure with task names and values taken out, so equal causes group together."""
    text = re.sub(r"lm-eval task '[^']*': ", "", message.splitlines()[0])
    text = re.sub(r"'[^']*'", "'…'", text)
    return re.sub(r"\d+", "N", text)[:110]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", type=int, default=15, help="how many failure reasons to list")
    args = parser.parse_args()
    started = time.perf_counter()
    index = task_index()
    indexed = time.perf_counter() - started
    leaves = sorted(name for name, entry in index.items() if entry.kind.name in ("TASK", "PY_TASK"))
    ok, by_type, failures = 0, collections.Counter(), collections.Counter()
    for name in leaves:
        try:
            suite = Suite.from_lm_eval(name)
        except Exception as exc:  # noqa: BLE001 - every failure is counted by its reason
            failures[f"{type(exc).__name__}: {reason(str(exc))}"] += 1
            continue
        ok += 1
        by_type[suite.tasks[0].metadata.get("lm_eval_output_type")] += 1
    took = time.perf_counter() - started
    print(f"lm-eval registry: {len(leaves)} tasks (index built in {indexed:.1f} s, all tried in {took:.1f} s)")
    print(f"import cleanly: {ok} ({ok / len(leaves):.1%}); by output type: {dict(by_type)}")
    print(f"do not import: {len(leaves) - ok}; top reasons:")
    for text, count in failures.most_common(args.show):
        print(f"  {count:6d}  {text}")


if __name__ == "__main__":
    main()
