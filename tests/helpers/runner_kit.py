"""Small suites written to disk and a LocalModelServer responder with planted answers.

Prompts carry their item number as ``ITEM-<n>``; the responder answers from it, so every
test knows exactly which answers are right without a mock of our client code:

- model ``good`` always answers the target (``str(n)``);
- any other model is wrong on every 5th item (n % 5 == 4): accuracy exactly 0.8 over 5k items.

Used both in-process (the fixtures in conftest.py) and by the crash test's child process.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

EXACT = (
    "def grade(sample, item):\n"
    "    return sample['extracted_output'] == item['target']\n"
)
_ITEM = re.compile(r"ITEM-(\d+)")


def rows(n: int, *, tag: str = "") -> list[dict[str, Any]]:
    """n dataset rows whose prompt names the item and whose answer is its number."""
    return [{"q": f"ITEM-{i}{tag}: what number is this?", "a": str(i)} for i in range(n)]


def item_number(prompt: str) -> int | None:
    m = _ITEM.search(prompt or "")
    return int(m.group(1)) if m else None


def planted_answer(model: str, prompt: str) -> str:
    """The answer the server gives `model` for `prompt` (see the module docstring)."""
    n = item_number(prompt)
    if n is None:
        return "no item"
    if model != "good" and n % 5 == 4:
        return "wrong"
    return str(n)


def responder(body: dict) -> str:
    """LocalModelServer responder: Responses (``input``) and chat (``messages``) alike."""
    prompt = body.get("input")
    if not isinstance(prompt, str):
        messages = body.get("messages") or []
        prompt = messages[-1].get("content", "") if messages else ""
    return planted_answer(str(body.get("model", "")), prompt)


def write_jsonl(path: Path, data: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")
    return path


def task_dict(task_id: str, **fields: Any) -> dict[str, Any]:
    """A qa task over ``<task_id>.jsonl`` graded by exact match; `fields` go on top."""
    task = {
        "id": task_id,
        "type": "qa",
        "dataset": {"path": f"{task_id}.jsonl"},
        "prompt_template": "{{q}}",
        "target_template": "{{a}}",
        "grader": {"source": EXACT},
    }
    task.update(fields)
    return task


def manifest(folder: Path, tasks: dict[str, list[dict]], **fields_by_task: dict) -> dict:
    """Write each task's rows to ``folder/<id>.jsonl`` and return the manifest dict."""
    out = []
    for task_id, data in tasks.items():
        write_jsonl(folder / f"{task_id}.jsonl", data)
        out.append(task_dict(task_id, **fields_by_task.get(task_id, {})))
    return {"tasks": out}


def child_pids() -> set[int]:
    """This process's live children, from every thread's /proc entry (Linux)."""
    import os

    found: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                found.update(int(pid) for pid in f.read().split())
        except FileNotFoundError:  # that thread ended meanwhile (it had no children then)
            pass
    return found


def wait_for(predicate: Any, timeout: float = 60.0, what: str = "condition") -> Any:
    """Poll `predicate` until it returns something truthy (returned), or fail after `timeout` s."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def run_unchecked(suite: Any, models: list, **options: Any) -> Any:
    """A run without `evalnb.run`'s checks first (the engine alone): what happens when a problem
    shows only once the run is under way (a file removed meanwhile, a row past the checked ones)."""
    from evalnb.aio import run_sync
    from evalnb.runner.engine import RunEngine
    from evalnb.runner.run_plan import make_plan

    return run_sync(RunEngine(make_plan(suite, models, **options), store=None, progress=False).execute())
