"""Every text column of every table of a finished store is masked (issue 31 item 6).

A run whose manifest (grader code, a template), settings (generation, metadata, name), rows,
outputs (an echoing server), grader logs, judge records and errors all carry key-shaped
strings; then a batch grader's task metrics and an executor's state with one too. The test
does not list fields: it reads `sqlite_master` and scans every column of every table of the
finished store for the key shapes (``sk-``, ``ghp_``, ``hf_``, ``AKIA``) and the run's own key.
The control writes the same run with masking off and finds them.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

import evalnb
from evalnb import Model
from evalnb.store import Store
from helpers.runner_kit import rows

pytestmark = pytest.mark.usefixtures("evalnb_home")

KEY = "sk-proj-RUNKEY0123456789abcdef"
SHAPES = {
    "sk": "sk-pasted0123456789abcdef",
    "github": "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "hf": "hf_" + "abcdefghijklmnopqrstuvwxyzABCDEFGH",
    "aws": "AKIA" + "ABCDEFGHIJKLMNOP",
}
PATTERN = re.compile(r"sk-[A-Za-z0-9_-]{8,}|gh[pousr]_[A-Za-z0-9]{30,}|hf_[A-Za-z0-9]{30,}|AKIA[A-Z0-9]{16}|"
                     + re.escape(KEY))

GRADER = f"""
# pasted by mistake: {SHAPES['github']}
def grade(sample, item):
    print("debug token", {SHAPES['hf']!r})
    if item["sample_index"] == 1:
        raise ValueError("cannot grade with " + {SHAPES['aws']!r})
    return {{"scores": {{"ok": 1}}, "judge": {{"seen": {SHAPES['sk']!r}}}}}
"""


def _every_column(path: Path) -> dict[str, list[str]]:
    """table.column -> the key-shaped strings found in it, over every table sqlite_master lists."""
    found: dict[str, list[str]] = {}
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            for column in columns:
                for (value,) in conn.execute(f"SELECT {column} FROM {table}"):
                    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                    hits = PATTERN.findall(text)
                    if hits:
                        found.setdefault(f"{table}.{column}", []).extend(hits)
    finally:
        conn.close()
    return found


def _finished_store(make_suite, model_server, store: Path) -> Path:
    data = rows(3)
    data[0]["q"] += " " + SHAPES["sk"]
    suite = make_suite({"t": data}, t={"prompt_template": "{{q}} " + SHAPES["hf"], "grader": {"source": GRADER},
                                       "metrics": [{"id": "ok"}]})
    server = model_server(lambda body: "answer " + SHAPES["sk"], echo_headers=["authorization"])
    model = Model("m", base_url=server.base_url, api="chat", api_key=KEY)
    evalnb.run(suite, [model], progress=False, store=store, name="run " + SHAPES["github"],
               metadata={"note": SHAPES["aws"]}, generation={"extra_body": {"tag": SHAPES["sk"]}})
    with Store(store) as opened:
        run_id = opened.latest_run_id()
        opened.write_task_metrics(run_id, "t", "m", {"ok": 1.0}, error="batch grader saw " + SHAPES["hf"])
        opened.save_executor_state(run_id, "batch", "b", {"id": "batch_1", "note": SHAPES["github"]})
    return store


def test_no_column_of_a_finished_store_holds_a_key_shape(make_suite, model_server, tmp_path):
    store = _finished_store(make_suite, model_server, tmp_path / "s.sqlite")
    with Store(store) as opened:
        assert "[redacted]" in opened.get_suite(opened.get_run(opened.latest_run_id())["suite_version"])["tasks"][0][
            "grader"]["source"]
    assert _every_column(store) == {}


def test_control_with_masking_off_the_shapes_are_found_in_every_kind_of_column(make_suite, model_server, tmp_path,
                                                                               monkeypatch):
    monkeypatch.setattr("evalnb.redaction.Redactor.text", lambda self, text: text)
    found = _every_column(_finished_store(make_suite, model_server, tmp_path / "s.sqlite"))
    for column in ("suites.manifest", "runs.name", "runs.metadata", "runs.generation", "texts.body",
                   "samples.output_text", "samples.log", "samples.error", "samples.judge", "task_metrics.error",
                   "executor_state.value"):
        assert column in found, (column, sorted(found))
