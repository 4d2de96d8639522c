"""How many of lm-eval's registry tasks import into evalnb, and why the others do not.

Tries every leaf task of the installed lm-eval's registry (``TaskManager().all_subtasks``)
against its YAML alone (no data is read: the import only maps the config), counts the tasks
that become a valid evalnb task, and groups the failures by their reason. Run by hand:

    PYTHONPATH=. .venv/bin/python benchmarks/lm_eval_registry.py [--show N] [--write docs/lm_eval_tasks.md]

``--write FILE`` rewrites the block between ``<!-- lm-eval-registry:start -->`` and
``<!-- lm-eval-registry:end -->`` in that file with the numbers and the table of what does
not map, so the counts in the docs are this script's output, never typed by hand.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import re
import sys
import time
import warnings
from pathlib import Path

from evalnb import Suite
from evalnb.suite.lm_eval_registry import task_index

START, END = "<!-- lm-eval-registry:start -->", "<!-- lm-eval-registry:end -->"


def reason(message: str) -> str:
    """The failure with task names and values taken out, so equal causes group together."""
    text = re.sub(r"^.*?lm-eval task '[^']*': ", "", message.splitlines()[0])
    text = re.sub(r"^/\S+: ", "", text)
    text = re.sub(r"\([^()]*\)", "", text)
    text = re.sub(r"'[^']*'", "'…'", text)
    return re.sub(r"\s+", " ", re.sub(r"\d+", "N", text)).strip()[:100]


def survey() -> dict:
    started = time.perf_counter()
    index = task_index()
    indexed = time.perf_counter() - started
    leaves = sorted(name for name, entry in index.items() if entry.kind.name in ("TASK", "PY_TASK"))
    ok, by_type, failures = 0, collections.Counter(), collections.Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in leaves:
            try:
                suite = Suite.from_lm_eval(name)
            except Exception as exc:  # noqa: BLE001 - every failure is counted by its reason
                failures[f"{type(exc).__name__}: {reason(str(exc))}"] += 1
                continue
            ok += 1
            by_type[suite.tasks[0].metadata.get("lm_eval_output_type")] += 1
    return {"leaves": len(leaves), "ok": ok, "by_type": by_type, "failures": failures, "indexed": indexed,
            "took": time.perf_counter() - started}


def markdown(found: dict, show: int) -> str:
    from importlib.metadata import version

    total, ok = found["leaves"], found["ok"]
    types = ", ".join(f"{n:,} `{t}`" for t, n in found["by_type"].most_common())
    lines = [f"With lm-eval {version('lm_eval')} ({datetime.date.today().isoformat()}, "
             f"`benchmarks/lm_eval_registry.py --write docs/lm_eval_tasks.md`): **{ok:,} of {total:,} tasks "
             f"({ok / total:.1%}) import** ({types}); {total - ok:,} do not:", "",
             "| tasks | why not (the import's error, names and values taken out) |", "|---:|---|"]
    shown = found["failures"].most_common(show)
    for text, count in shown:
        lines.append(f"| {count:,} | {text.replace('|', '/')} |")
    rest = sum(found["failures"].values()) - sum(count for _, count in shown)
    if rest:
        lines.append(f"| {rest:,} | {len(found['failures']) - len(shown)} other reasons |")
    lines += ["", f"The index took {found['indexed']:.0f} s and the {total:,} imports {found['took']:.0f} s."]
    return "\n".join(lines)


def rewrite(path: Path, block: str) -> None:
    text = path.read_text(encoding="utf-8")
    if START not in text or END not in text:
        sys.exit(f"{path}: no {START} ... {END} block to rewrite")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{START}\n{block}\n{END}{tail}", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", type=int, default=15, help="how many failure reasons to list")
    parser.add_argument("--write", type=Path, help="rewrite this file's lm-eval-registry block (docs/lm_eval_tasks.md)")
    args = parser.parse_args()
    found = survey()
    block = markdown(found, args.show)
    print(block)
    if args.write:
        rewrite(args.write, block)


if __name__ == "__main__":
    main()
