"""A store someone hands you is data, not authority (issue 31 item 1).

The sender makes a budget-stopped run whose model is their own server (a listener on
127.0.0.1) with ``api_key_env="OPENAI_API_KEY"``, then edits the file with plain ``sqlite3``:
the suite's dataset path to a file outside the store's folder, a trigger that rewrites later
runs to point at the listener. The receiver (another signing secret, their own key in
``OPENAI_API_KEY``) reads, reports and resumes it. Judged from the servers' side: what the
listener received (connections, requests, Authorization headers) and what the receiver's own
server received. Each protection has its control: with it off, the attack works.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

import evalnb
from evalnb.errors import EvalnbError, ForeignRunError, ManifestError
from evalnb.store import Store, trust_key_path
from evalnb.testing import LocalModelServer

PRICE = {"input": 1000.0, "output": 2000.0}
USAGE = {"input_tokens": 100, "output_tokens": 10}
RECEIVER_KEY = "sk-receiver-0123456789abcdefghij"
SENDER_KEY = "sk-sender-0123456789abcdefghijkl"


def _suite(folder: Path, rows: int = 8):
    from evalnb.suite import Suite

    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "data" / "rows.jsonl").write_text("".join(json.dumps({"q": f"question {i}", "target": "ok"}) + "\n"
                                                        for i in range(rows)))
    task = {"id": "t", "type": "qa", "dataset": {"path": "data/rows.jsonl"}, "prompt_template": "{{q}}",
            "grader": {"source": "def grade(s, i):\n    return 1\n"}, "metrics": [{"id": "score"}]}
    return Suite.from_dict({"tasks": [task]}, base_dir=folder)


def _model(server: LocalModelServer) -> evalnb.Model:
    return evalnb.Model("m", base_url=server.base_url, api="chat", api_key_env="OPENAI_API_KEY", price=PRICE)


def _stopped_run(folder: Path, server: LocalModelServer) -> str:
    """A run stopped by its budget after a few samples: a resume has work to do."""
    stopped = evalnb.run(_suite(folder), [_model(server)], max_cost_usd=0.3, generation={"max_output_tokens": 16},
                         progress=False, store=folder / ".evalnb" / "evalnb.sqlite")
    assert stopped.status == "stopped", stopped.status
    return stopped.run_id


def _as(monkeypatch, who: Path, key: str) -> None:
    """Be the sender or the receiver: their own signing secret, home and key."""
    monkeypatch.setenv("EVALNB_TRUST_KEY", str(who / "trust.key"))
    monkeypatch.setenv("EVALNB_HOME", str(who / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", key)


@pytest.fixture
def listener():
    with LocalModelServer(lambda body: "evil", usage=USAGE) as server:
        yield server


@pytest.fixture
def mine():
    with LocalModelServer(lambda body: "ok", usage=USAGE) as server:
        yield server


@pytest.fixture
def sent(tmp_path, monkeypatch, listener):
    """The sender's project folder (store in .evalnb/), as the receiver gets it, and its run id."""
    sender, receiver = tmp_path / "sender", tmp_path / "receiver"
    sender.mkdir()
    receiver.mkdir()
    _as(monkeypatch, sender, SENDER_KEY)
    run_id = _stopped_run(sender / "project", listener)
    shutil.copytree(sender / "project", receiver / "project")  # handed over
    listener.reset()
    _as(monkeypatch, receiver, RECEIVER_KEY)
    return receiver, receiver / "project" / ".evalnb" / "evalnb.sqlite", run_id


def _heard(server: LocalModelServer) -> int:
    return server.connections + server.request_count


def test_the_signing_secret_is_made_on_first_use_for_this_user_only(sent):
    receiver, store, run_id = sent
    evalnb.runs(store=store)
    key = trust_key_path()
    assert key == receiver / "trust.key"
    _stopped = evalnb.run(_suite(receiver / "own"), [evalnb.Model("m", base_url="http://127.0.0.1:9/v1", api="chat")],
                          progress=False, max_samples=1)  # a run of one's own makes the secret
    assert key.is_file() and (key.stat().st_mode & 0o777) == 0o600


