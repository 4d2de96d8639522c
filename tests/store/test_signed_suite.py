"""The stored suite of one's own signed run is signed too (issue 31 item 1, second pass).

A project goes to a colleague and comes back: its store's run records are untouched (their
signature still verifies) but ``suites.manifest`` was edited with ``sqlite3`` to point the
dataset at a file outside the project. Resuming must not read it: the signature covers a
SHA-256 of each stored manifest the resume reads, and a run whose stored suite no longer
matches keeps its models but has its suite confined (``allow_paths_outside=True`` lifts it:
the control). A run signed before suites were signed verifies for its models, and its suite is
confined likewise.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import evalnb
from evalnb.errors import ManifestError
from evalnb.store import Store, sign_run
from evalnb.testing import LocalModelServer

PRICE = {"input": 1000.0, "output": 2000.0}
USAGE = {"input_tokens": 100, "output_tokens": 10}
KEY = "sk-owner-0123456789abcdefghijklm"


def _suite(folder: Path):
    from evalnb.suite import Suite

    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "data" / "rows.jsonl").write_text("".join(json.dumps({"q": f"question {i}", "target": "ok"}) + "\n"
                                                        for i in range(8)))
    task = {"id": "t", "type": "qa", "dataset": {"path": "data/rows.jsonl"}, "prompt_template": "{{q}}",
            "grader": {"source": "def grade(s, i):\n    return 1\n"}, "metrics": [{"id": "score"}]}
    return Suite.from_dict({"tasks": [task]}, base_dir=folder)


@pytest.fixture
def mine():
    with LocalModelServer(lambda body: "ok", usage=USAGE) as server:
        yield server


@pytest.fixture
def own_run(tmp_path, monkeypatch, mine):
    """One's own budget-stopped run in <project>/.evalnb/evalnb.sqlite, and a secret file outside."""
    monkeypatch.setenv("EVALNB_TRUST_KEY", str(tmp_path / "trust.key"))
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    project = tmp_path / "project"
    model = evalnb.Model("m", base_url=mine.base_url, api="chat", api_key_env="OPENAI_API_KEY", price=PRICE)
    stopped = evalnb.run(_suite(project), [model], max_cost_usd=0.3, generation={"max_output_tokens": 16},
                         progress=False, store=project / ".evalnb" / "evalnb.sqlite")
    assert stopped.status == "stopped"
    secret = tmp_path / "netrc.jsonl"
    secret.write_text("".join(json.dumps({"q": f"machine x login netrc-secret-{i}", "target": "ok"}) + "\n"
                              for i in range(8)))
    mine.reset()
    return project / ".evalnb" / "evalnb.sqlite", stopped.run_id, secret


def _edit_suite(store: Path, secret: Path) -> None:
    conn = sqlite3.connect(store)
    conn.execute("UPDATE suites SET manifest = replace(manifest, 'data/rows.jsonl', ?)", (str(secret),))
    conn.commit()
    conn.close()


def _sent(server: LocalModelServer) -> str:
    return json.dumps([r.body for r in server.requests])


@pytest.mark.parametrize("allowed", [False, True], ids=["refused", "control"])
def test_an_edited_suite_of_ones_own_run_is_confined_on_resume(own_run, mine, allowed):
    store, run_id, secret = own_run
    _edit_suite(store, secret)
    if not allowed:
        with pytest.raises(ManifestError) as caught:
            evalnb.resume(run_id, store=store, max_cost_usd=None, progress=False)
        message = str(caught.value)
        assert "tasks[0].dataset.path" in message and "allow_paths_outside=True" in message
        assert "suites table was edited" in message
        assert mine.connections + mine.request_count == 0
    else:  # the control: with paths let out, the edited suite's file goes out as prompts
        evalnb.resume(run_id, store=store, max_cost_usd=None, progress=False, allow_paths_outside=True)
        assert "netrc-secret-" in _sent(mine)


def test_control_an_unedited_own_run_resumes_with_its_stored_models_and_suite(own_run, mine):
    store, run_id, _ = own_run
    resumed = evalnb.resume(run_id, store=store, max_cost_usd=None, progress=False)
    assert resumed.status == "completed" and mine.request_count > 0
    assert "question" in _sent(mine) and "netrc-secret-" not in _sent(mine)
    with Store(store) as opened:  # the record signs the manifest's digest
        summary = opened.get_run(run_id)["summary"]
        version = opened.get_run(run_id)["suite_version"]
        assert summary["suites"] == {version: opened.suite_digest(version)}


def _signed_the_old_way(store: Path, run_id: str) -> None:
    """The record as evalnb signed it before suites were signed: no ``suites`` in the summary."""
    with Store(store) as opened:
        record = opened.get_run(run_id)
    summary = {k: v for k, v in record["summary"].items() if k not in ("suites", "signed")}
    conn = sqlite3.connect(store)
    conn.execute("UPDATE runs SET summary = ? WHERE run_id = ?",
                 (json.dumps(sign_run(run_id, record["suite_version"], summary)), run_id))
    conn.commit()
    conn.close()


@pytest.mark.parametrize("edited", [False, True])
def test_a_run_signed_before_suites_were_keeps_its_models_and_has_its_suite_confined(own_run, mine, edited):
    store, run_id, secret = own_run
    _signed_the_old_way(store, run_id)
    if edited:
        _edit_suite(store, secret)
        with pytest.raises(ManifestError, match="recorded before evalnb signed suites"):
            evalnb.resume(run_id, store=store, max_cost_usd=None, progress=False)
        assert mine.request_count == 0
    else:  # its paths are in its own folder: it resumes with its stored (signed) models, no models= needed
        resumed = evalnb.resume(run_id, store=store, max_cost_usd=None, progress=False)
        assert resumed.status == "completed" and mine.request_count > 0


def test_a_run_that_finds_its_suites_row_already_edited_does_not_sign_the_edit(own_run, mine, tmp_path):
    """The row was edited before this run saved its suite (same version: ``save_suite`` keeps
    the first row): the run signs what it ran, not the row, so its resume is confined too."""
    store, first, secret = own_run
    _edit_suite(store, secret)
    model = evalnb.Model("m", base_url=mine.base_url, api="chat", api_key_env="OPENAI_API_KEY", price=PRICE)
    second = evalnb.run(_suite(tmp_path / "project"), [model], max_cost_usd=0.3, reuse=False,
                        generation={"max_output_tokens": 16}, progress=False, store=store)
    assert second.status == "stopped" and second.run_id != first
    assert "netrc-secret-" not in _sent(mine)  # it ran the suite it was given
    mine.reset()
    with pytest.raises(ManifestError, match="suites table was edited"):
        evalnb.resume(second.run_id, store=store, max_cost_usd=None, progress=False)
    assert mine.request_count == 0