def test_reading_and_reporting_a_received_store_sends_nothing(sent, listener, tmp_path):
    _, store, run_id = sent
    frame = evalnb.runs(store=store)
    assert list(frame["run_id"]) == [run_id]
    result = evalnb.load_run(run_id, store=str(store))
    assert len(result.samples) > 0 and len(result.metrics) > 0
    result.diff(evalnb.load_run("latest", store=store))
    result.browse()
    evalnb.report(run_id, tmp_path / "run.html", store=store)
    assert (tmp_path / "run.html").stat().st_size > 0
    assert _heard(listener) == 0


@pytest.mark.parametrize("vouched", ["refused", "models=", "control"])
def test_a_received_run_resumes_only_against_the_models_the_receiver_passes(sent, listener, mine, vouched):
    _, store, run_id = sent
    if vouched == "refused":
        with pytest.raises(ForeignRunError) as caught:
            evalnb.resume(run_id, store=store, progress=False)
        assert listener.base_url in str(caught.value) and "with the key in $OPENAI_API_KEY" in str(caught.value)
        assert "trust_stored_models=True" in str(caught.value) and "models=" in str(caught.value)
    elif vouched == "models=":
        resumed = evalnb.resume(run_id, store=store, models=[_model(mine)], max_cost_usd=None, progress=False)
        assert resumed.status == "completed"
        assert mine.request_count > 0
        assert {r.headers.get("authorization") for r in mine.requests} == {f"Bearer {RECEIVER_KEY}"}
    else:  # the control: trusting the stored models sends the receiver's key to the sender
        evalnb.resume(run_id, store=store, trust_stored_models=True, max_cost_usd=None, progress=False)
        assert {r.headers.get("authorization") for r in listener.requests} == {f"Bearer {RECEIVER_KEY}"}
        return
    assert _heard(listener) == 0


def test_an_edited_record_of_ones_own_run_is_foreign_too(tmp_path, monkeypatch, listener, mine):
    """The receiver's own signed run, its model URL rewritten in the file: refused."""
    _as(monkeypatch, tmp_path, RECEIVER_KEY)
    run_id = _stopped_run(tmp_path / "project", mine)
    store = tmp_path / "project" / ".evalnb" / "evalnb.sqlite"
    conn = sqlite3.connect(store)
    conn.execute("UPDATE runs SET summary = replace(summary, ?, ?), models = replace(models, ?, ?)",
                 (mine.base_url, listener.base_url, mine.base_url, listener.base_url))
    conn.commit()
    conn.close()
    with pytest.raises(ForeignRunError):
        evalnb.resume(run_id, store=store, progress=False)
    assert _heard(listener) == 0


def test_ones_own_runs_resume_with_their_stored_models(tmp_path, monkeypatch, mine, listener):
    _as(monkeypatch, tmp_path, RECEIVER_KEY)
    run_id = _stopped_run(tmp_path / "project", mine)
    before = mine.request_count
    resumed = evalnb.resume(run_id, store=tmp_path / "project" / ".evalnb" / "evalnb.sqlite", max_cost_usd=None,
                            progress=False)
    assert resumed.status == "completed" and mine.request_count > before
    assert _heard(listener) == 0


@pytest.mark.parametrize("allowed", [False, True], ids=["confined", "control"])
def test_a_received_suites_paths_stay_in_the_store_folder(sent, mine, allowed):
    receiver, store, run_id = sent
    secret = receiver / "private" / "notes.jsonl"  # the receiver's file, outside the project handed over
    secret.parent.mkdir()
    secret.write_text("".join(json.dumps({"q": f"netrc-secret-{i}", "target": "ok"}) + "\n" for i in range(8)))
    conn = sqlite3.connect(store)
    conn.execute("UPDATE suites SET manifest = replace(manifest, 'data/rows.jsonl', ?)", (str(secret),))
    conn.commit()
    conn.close()
    if not allowed:
        with pytest.raises(ManifestError) as caught:
            evalnb.resume(run_id, store=store, models=[_model(mine)], max_cost_usd=None, progress=False)
        assert "tasks[0].dataset.path" in str(caught.value) and "allow_paths_outside=True" in str(caught.value)
        assert mine.request_count == 0
    else:  # the control: with the paths let out, the file's lines are sent as prompts
        evalnb.resume(run_id, store=store, models=[_model(mine)], max_cost_usd=None, progress=False,
                      allow_paths_outside=True)
        assert "netrc-secret-" in json.dumps([r.body for r in mine.requests])


TRIGGER = """CREATE TRIGGER keep_in_touch AFTER UPDATE OF summary ON runs WHEN instr(NEW.summary, '{good}') > 0
BEGIN UPDATE runs SET summary = replace(NEW.summary, '{good}', '{evil}') WHERE run_id = NEW.run_id; END"""


@pytest.mark.parametrize("checked", [True, False], ids=["read-only", "control"])
def test_a_store_with_a_trigger_of_someone_elses_is_opened_read_only(sent, listener, mine, monkeypatch, checked):
    receiver, store, run_id = sent
    conn = sqlite3.connect(store)
    conn.execute(TRIGGER.format(good=mine.base_url, evil=listener.base_url))
    conn.commit()
    conn.close()
    if not checked:  # the control: without the schema check the trigger rewrites the receiver's run
        monkeypatch.setattr("evalnb.store._store.unexpected_schema", lambda conn, version: [])
        own = evalnb.run(_suite(receiver / "mine"), [_model(mine)], max_samples=1, progress=False, store=store)
        with Store(store) as opened:
            assert listener.base_url in json.dumps(opened.get_run(own.run_id)["summary"])
        return
    with Store(store) as opened:
        assert opened.read_only and "a trigger evalnb did not create: 'keep_in_touch'" in opened.read_only
        assert opened.get_run(run_id)["status"] == "stopped"  # still readable
    with pytest.raises(EvalnbError, match="keep_in_touch"):
        evalnb.run(_suite(receiver / "mine"), [_model(mine)], max_samples=1, progress=False, store=store)
    with pytest.raises(EvalnbError, match="read-only"):
        evalnb.resume(run_id, store=store, models=[_model(mine)], progress=False)
    read = evalnb.load_run(run_id, store=store)  # reading and reporting still work, read-only
    assert len(read.samples) > 0 and len(read.metrics) > 0
    evalnb.report(read, receiver / "run.html")
    assert (receiver / "run.html").stat().st_size > 0
    assert _heard(listener) == 0 and mine.request_count == 0
    # the receiver's own store is untouched: a run there goes where it says
    own = evalnb.run(_suite(receiver / "mine"), [_model(mine)], max_samples=1, progress=False)
    assert own.status == "completed" and mine.request_count == 1
    assert mine.base_url in json.dumps(own.run["summary"]) and _heard(listener) == 0


@pytest.mark.parametrize("extra", ["CREATE VIEW v AS SELECT 1", "CREATE TABLE t (x)", "CREATE INDEX i ON runs (name)"])
def test_any_object_evalnb_did_not_create_makes_the_store_read_only(tmp_path, extra):
    path = tmp_path / "s.sqlite"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute(extra)
    conn.commit()
    conn.close()
    with Store(path) as store:
        assert store.read_only and "evalnb did not create" in store.read_only
        with pytest.raises(EvalnbError, match="read-only"):
            store.save_suite("v", {})
    with Store(tmp_path / "clean.sqlite") as clean:
        assert clean.read_only is None


def test_the_cli_reads_a_store_file_and_resumes_only_with_the_models_from_store_flag(sent, listener, capsys):
    from evalnb.cli import main

    _, store, run_id = sent
    assert main(["runs", "--store", str(store)]) == 0
    assert run_id in capsys.readouterr().out
    assert main(["show", run_id, "--store", str(store)]) == 0
    assert main(["resume", run_id, "--store", str(store), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "was not recorded by your evalnb" in err and "--models-from-store" in err and listener.base_url in err
    assert _heard(listener) == 0
    assert main(["resume", run_id, "--store", str(store), "--no-progress", "--models-from-store",
                 "--max-cost-usd", "100"]) == 0  # the control: trusted on request, the key goes there
    assert {r.headers.get("authorization") for r in listener.requests} == {f"Bearer {RECEIVER_KEY}"}


def test_a_received_runs_ray_cluster_address_counts_as_an_endpoint(sent, mine):
    _, store, run_id = sent
    conn = sqlite3.connect(store)
    (summary,) = conn.execute("SELECT summary FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    summary = json.loads(summary)
    summary["options"]["executor"] = {"type": "ray", "address": "ray://127.0.0.1:1", "num_workers": 1}
    conn.execute("UPDATE runs SET summary = ? WHERE run_id = ?", (json.dumps(summary), run_id))
    conn.commit()
    conn.close()
    with pytest.raises(ForeignRunError, match="executor 'ray' at ray://127.0.0.1:1"):
        evalnb.resume(run_id, store=store, models=[_model(mine)], progress=False)
    resumed = evalnb.resume(run_id, store=store, models=[_model(mine)], executor="local", max_cost_usd=None,
                            progress=False)
    assert resumed.status == "completed" and mine.request_count > 0


def test_the_cli_resumes_a_received_run_with_the_models_the_receiver_passes(sent, listener, mine, capsys):
    """``evalnb resume --model`` (the per-model form of ``evalnb run``): the receiver's own server
    gets the calls with the receiver's key; the sender's listener hears nothing."""
    from evalnb.cli import main

    _, store, run_id = sent
    spec = f"m@{mine.base_url},api=chat,api_key_env=OPENAI_API_KEY"
    assert main(["resume", run_id, "--store", str(store), "--no-progress", "--model", spec,
                 "--price", "m=1000,2000", "--max-cost-usd", "100"]) == 0
    assert "completed" in capsys.readouterr().out
    assert mine.request_count > 0
    assert {r.headers.get("authorization") for r in mine.requests} == {f"Bearer {RECEIVER_KEY}"}
    assert _heard(listener) == 0
    with Store(store) as opened:
        assert opened.get_run(run_id)["status"] == "completed"


def test_diff_takes_a_baseline_run_id_in_a_received_store_file(sent, listener, mine):
    """``result.diff(run_id, store=path)``: a baseline in a store someone sent, read, nothing sent."""
    from evalnb.store import UnknownRunError

    receiver, store, run_id = sent
    own = evalnb.run(_suite(receiver / "own"), [_model(mine)], progress=False, name="mine-v1")
    table = own.diff(run_id, store=str(store))
    assert list(table["task_id"]) == ["t"] and int(table["n_pairs"].iloc[0]) > 0
    assert table.attrs["baseline"] != table.attrs["run"]
    with pytest.raises(UnknownRunError):  # not in the run's own store, where a bare id is looked up
        own.diff(run_id)
    again = evalnb.run(_suite(receiver / "own"), [_model(mine)], progress=False, reuse=False)
    assert int(again.diff("mine-v1")["n_pairs"].iloc[0]) == 8  # by name, in the run's own store
    received = evalnb.load_run(run_id, store=store)
    from evalnb.store import default_store_path  # the receiver's own store, as a path

    assert int(received.diff(own.run_id, store=default_store_path())["n_pairs"].iloc[0]) > 0
    assert _heard(listener) == 0
