"""evalnb.store: schema, runs, samples (upsert, resume keys), output cache, ownership, safety.

Real SQLite files in tmp_path; crash and concurrency tests run the writer in a subprocess and
SIGKILL it, then reopen the file.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from evalnb.errors import EvalnbError
from evalnb.store import (
    SCHEMA_VERSION,
    Store,
    StoreWriteError,
    UnknownRunError,
    UnknownSuiteError,
    redact,
    epoch_request_key,
    request_key,
    run_signature,
    sanitize_models,
)
from evalnb.store import _schema
from evalnb.store._codec import text_hash
from evalnb.redaction import redact_url
from evalnb.store._owner import current_owner, owner_alive

MANIFEST = {"schema_version": "2026-05-27", "tasks": [{"id": "qa"}, {"id": "math"}]}
RUN_A = "eval_run_" + "a" * 32


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / "evalnb.sqlite") as s:
        s.save_suite("v1", MANIFEST)
        yield s


def make_run(store: Store, **kwargs) -> str:
    suite_version = kwargs.pop("suite_version", "v1")
    options = {"models": [{"name": "m1"}, {"name": "m2"}], "generation": {"temperature": 0}, **kwargs}
    return store.create_run(suite_version, **options)


def sample(i: int, *, task: str = "qa", model: str = "m1", status: str = "completed", **extra) -> dict:
    out = {
        "task_id": task, "model": model, "sample_index": i, "status": status,
        "prompt": f"Question {i}?", "target": str(i), "output_text": f"Answer: {i}",
        "extracted_output": str(i), "scores": {"accuracy": 1.0}, "usage": {"input_tokens": 5, "output_tokens": 2},
        "latency_s": 0.25, "response_id": f"resp_{i}", "dataset_row": {"q": f"Question {i}?", "a": i},
        "request_key": f"key{i}", "judge": None, "error": None,
    }
    out.update(extra)
    return out


def run_child(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


# ------------------------------------------------------------------ schema and connection


def test_default_path_is_in_the_evalnb_home(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "home"))
    with Store() as s:
        assert s.path == (tmp_path / "home" / "evalnb.sqlite").resolve()
    assert (tmp_path / "home" / "evalnb.sqlite").exists()


def test_schema_is_created_with_a_version_and_wal(store):
    conn = sqlite3.connect(store.path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"meta", "suites", "runs", "samples", "outputs", "task_metrics", "texts"} <= tables
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # persistent, seen by any connection
    assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert store._conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000
    assert store.schema_version == SCHEMA_VERSION


def test_reopening_keeps_data_and_does_not_recreate(tmp_path):
    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        s.save_suite("v1", MANIFEST)
    with Store(path) as s:
        assert s.get_suite("v1") == MANIFEST


def test_a_store_from_a_newer_evalnb_is_refused(tmp_path):
    path = tmp_path / "s.sqlite"
    Store(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(EvalnbError, match="schema version 99, newer"):
        Store(path)


def test_migrations_run_in_order_on_open(tmp_path, monkeypatch):
    path = tmp_path / "s.sqlite"
    Store(path).close()
    nxt = SCHEMA_VERSION + 1
    monkeypatch.setattr(_schema, "SCHEMA_VERSION", nxt)
    monkeypatch.setattr(_schema, "MIGRATIONS", {**_schema.MIGRATIONS,
                                                SCHEMA_VERSION: lambda conn: conn.execute("ALTER TABLE runs ADD COLUMN notes TEXT")})
    with Store(path) as s:
        assert s.schema_version == nxt
        columns = {r[1] for r in s._conn.execute("PRAGMA table_info(runs)")}
        assert "notes" in columns
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(nxt),)


def test_a_missing_migration_is_an_error_and_changes_nothing(tmp_path, monkeypatch):
    path = tmp_path / "s.sqlite"
    Store(path).close()
    monkeypatch.setattr(_schema, "SCHEMA_VERSION", SCHEMA_VERSION + 2)
    monkeypatch.setattr(_schema, "MIGRATIONS", {**_schema.MIGRATIONS,
                                                SCHEMA_VERSION: lambda conn: conn.execute("ALTER TABLE runs ADD COLUMN notes TEXT")})
    with pytest.raises(EvalnbError, match=f"no migration from store schema version {SCHEMA_VERSION + 1}"):
        Store(path)
    with sqlite3.connect(path) as conn:  # rolled back: still the version it was, no new column
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        assert "notes" not in {r[1] for r in conn.execute("PRAGMA table_info(runs)")}


def _old_store(path, version: int):
    """A store as evalnb wrote it at schema `version` (1: no epochs, 2: epochs): one run, one sample."""
    conn = sqlite3.connect(path)
    for statement in _schema._DDL_V1:
        conn.execute(statement)
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    for v in range(1, version):  # the migrations that stores of that version went through
        _schema.MIGRATIONS[v](conn)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    conn.execute("INSERT INTO suites VALUES ('v1', ?, 1)", (json.dumps(MANIFEST),))
    conn.execute(
        "INSERT INTO runs (run_id, suite_version, status, models, generation, signature, created_at, updated_at) "
        "VALUES (?, 'v1', 'completed', '[{\"name\": \"m\", \"label\": \"m\"}]', '{}', 'sig', 1, 1)",
        (RUN_A,),
    )
    conn.execute("INSERT INTO texts VALUES (?, 'Q: 1+1')", (text_hash("Q: 1+1"),))
    conn.execute(
        "INSERT INTO samples (run_id, task_id, model, sample_index, status, prompt_hash, target, scores) "
        "VALUES (?, 'qa', 'm', 0, 'completed', ?, '2', '{\"acc\": 1}')",
        (RUN_A, text_hash("Q: 1+1")),
    )
    conn.commit()
    conn.close()


@pytest.mark.parametrize("version", [1, 2], ids=["schema-1", "schema-2-epochs"])
def test_an_older_store_opens_and_gains_name_log_and_prompt_text(tmp_path, version):
    path = tmp_path / "old.sqlite"
    _old_store(path, version)
    with Store(path) as s:
        assert s.schema_version == SCHEMA_VERSION >= 3
        (old,) = s.samples(RUN_A)
        assert old["prompt"] == "Q: 1+1" and old["scores"] == {"acc": 1} and old["epoch"] == 0
        assert old["prompt_text"] is None and old["log"] is None  # not recorded back then
        assert s.get_run(RUN_A)["name"] is None
        assert list(s.list_runs()["name"]) == [None]
        # and the new fields are written and read back
        s.write_samples([{"run_id": RUN_A, "task_id": "qa", "model": "m", "sample_index": 1, "status": "failed",
                          "prompt": "EX\n\nQ: 2+2", "prompt_text": "Q: 2+2", "log": "printed\n"}])
        s.update_run(RUN_A, name="v2: neutral defined")
        new = s.samples(RUN_A)[1]
        assert (new["prompt"], new["prompt_text"], new["log"]) == ("EX\n\nQ: 2+2", "Q: 2+2", "printed\n")
        assert s.get_run(RUN_A)["name"] == "v2: neutral defined"
        assert s.compact() == 0  # the question's text is referenced: compact keeps it
        assert s.samples(RUN_A)[1]["prompt_text"] == "Q: 2+2"
        assert s.integrity_check() == "ok"


def test_closed_store_refuses_calls(tmp_path):
    s = Store(tmp_path / "s.sqlite")
    s.close()
    s.close()  # idempotent
    with pytest.raises(EvalnbError, match="closed"):
        s.get_run("eval_run_x")


# ------------------------------------------------------------------ suites and runs


def test_suite_round_trip_and_unknown_suite(store):
    assert store.get_suite("v1") == MANIFEST
    store.save_suite("v1", {"tasks": []})  # same version: first manifest kept (versions are content hashes)
    assert store.get_suite("v1") == MANIFEST
    with pytest.raises(UnknownSuiteError, match="unknown suite version 'nope'"):
        store.get_suite("nope")
    with pytest.raises(KeyError):
        store.get_suite("nope")
    with pytest.raises(UnknownSuiteError, match="save_suite"):
        make_run(store, suite_version="nope")


def test_create_run_records_a_canonical_run(store):
    run_id = make_run(
        store, generation={"temperature": 0, "max_output_tokens": 64, "top_p": None},
        task_ids=["qa"], max_samples=10, concurrency=8, judge_model="judge", metadata={"note": "x"},
    )
    assert run_id.startswith("eval_run_") and len(run_id) == len("eval_run_") + 32
    run = store.get_run(run_id)
    assert run["status"] == "queued"
    assert run["models"] == [
        {"name": "m1", "base_url": None, "api": "responses", "label": "m1"},
        {"name": "m2", "base_url": None, "api": "responses", "label": "m2"},
    ]
    assert run["generation"] == {"max_output_tokens": 64, "temperature": 0}
    assert run["task_ids"] == ["qa"] and run["max_samples"] == 10 and run["concurrency"] == 8
    assert run["judge_model"] == "judge" and run["metadata"] == {"note": "x"}
    assert run["versions"]["python"] and run["versions"]["sqlite"] and "pandas" in run["versions"]
    assert isinstance(run["created_at"], int) and run["started_at"] is None and run["completed_at"] is None
    assert run["owner"]["pid"] == os.getpid()
    assert run["counts"]["total"] == 0


def test_create_run_with_manifest_saves_the_suite(store):
    run_id = store.create_run("v2", models=[{"name": "m"}], manifest={"tasks": [{"id": "t"}]})
    assert store.get_suite("v2") == {"tasks": [{"id": "t"}]}
    assert store.get_run(run_id)["suite_version"] == "v2"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"models": []}, "at least one model"),
        ({"models": [{"name": "a"}, {"name": "b", "label": "a"}]}, "labels must be unique"),
        ({"models": [{"base_url": "http://x"}]}, "non-empty string name"),
        ({"concurrency": 0}, "1 to 25"),
        ({"concurrency": 26}, "1 to 25"),
        ({"max_samples": 0}, "positive integer"),
        ({"task_ids": []}, "non-empty list"),
        ({"metadata": {"k" * 65: "v"}}, "1-64 characters"),
        ({"metadata": {"k": "v" * 513}}, "longer than 512"),
        ({"run_id": "run-1"}, "eval_run_<32 hex"),
        ({"status": "done"}, "run status must be one of"),
        ({"name": ""}, "run name must be a non-empty string"),
        ({"name": 3}, "run name must be a non-empty string"),
        ({"name": "n" * 201}, "at most 200 characters"),
    ],
)
def test_create_run_rejects_bad_input(store, kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_run(store, **kwargs)


def test_create_run_accepts_the_limits(store):
    run_id = make_run(store, concurrency=25, metadata={"k" * 64: "v" * 512}, max_samples=1)
    assert store.get_run(run_id)["concurrency"] == 25
    assert make_run(store, concurrency=1)


def test_run_ids_are_unique(store):
    run_id = make_run(store)
    with pytest.raises(ValueError, match="already exists"):
        make_run(store, run_id=run_id)


def test_update_run_status_and_timestamps(store):
    run_id = make_run(store)
    store.update_run(run_id, status="in_progress")
    started = store.get_run(run_id)["started_at"]
    assert isinstance(started, int)
    store.update_run(run_id, status="in_progress", summary={"requests": 3})  # keeps the first start
    assert store.get_run(run_id)["started_at"] == started
    store.update_run(run_id, status="failed", error=RuntimeError("the server went away"))
    run = store.get_run(run_id)
    assert run["status"] == "failed" and run["error"] == "RuntimeError: the server went away"
    assert run["completed_at"] >= started and run["summary"] == {"requests": 3}
    store.update_run(run_id, completed_at=123, error=None)
    assert store.get_run(run_id)["completed_at"] == 123 and store.get_run(run_id)["error"] is None


def test_update_run_rejects_unknown_fields_status_and_runs(store):
    run_id = make_run(store)
    with pytest.raises(ValueError, match="cannot update run field.*models"):
        store.update_run(run_id, models=[])
    with pytest.raises(ValueError, match="run status must be one of"):
        store.update_run(run_id, status="running")
    with pytest.raises(ValueError, match="1 to 25"):
        store.update_run(run_id, concurrency=26)
    store.update_run(run_id, concurrency=25)
    assert store.get_run(run_id)["concurrency"] == 25
    with pytest.raises(ValueError, match="at most 200"):
        store.update_run(run_id, name="n" * 201)
    with pytest.raises(UnknownRunError, match="unknown run 'eval_run_nope'"):
        store.update_run("eval_run_nope", status="failed")
    with pytest.raises(KeyError):
        store.get_run("eval_run_nope")


def test_list_runs_dataframe(store):
    import pandas as pd

    assert list(store.list_runs().columns) == [
        "run_id", "name", "suite_version", "status", "models", "tasks", "n_planned", "n_samples", "n_completed",
        "n_failed", "n_not_run", "created_at", "started_at", "completed_at", "duration_s", "judge_model", "error",
        "metadata",
    ]
    first = make_run(store)
    second = make_run(store, models=[{"name": "gpt", "label": "G"}], task_ids=["qa", "math"], name="v2: neutral defined")
    store.write_samples([sample(0), sample(1, status="failed"), sample(2, status="scoring")], run_id=first)
    store.update_run(first, status="completed")
    runs = store.list_runs()
    assert runs["run_id"].tolist() == [second, first]  # newest first (same second: insertion order)
    row = runs.set_index("run_id").loc[first]
    assert (row["n_samples"], row["n_completed"], row["n_failed"]) == (3, 1, 1)
    assert pd.isna(row["n_planned"]) and pd.isna(row["n_not_run"])  # recorded without a plan
    store.set_planned(first, {"qa": {"m1": 60, "m2": 60}})
    row = store.list_runs().set_index("run_id").loc[first]
    assert (row["n_planned"], row["n_samples"], row["n_completed"], row["n_not_run"]) == (120, 3, 1, 117)
    assert store.planned(first) == {"qa": {"m1": 60, "m2": 60}} and store.planned(second) is None
    assert row["models"] == "m1, m2" and row["tasks"] == "(all)" and row["status"] == "completed"
    assert runs.set_index("run_id").loc[second, "tasks"] == "qa, math"
    assert runs.set_index("run_id").loc[second, "name"] == "v2: neutral defined"
    assert runs.set_index("run_id").loc[first, "name"] is None
    assert store.latest_run_id() == second
    assert isinstance(runs["created_at"].dtype, pd.DatetimeTZDtype)
    assert runs.set_index("run_id").loc[first, "created_at"].timestamp() == store.get_run(first)["created_at"]
    assert store.list_runs(status="completed")["run_id"].tolist() == [first]
    assert store.list_runs(limit=1)["run_id"].tolist() == [second]
    assert store.list_runs(suite_version="other").empty


def test_delete_run_and_compact(store):
    keep, drop = make_run(store), make_run(store)
    store.write_samples([sample(0, prompt="shared"), sample(1, prompt="only in drop")], run_id=drop)
    store.write_samples([sample(0, prompt="shared")], run_id=keep)
    store.write_task_metrics(drop, "qa", "m1", {"f1": 0.5})
    store.delete_run(drop)
    with pytest.raises(UnknownRunError):
        store.get_run(drop)
    assert store.samples(drop) == [] and store.task_metrics(drop) == []
    assert store.compact() == 2  # "only in drop" and its dataset row
    assert store.samples(keep)[0]["prompt"] == "shared"
    with pytest.raises(UnknownRunError):
        store.delete_run(drop)


# ------------------------------------------------------------------ samples


def test_samples_round_trip_every_field(store):
    run_id = make_run(store)
    original = sample(3, judge={"rationale": "ok"}, error={"type": "X", "message": "m"}, grader_key="g1",
                      started_at=10, completed_at=20, created_at=5, prompt_text="Question 3?", log="debug: 3\n",
                      cost_usd=0.0125, cached=False, missing_field=1)
    assert store.write_samples([original], run_id=run_id) == 1
    [got] = store.samples(run_id)
    assert got == {**original, "run_id": run_id, "epoch": 0}  # no epoch given: the first ask


def test_epochs_of_one_item_are_separate_samples_in_key_order(store):
    run_id = make_run(store)
    store.write_samples([sample(0, epoch=1, output_text="second"), sample(0, output_text="first"),
                         sample(1, epoch=2), sample(0, epoch=1, status="failed", output_text="again")], run_id=run_id)
    got = store.samples(run_id)
    assert [(s["sample_index"], s["epoch"]) for s in got] == [(0, 0), (0, 1), (1, 2)]
    assert [s["output_text"] for s in got[:2]] == ["first", "again"]  # (item 0, epoch 1) was upserted
    # keyset paging walks the epoch too: pages of one row still give every sample once
    pages = list(store.column_pages(run_id, ["sample_index", "epoch"], batch_size=1))
    assert [(p["sample_index"][0], p["epoch"][0]) for p in pages] == [(0, 0), (0, 1), (1, 2)]
    assert [p["epoch"] for p in store.column_pages(run_id, ["epoch"], task_id="qa", model="m1", after=(0, 0))] == [[1, 2]]


@pytest.mark.parametrize("epoch", [-1, 1.0, True, "1"])
def test_a_bad_epoch_is_refused_naming_the_sample(store, epoch):
    run_id = make_run(store)
    with pytest.raises(ValueError, match=r"sample \(task_id='qa', model='m1', sample_index=0.*epoch must be an integer >= 0"):
        store.write_samples([sample(0, epoch=epoch)], run_id=run_id)
    assert store.samples(run_id) == []


def test_epochs_are_part_of_the_run_record_and_its_signature(store):
    store.save_suite("v1", MANIFEST)
    one = store.create_run("v1", models=[{"name": "m1"}])
    five = store.create_run("v1", models=[{"name": "m1"}], epochs=5)
    assert store.get_run(one)["epochs"] == 1 and store.get_run(five)["epochs"] == 5
    assert store.get_run(one)["signature"] != store.get_run(five)["signature"]
    # epochs=1 leaves the signature as it was before epochs existed
    assert store.get_run(one)["signature"] == run_signature("v1", [{"name": "m1", "base_url": None, "api": "responses",
                                                                   "label": "m1"}], {}, None, None)
    store.update_run(five, status="failed")
    store.update_run(one, status="failed")
    assert store.find_resumable_run("v1", models=[{"name": "m1"}], epochs=5) == five
    assert store.find_resumable_run("v1", models=[{"name": "m1"}]) == one
    with pytest.raises(ValueError, match="epochs must be an integer from 1 to 100"):
        store.create_run("v1", models=[{"name": "m1"}], epochs=101)


def test_a_schema_1_store_opens_with_its_samples_as_epoch_0(tmp_path):
    """A store written before epochs existed: its samples and runs survive, as epoch 0 / 1 epoch."""
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    for statement in _schema._DDL_V1:
        conn.execute(statement)
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    conn.execute("INSERT INTO suites VALUES ('v1', ?, 0)", (json.dumps(MANIFEST),))
    conn.execute("INSERT INTO runs (run_id, suite_version, status, models, generation, signature, created_at, updated_at)"
                 " VALUES (?, 'v1', 'completed', ?, '{}', 'sig', 0, 0)",
                 ("eval_run_" + "a" * 32, json.dumps([{"name": "m1", "label": "m1"}])))
    for i in range(3):
        conn.execute("INSERT INTO samples (run_id, task_id, model, sample_index, status, output_text, scores) "
                     "VALUES (?, 'qa', 'm1', ?, 'completed', ?, ?)",
                     ("eval_run_" + "a" * 32, i, f"out {i}", json.dumps({"accuracy": i % 2})))
    conn.commit()
    conn.close()
    with Store(path) as s:
        assert s.schema_version == SCHEMA_VERSION
        run_id = "eval_run_" + "a" * 32
        assert s.get_run(run_id)["epochs"] == 1
        got = s.samples(run_id)
        assert [(x["sample_index"], x["epoch"], x["output_text"]) for x in got] == [(0, 0, "out 0"), (1, 0, "out 1"),
                                                                                  (2, 0, "out 2")]
        s.write_samples([sample(0, epoch=1)], run_id=run_id)  # the new key is in force
        assert len(s.samples(run_id)) == 4
        assert s.integrity_check() == "ok"
        index = s._conn.execute("SELECT sql FROM sqlite_master WHERE name = 'samples_by_status'").fetchone()[0]
        assert "epoch" in index


def test_epoch_keys_keep_epoch_0_and_give_every_later_epoch_its_own():
    key = request_key("m", "http://h/v1", "chat", "Q?", {"temperature": 1})
    keys = [epoch_request_key(key, e) for e in range(5)]
    assert keys[0] == key  # caches from before epochs stay valid
    assert len(set(keys)) == 5 and all(len(k) == 64 for k in keys)
    assert epoch_request_key(key, 3) == keys[3]  # stable: raising K keeps the earlier epochs' keys


def test_write_samples_is_an_upsert_that_keeps_absent_fields(store):
    run_id = make_run(store)
    store.write_samples([{"task_id": "qa", "model": "m1", "sample_index": 0, "status": "generating",
                          "prompt": "Q?", "target": "A", "created_at": 100}], run_id=run_id)
    store.write_samples([{"task_id": "qa", "model": "m1", "sample_index": 0, "status": "scoring",
                          "output_text": "A!"}], run_id=run_id)
    [got] = store.samples(run_id)
    assert (got["status"], got["prompt"], got["target"], got["output_text"]) == ("scoring", "Q?", "A", "A!")
    assert got["created_at"] == 100 and got["completed_at"] is None
    store.write_samples([{"task_id": "qa", "model": "m1", "sample_index": 0, "status": "completed",
                          "scores": {"acc": True}, "target": None}], run_id=run_id)
    [got] = store.samples(run_id)
    assert got["status"] == "completed" and got["scores"] == {"acc": True}
    assert got["target"] is None  # present as None: overwritten
    assert got["created_at"] == 100  # set on first insert only
    assert isinstance(got["completed_at"], int)  # a finished sample gets completed_at
    assert store.sample_counts(run_id) == {"total": 1, "queued": 0, "generating": 0, "scoring": 0,
                                           "completed": 1, "failed": 0}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"status": "running"}, "status must be one of"),
        ({"status": None}, "status must be one of"),
        ({"sample_index": -1}, "sample_index must be an integer >= 0"),
        ({"sample_index": True}, "sample_index must be an integer"),
        ({"sample_index": "3"}, "sample_index must be an integer"),
        ({"task_id": ""}, "task_id must be a non-empty string"),
        ({"model": None}, "model must be a non-empty string"),
        ({"output_text": 42}, "output_text must be a string or None"),
        ({"prompt": ["a"]}, "prompt must be a string or None"),
        ({"scores": {"acc": {1, 2}}}, "not JSON serializable"),
    ],
)
def test_malformed_samples_are_refused_and_nothing_is_written(store, bad, message):
    run_id = make_run(store)
    with pytest.raises((TypeError, ValueError), match=message) as info:
        store.write_samples([sample(0), sample(1, **bad)], run_id=run_id)
    assert "sample (task_id=" in str(info.value)  # names the sample
    assert store.samples(run_id) == []


def test_a_sample_needs_a_run_id(store):
    with pytest.raises(ValueError, match="no run_id"):
        store.write_samples([sample(0)])
    run_id = make_run(store)
    store.write_samples([{**sample(0), "run_id": run_id}])  # or carry it itself
    assert len(store.samples(run_id)) == 1


def test_unknown_sample_keys_are_ignored(store):
    run_id = make_run(store)
    store.write_samples([sample(0, item={"x": 1}, reused=True)], run_id=run_id)
    assert "item" not in store.samples(run_id)[0]


def test_sample_filters_order_and_paging(store):
    run_id = make_run(store)
    rows = [sample(i, task=t, model=m, status="failed" if i == 2 else "completed")
            for t in ("qa", "math") for m in ("m2", "m1") for i in (4, 2, 0, 1, 3)]
    store.write_samples(rows, run_id=run_id)
    every = store.samples(run_id)
    keys = [(s["task_id"], s["model"], s["sample_index"]) for s in every]
    assert keys == sorted(keys) and len(keys) == 20
    paged = [key for page in store.column_pages(run_id, ["task_id", "model", "sample_index"], batch_size=3)
             for key in zip(*page.values())]
    assert paged == keys
    assert {s["task_id"] for s in store.samples(run_id, task_id="qa")} == {"qa"}
    assert len(store.samples(run_id, task_id="qa", model="m1")) == 5
    assert len(store.samples(run_id, status="failed")) == 4
    assert len(store.samples(run_id, status=["failed", "completed"])) == 20
    assert store.samples(run_id, model="nobody") == []
    with pytest.raises(ValueError, match="sample status must be one of"):
        store.samples(run_id, status="done")
    with pytest.raises(ValueError, match="sample status must be one of"):
        next(store.column_pages(run_id, ["status"], status=["completed", "done"]))


def test_prompts_and_rows_are_stored_once(store):
    run_id = make_run(store)
    prompt = "A long few-shot prompt. " * 50
    row = {"question": "q", "answer": "a"}
    store.write_samples([sample(0, model=m, prompt=prompt, dataset_row=row) for m in ("m1", "m2")], run_id=run_id)
    with store.writer(run_id) as writer:
        writer.add(sample(0, model="m3", prompt=prompt, dataset_row=row))
    other = make_run(store)
    store.write_samples([sample(0, prompt=prompt, dataset_row=dict(row))], run_id=other)
    count = store._conn.execute("SELECT count(*) FROM texts").fetchone()[0]
    assert count == 2  # one prompt, one row, for 4 samples in 2 runs
    assert all(s["prompt"] == prompt and s["dataset_row"] == row for s in store.samples(run_id) + store.samples(other))


def test_store_can_be_shared_between_threads(store):
    run_id = make_run(store)
    errors: list[BaseException] = []

    def work(model: str) -> None:
        try:
            for i in range(50):
                store.write_samples([sample(i, model=model)], run_id=run_id)
                store.sample_counts(run_id)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(f"m{k}",)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.sample_counts(run_id)["total"] == 200


# ------------------------------------------------------------------ the output cache


def test_request_key_is_a_pure_hash_of_what_decides_the_output():
    base = request_key("gpt", "http://h/v1", "chat", "Q?", {"temperature": 0, "max_output_tokens": 5})
    assert len(base) == 64 and int(base, 16) >= 0
    same = [
        request_key("gpt", "http://h/v1/", "chat", "Q?", {"max_output_tokens": 5, "temperature": 0}),
        request_key("gpt", "http://h/v1", "chat", "Q?", {"temperature": 0, "max_output_tokens": 5, "top_p": None}),
        request_key("gpt", "http://h/v1", "chat", "Q?", {"temperature": 0, "max_output_tokens": 5,
                                                          "timeout_seconds": 9, "max_retries": 0, "max_empty_retries": 3}),
    ]
    assert all(key == base for key in same)
    different = [
        request_key("gpt2", "http://h/v1", "chat", "Q?", {"temperature": 0, "max_output_tokens": 5}),
        request_key("gpt", "http://other/v1", "chat", "Q?", {"temperature": 0, "max_output_tokens": 5}),
        request_key("gpt", "http://h/v1", "responses", "Q?", {"temperature": 0, "max_output_tokens": 5}),
        request_key("gpt", "http://h/v1", "chat", "Q? ", {"temperature": 0, "max_output_tokens": 5}),
        request_key("gpt", "http://h/v1", "chat", "Q?", {"temperature": 0.1, "max_output_tokens": 5}),
        request_key("gpt", "http://h/v1", "chat", "Q?", {"temperature": 0}),
    ]
    assert len({base, *different}) == 7
    with pytest.raises(ValueError):
        request_key("gpt", None, "chat", "Q?", {"temperature": float("nan")})


def test_output_cache_round_trip_misses_and_latest_wins(store):
    keys = [f"k{i:05d}" for i in range(1234)]  # more than two IN (...) chunks
    stored = store.put_outputs(
        [{"request_key": k, "output_text": f"out {k}", "usage": {"output_tokens": 3}, "response_id": f"r{k}",
          "latency_s": 0.5} for k in keys[::2]]
        + [{"request_key": "bad", "output_text": None, "error": "HTTP 500"}]  # errors are never cached
    )
    assert stored == 617
    found = store.lookup_outputs(keys + ["bad", "k00000", "never"])
    assert set(found) == set(keys[::2])
    assert found["k00002"]["output_text"] == "out k00002" and found["k00002"]["usage"] == {"output_tokens": 3}
    assert found["k00002"]["response_id"] == "rk00002" and found["k00002"]["latency_s"] == 0.5
    store.put_outputs([{"request_key": "k00002", "output_text": "newer"}])
    assert store.lookup_outputs(["k00002"])["k00002"]["output_text"] == "newer"
    assert store.lookup_outputs([]) == {}


def test_put_outputs_refuses_malformed_entries(store):
    with pytest.raises(ValueError, match="output_text must be a string"):
        store.put_outputs([{"request_key": "k", "output_text": None}])
    with pytest.raises(ValueError, match="request_key"):
        store.put_outputs([{"output_text": "x"}])
    assert store.lookup_outputs(["k"]) == {}


def test_task_metrics_round_trip_and_replace(store):
    run_id = make_run(store)
    store.write_task_metrics(run_id, "qa", "m1", {"macro_f1": 0.5})
    store.write_task_metrics(run_id, "qa", "m2", None, error=ZeroDivisionError("division by zero"))
    store.write_task_metrics(run_id, "qa", "m1", {"macro_f1": 0.75})
    got = store.task_metrics(run_id)
    assert [(t["model"], t["metrics"], t["error"]) for t in got] == [
        ("m1", {"macro_f1": 0.75}, None), ("m2", None, "ZeroDivisionError: division by zero")]
    with pytest.raises(TypeError):
        store.write_task_metrics(run_id, "qa", "m1", [0.5])


# ------------------------------------------------------------------ secrets


class FakeModel:  # attribute access like evalnb.Model, for the duck-typed path
    def __init__(self, name: str, api_key: str):
        self.name, self.api_key, self.base_url, self.api, self.label = name, api_key, "http://h/v1", "chat", None
        self.headers = {"Authorization": f"Bearer {api_key}-hdr"}


def test_no_api_key_reaches_the_database_file(tmp_path):
    from evalnb.providers import Model

    key, key2, key3 = "sk-live-SECRETKEY-111111", "sk-live-OTHERKEY-222222", "sk-live-THIRDKEY-333333"
    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        s.save_suite("v1", MANIFEST)
        run_id = s.create_run(
            "v1",
            models=[
                {"name": "a", "api_key": key, "headers": {"Authorization": f"Bearer {key}"},
                 "base_url": f"http://user:{key}@h/v1?api_key={key}"},
                Model("b", base_url="http://127.0.0.1:9/v1", api_key=key2, label="B"),
                FakeModel("c", key3),
            ],
            generation={"temperature": 0, "extra_body": {"api_key": key, "note": f"uses {key2}"}},
            metadata={"authorization": key, "note": f"run with {key3}"},
        )
        s.update_run(run_id, status="failed", error=f"HTTP 401: bad key {key}", summary={"last": key2})
        s.write_samples([sample(0, error={"message": f"invalid key {key3}-hdr"})], run_id=run_id)
        with s.writer(run_id) as writer:
            writer.add(sample(1, error=f"echo {key2}"))
        s.write_task_metrics(run_id, "qa", "a", None, error=f"judge failed with {key}")
        run = s.get_run(run_id)
        assert [m["label"] for m in run["models"]] == ["a", "B", "c"]
        assert all(set(m) == {"name", "base_url", "api", "label"} for m in run["models"])
        assert run["models"][0]["base_url"] == "http://h/v1?api_key=%5Bredacted%5D"
        assert run["generation"]["extra_body"] == {"api_key": "[redacted]", "note": "uses [redacted]"}
        assert "[redacted]" in run["error"] and "[redacted]" in s.samples(run_id)[0]["error"]["message"]
    blob = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("s.sqlite"))
    assert b"SECRETKEY" not in blob and b"OTHERKEY" not in blob and b"THIRDKEY" not in blob
    assert b"redacted" in blob  # the redacted record is really there


def test_redact_masks_credential_keys_and_known_secrets():
    data = {"api_key": "x", "nested": [{"Authorization": "Bearer y", "OPENAI_API_KEY": "z", "max_tokens": 5,
                                        "text": "key=abcd1234 here", "token": None}]}
    out = redact(data, ["abcd1234", "ab"])  # secrets shorter than 4 characters are ignored
    assert out == {"api_key": "[redacted]", "nested": [{"Authorization": "[redacted]", "OPENAI_API_KEY": "[redacted]",
                                                          "max_tokens": 5, "text": "key=[redacted] here", "token": None}]}
    assert data["api_key"] == "x"  # a copy
    assert redact_url("https://u:p@h:8/v1?key=k&x=1") == "https://h:8/v1?key=%5Bredacted%5D&x=1"
    assert redact_url("http://h/v1") == "http://h/v1"


def test_sanitize_models_keeps_only_safe_fields():
    assert sanitize_models([{"name": "m", "api_key": "k", "label": "L", "extra": 1}]) == [
        {"name": "m", "base_url": None, "api": "responses", "label": "L"}]


# ------------------------------------------------------------------ ownership and resuming


DIE_CHILD = """
import sys
from evalnb.store import Store
s = Store(sys.argv[1])
print(s.create_run("v1", models=[{"name": "m1"}, {"name": "m2"}], generation={"temperature": 0},
                   status="in_progress"), flush=True)
if sys.argv[2] == "wait":
    sys.stdin.read()
"""


def test_owner_alive_tells_dead_reused_and_foreign_owners():
    me = current_owner()
    assert owner_alive(me.pid, me.host, me.token)
    assert owner_alive(me.pid, me.host, "")  # no token (non-Linux): pid check only
    if me.token:
        assert not owner_alive(me.pid, me.host, me.token.split(":")[0] + ":1")  # pid reused by another process
        assert not owner_alive(me.pid, me.host, "another-boot:" + me.token.split(":")[1])
    assert not owner_alive(2**22 + 12345, me.host, "")
    assert not owner_alive(None, None, None)
    assert owner_alive(2**22 + 12345, "some-other-host", "")  # cannot tell: assume alive


def test_a_run_whose_process_died_is_resumable(store):
    child = run_child(DIE_CHILD, str(store.path), "exit")
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    run_id = out.strip()
    same = {"models": [{"name": "m2"}, {"name": "m1"}], "generation": {"temperature": 0, "timeout_seconds": 5}}
    assert store.find_resumable_run("v1", **same) == run_id  # model order and timeouts do not matter
    assert store.find_resumable_run("v1", models=[{"name": "m1"}, {"name": "m2"}], generation={"temperature": 1}) is None
    assert store.find_resumable_run("v1", task_ids=["qa"], **same) is None
    assert store.find_resumable_run("v2", **same) is None
    claimed = store.claim_run(run_id)
    assert claimed["status"] == "in_progress" and claimed["owner"]["pid"] == os.getpid()
    assert store.find_resumable_run("v1", **same) is None  # this process is running it now
    with pytest.raises(EvalnbError, match="already running in this process"):
        store.claim_run(run_id)
    store.update_run(run_id, status="completed")
    assert store.find_resumable_run("v1", **same) is None  # completed runs are not continued
    with pytest.raises(EvalnbError, match="completed"):
        store.claim_run(run_id)


def test_a_run_of_a_live_process_is_left_alone(store):
    child = run_child(DIE_CHILD, str(store.path), "wait")
    try:
        run_id = child.stdout.readline().strip()
        assert run_id.startswith("eval_run_")
        args = {"models": [{"name": "m1"}, {"name": "m2"}], "generation": {"temperature": 0}}
        assert store.find_resumable_run("v1", **args) is None
        with pytest.raises(EvalnbError, match="still running"):
            store.claim_run(run_id)
    finally:
        child.kill()
        child.communicate(timeout=30)  # reaps it and closes the pipes
    assert store.find_resumable_run("v1", **args) == run_id


def test_failed_and_cancelled_runs_are_resumable_newest_first(store):
    first = make_run(store)
    second = make_run(store)
    args = {"models": [{"name": "m1"}, {"name": "m2"}], "generation": {"temperature": 0}}
    assert store.find_resumable_run("v1", **args) is None  # both active in this process
    store.update_run(first, status="failed")
    assert store.find_resumable_run("v1", **args) == first
    store.update_run(second, status="cancelled")
    assert store.find_resumable_run("v1", **args) == second
    assert store.claim_run(first)["error"] is None


def test_unknown_runs_cannot_be_claimed(store):
    with pytest.raises(UnknownRunError):
        store.claim_run("eval_run_" + "0" * 32)


# ------------------------------------------------------------------ the group-commit writer


def test_writer_flush_makes_samples_visible_to_other_connections(store):
    run_id = make_run(store)
    reader = Store(store.path)
    with store.writer(run_id, interval_s=10) as writer:  # long interval: only flush() commits
        writer.add_samples([sample(i) for i in range(10)])
        writer.add(sample(10))
        writer.put_outputs([{"request_key": "k", "output_text": "o"}, {"request_key": "e", "error": "x"}])
        writer.flush()
        assert writer.pending == 0 and writer.committed == 12
        assert reader.sample_counts(run_id)["total"] == 11
        assert set(reader.lookup_outputs(["k", "e"])) == {"k"}
    reader.close()


def test_writer_commits_on_its_own_within_the_interval(store):
    run_id = make_run(store)
    reader = Store(store.path)
    with store.writer(run_id, interval_s=0.05) as writer:
        writer.add(sample(0))
        deadline = time.monotonic() + 5
        while reader.sample_counts(run_id)["total"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert reader.sample_counts(run_id)["total"] == 1
        assert time.monotonic() < deadline
    reader.close()


def test_a_fast_producer_commits_full_batches_itself(store):
    run_id = make_run(store)
    with store.writer(run_id, interval_s=30, max_batch=7) as writer:  # the thread would wait 30 s
        for i in range(6):
            writer.add(sample(i))
        assert writer.committed == 0
        writer.add(sample(6))  # the 7th: a full batch, committed before add() returns
        assert writer.committed == 7 and store.sample_counts(run_id)["total"] == 7
        writer.add_samples([sample(i) for i in range(7, 50)])  # 43 more: 6 full batches + 1 waiting
        assert writer.committed == 14 and writer.pending == 36
        writer.flush(timeout=30)
        assert writer.pending == 0
    assert [s["sample_index"] for s in store.samples(run_id)] == list(range(50))


def test_writer_backpressure_blocks_instead_of_growing(store):
    run_id = make_run(store)
    blocker = sqlite3.connect(store.path, isolation_level=None)
    writer = store.writer(run_id, interval_s=0, max_batch=1000, max_pending=5)
    blocker.execute("BEGIN IMMEDIATE")  # commits wait, so items pile up
    done = threading.Event()

    def produce() -> None:
        for i in range(20):
            writer.add(sample(i))
        done.set()

    producer = threading.Thread(target=produce)
    producer.start()
    time.sleep(0.3)
    assert not done.is_set() and writer.pending <= 6  # blocked at the limit (+1 in the failed-to-lock batch)
    blocker.execute("COMMIT")
    blocker.close()
    producer.join(timeout=30)
    writer.close()
    assert done.is_set() and store.sample_counts(run_id)["total"] == 20


def test_writer_is_safe_to_share_between_threads(store):
    run_id = make_run(store)
    with store.writer(run_id, interval_s=0.001) as writer:
        def work(model: str) -> None:
            for i in range(200):  # every thread writes the same prompts and rows
                writer.add(sample(i, model=model, prompt=f"shared prompt {i}", dataset_row={"i": i}))

        threads = [threading.Thread(target=work, args=(f"m{k}",)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    got = store.samples(run_id)
    assert len(got) == 800
    assert all(s["prompt"] == f"shared prompt {s['sample_index']}" and s["dataset_row"] == {"i": s["sample_index"]}
               for s in got)


def test_writer_refuses_bad_samples_at_the_call(store):
    run_id = make_run(store)
    with store.writer(run_id) as writer:
        with pytest.raises(ValueError, match="status must be one of"):
            writer.add(sample(0, status="bogus"))
        with pytest.raises(ValueError, match="sample_index"):
            writer.add_samples([sample(1), sample(-1)])  # all or nothing
        writer.add(sample(2, prompt="Question 1?"))  # the refused batch's texts are not assumed stored
    assert [s["sample_index"] for s in store.samples(run_id)] == [2]
    assert store.samples(run_id)[0]["prompt"] == "Question 1?"
    with pytest.raises(StoreWriteError, match="closed"):
        writer.add(sample(3))
    with store.writer() as writer, pytest.raises(ValueError, match="no run_id"):
        writer.add(sample(0))


def test_writer_errors_surface_at_the_next_call(store):
    run_id = make_run(store)
    writer = store.writer(run_id, interval_s=0)
    store._conn.execute("DROP TABLE samples")  # the writer's next commit fails
    writer.add(sample(0))
    with pytest.raises(StoreWriteError, match="no such table"):
        writer.flush(timeout=30)
    with pytest.raises(StoreWriteError, match="stopped"):
        writer.add(sample(1))
    writer.close()  # already reported: close is quiet


def test_writer_close_reports_an_error_nobody_saw(store):
    run_id = make_run(store)
    writer = store.writer(run_id, interval_s=0)
    store._conn.execute("DROP TABLE samples")
    writer.add(sample(0))
    deadline = time.monotonic() + 30
    while writer._thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(StoreWriteError, match="no such table"):
        writer.close()
    writer.close()  # second close is quiet


def test_writer_flush_timeout(store):
    run_id = make_run(store)
    blocker = sqlite3.connect(store.path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # hold the write lock
    writer = store.writer(run_id, interval_s=0)
    try:
        writer.add(sample(0))
        with pytest.raises(TimeoutError, match="1 items pending"):
            writer.flush(timeout=0.3)
    finally:
        blocker.execute("COMMIT")
        blocker.close()
    writer.close()
    assert store.sample_counts(run_id)["total"] == 1


# ------------------------------------------------------------------ crashes and concurrent readers


WRITER_CHILD = """
import sys, time
from evalnb.store import Store
path, mode = sys.argv[1], sys.argv[2]
s = Store(path)
run_id = s.create_run("v1", models=[{"name": "m1"}], status="in_progress")
print("run", run_id, flush=True)
w = s.writer(run_id, interval_s=0.05)

def sample(i):
    return {"task_id": "qa", "model": "m1", "sample_index": i, "status": "completed", "prompt": "P" * 500,
            "output_text": f"out {i}", "scores": {"acc": i % 2}, "dataset_row": {"i": i}}

i = 0
if mode == "flush":
    while True:
        for _ in range(500):
            w.add(sample(i)); i += 1
        w.flush()
        print("flushed", i, flush=True)
elif mode == "interval":
    for _ in range(300):
        w.add(sample(i)); i += 1
    time.sleep(0.5)  # several commit intervals, no flush()
    print("added", i, flush=True)
    while True:
        w.add(sample(i)); i += 1
        time.sleep(0.0005)
elif mode == "steady":
    for _ in range(20):
        w.add_samples([sample(i + k) for k in range(500)]); i += 500
        time.sleep(0.01)
    w.close()
    print("done", i, flush=True)
"""


def _wait_for(child: subprocess.Popen, word: str, times: int = 1) -> tuple[str, int]:
    seen = 0
    while True:
        line = child.stdout.readline()
        if not line:
            raise AssertionError(f"child ended early: {child.stderr.read()}")
        head, _, value = line.strip().partition(" ")
        if head == "run":
            run_id = value
        if head == word:
            seen += 1
            if seen == times:
                return run_id, int(value)


@pytest.mark.parametrize("mode", ["flush", "interval"])
def test_sigkill_keeps_what_was_flushed_and_the_file_intact(store, mode):
    child = run_child(WRITER_CHILD, str(store.path), mode)
    try:
        run_id, written = _wait_for(child, "flushed" if mode == "flush" else "added", times=3 if mode == "flush" else 1)
        time.sleep(0.02)  # let it get into its next batch
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=30)
    with Store(store.path) as after:
        assert after.integrity_check() == "ok"
        got = after.samples(run_id)
        indexes = [s["sample_index"] for s in got]
        assert len(got) >= written
        assert indexes == list(range(len(got)))  # a prefix: nothing lost before the last commit
        assert all(s["output_text"] == f"out {s['sample_index']}" and s["prompt"] == "P" * 500 for s in got)
        assert all(s["dataset_row"] == {"i": s["sample_index"]} for s in got)
        assert after.get_run(run_id)["status"] == "in_progress"
        assert after.find_resumable_run("v1", models=[{"name": "m1"}]) == run_id  # its owner is dead


def test_readers_see_consistent_growing_data_while_a_process_writes(store):
    child = run_child(WRITER_CHILD, str(store.path), "steady")
    counts = []
    errors = []
    with Store(store.path) as reader:
        while child.poll() is None:
            try:
                runs = reader.list_runs()
                if runs.empty:
                    continue
                run_id = runs["run_id"].iloc[0]
                keys = {key for page in reader.column_pages(run_id, ["task_id", "model", "sample_index", "epoch"],
                                                            status="completed")
                        for key in zip(*page.values())}
                counts.append(len(keys))
                assert keys == {("qa", "m1", i, 0) for i in range(len(keys))}  # always a committed prefix
            except AssertionError as exc:
                errors.append(exc)
                break
            time.sleep(0.005)
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        assert errors == []
        assert counts == sorted(counts) and len(counts) > 3
        assert reader.sample_counts(run_id)["total"] == 10_000
        assert "done 10000" in out


@pytest.mark.parametrize("prompt", ["", "Q: 2+2?", 'quotes " and \\ backslash', "ünïcødé ✓\n\ttab", "\u0000nul", "x" * 5000])
def test_request_key_function_gives_the_same_keys_as_request_key(prompt):
    from evalnb.store import request_key, request_key_function

    gen = {"temperature": 0, "stop": ["\n"], "extra_body": {"b": 1, "a": [1, 2]}, "timeout_seconds": 9}
    fast = request_key_function("m", "http://h/v1/", "chat", gen)
    assert fast(prompt) == request_key("m", "http://h/v1", "chat", prompt, gen)
    assert fast(prompt) != request_key("m", "http://h/v1", "responses", prompt, gen)


def test_recorded_package_versions_match_importlib_metadata():
    from importlib.metadata import PackageNotFoundError, version

    from evalnb.store._runs import _PACKAGES, _dist_info_versions, package_versions

    found = package_versions()
    listed = _dist_info_versions()  # the fast path: folder names, no metadata files read
    assert {"evalnb", "pydantic", "httpx", "pandas"} <= set(listed)
    for name in _PACKAGES:
        if name in listed:
            assert listed[name] == version(name), name
        try:
            expected = version(name)
        except PackageNotFoundError:
            assert name not in found
        else:
            assert found[name] == expected, name
    assert found["python"].count(".") == 2


def test_multi_row_writes_keep_order_duplicates_and_every_row(store):
    # write_ops sends rows as multi-row statements of up to _MAX_ROWS: the result must be what
    # one statement per row gives, including a key written twice in one batch (last wins)
    from evalnb.store._codec import _MAX_ROWS

    run_id = make_run(store)
    n = 2 * _MAX_ROWS + 7
    batch = [sample(i, output_text=f"first {i}") for i in range(n)]
    batch += [sample(3, output_text="second 3", status="failed"), sample(n - 1, output_text="second last")]
    assert store.write_samples(batch, run_id=run_id) == len(batch)
    rows = {s["sample_index"]: s for s in store.samples(run_id)}
    assert len(rows) == n
    assert rows[0]["output_text"] == "first 0" and rows[_MAX_ROWS]["output_text"] == f"first {_MAX_ROWS}"
    assert rows[3]["output_text"] == "second 3" and rows[3]["status"] == "failed"
    assert rows[n - 1]["output_text"] == "second last"
    assert rows[5]["prompt"] == batch[5]["prompt"]  # the deduplicated texts arrived too


def test_batches_of_any_size_reuse_a_few_cached_statements(tmp_path):
    # multi-row statements come in power-of-two row counts, so batches of 1..40 rows need at
    # most 6 distinct statement texts per kind (each parsed once, then cached); every row lands
    import sqlite3

    from evalnb.store._codec import SampleEncoder, write_ops

    with Store(tmp_path / "s.sqlite") as st:
        st.save_suite("v1", MANIFEST)
        run_id = make_run(st)
        conn = st._connect()
        seen: list[str] = []
        conn.set_trace_callback(seen.append)
        encoder, index = SampleEncoder(), 0
        for size in range(1, 41):
            ops = [encoder.encode(sample(index + k), run_id, 0) for k in range(size)]
            index += size
            assert write_ops(conn, ops) == size
        conn.set_trace_callback(None)
        conn.close()
        inserts = {sql.split(" VALUES ")[0] + f" x{sql.count('), (') + 1}" for sql in seen if sql.startswith("INSERT")}
        per_kind: dict[str, int] = {}
        for text in inserts:
            kind = text.rsplit(" x", 1)[0]
            per_kind[kind] = per_kind.get(kind, 0) + 1
        assert per_kind and max(per_kind.values()) <= 6, per_kind
        rows = st.samples(run_id)
        assert sorted(s["sample_index"] for s in rows) == list(range(index))
        assert all(s["prompt"] == sample(s["sample_index"])["prompt"] for s in rows)
        raw = sqlite3.connect(tmp_path / "s.sqlite")
        assert raw.execute("SELECT typeof(prompt_hash) FROM samples LIMIT 1").fetchone() == ("blob",)
        raw.close()


def test_column_pages_are_samples_transposed(store):
    # the results table reads columns; they must hold exactly what samples() gives, in order,
    # across batch boundaries
    run_id = make_run(store)
    samples = [{"task_id": t, "model": m, "sample_index": i, "status": "completed" if i % 3 else "failed",
                "prompt": f"p{i}", "target": str(i), "output_text": None if i == 4 else f"o{i}",
                "scores": {"acc": i % 2} if i % 3 else None, "error": None if i % 3 else {"stage": "grading", "message": "x"},
                "usage": {"input_tokens": i}, "dataset_row": {"q": i}, "latency_s": i / 10}
               for t in ("b", "a") for m in ("m2", "m1") for i in range(7)]
    store.write_samples(samples, run_id=run_id)
    pages = list(store.column_pages(run_id, batch_size=5))
    columns = {f: [v for page in pages for v in page[f]] for f in pages[0]}
    expected = store.samples(run_id)
    assert len(expected) == 28
    for field, values in columns.items():
        assert values == [s[field] for s in expected], field
    assert columns["task_id"][:7] == ["a"] * 7 and columns["model"][:7] == ["m1"] * 7


def test_closing_a_writer_checkpoints_its_writes_in_the_background(tmp_path):
    # the WAL is copied into the database file once the writer closes, not at process exit
    path = tmp_path / "s.sqlite"
    with Store(path) as st:
        st.save_suite("v1", MANIFEST)
        run_id = make_run(st)
        writer = st.writer(run_id)
        for i in range(300):
            writer.add(sample(i))
        writer.flush()
        before = path.stat().st_size  # the samples are committed, but only in the WAL
        writer.close()
        writer.checkpointed.join(timeout=10)
        assert not writer.checkpointed.is_alive()
        assert path.stat().st_size > before + 300 * 100  # now they are in the database file
        assert len(st.samples(run_id)) == 300
        writer.close()  # twice is fine


# ------------------------------------------------------------------ judge calls and cost (schema 3)


def _call(n, **extra):
    return {"call": n, "kind": "responses", "judge_model": "j", "request": {"input": f"q{n}", "model": "j"},
            "reply": {"output_text": f"a{n}"}, "output_text": f"a{n}", "usage": {"input_tokens": 3, "output_tokens": 1},
            "latency_s": 0.5, "cost_usd": 0.25, "cached": False, "request_key": f"bridge-{n}", **extra}


def test_judge_calls_are_written_with_their_sample_and_read_back(store):
    run_id = make_run(store)
    with store.writer(run_id) as w:
        w.add_samples([sample(0, cost_usd=1.5, cached=False, judge_calls=[_call(0), _call(1)]), sample(1)])
    calls = store.judge_calls(run_id)
    assert [(c["sample_index"], c["call"], c["output_text"]) for c in calls] == [(0, 0, "a0"), (0, 1, "a1")]
    assert calls[1]["request"] == {"input": "q1", "model": "j"} and calls[1]["reply"] == {"output_text": "a1"}
    assert calls[0]["usage"] == {"input_tokens": 3, "output_tokens": 1} and calls[0]["cached"] is False
    assert store.run_spend(run_id) == pytest.approx(1.5 + 0.5)
    store.write_judge_calls(run_id, "qa", "m1", [_call(0, cost_usd=0.125)])  # a batch grader's: no sample
    assert [c["sample_index"] for c in store.judge_calls(run_id)] == [-1, 0, 0]
    assert store.run_spend(run_id) == pytest.approx(2.125)


def test_a_call_paid_for_before_stays_paid_when_answered_from_the_store_later(store):
    run_id = make_run(store)
    store.write_samples([sample(0, status="scoring", judge_calls=[_call(0)])], run_id=run_id)
    # graded again on resume: the same call now comes from the cache (cached, cost 0)
    store.write_samples([sample(0, judge_calls=[_call(0, cached=True, cost_usd=0.0)])], run_id=run_id)
    [call] = store.judge_calls(run_id)
    assert call["cached"] is False and call["cost_usd"] == 0.25
    # a different request in that slot is a different call: its own values win
    store.write_samples([sample(0, judge_calls=[_call(0, cached=True, cost_usd=0.0, request_key="other")])],
                        run_id=run_id)
    [call] = store.judge_calls(run_id)
    assert call["cached"] is True and call["cost_usd"] == 0.0


def test_compact_and_delete_keep_and_drop_judge_call_texts(store):
    keep, drop = make_run(store), make_run(store)
    store.write_samples([sample(0, judge_calls=[_call(0)])], run_id=keep)
    store.write_samples([sample(0, judge_calls=[_call(7)])], run_id=drop)
    store.delete_run(drop)
    assert store.judge_calls(drop) == []
    store.compact()
    [call] = store.judge_calls(keep)
    assert call["request"] == {"input": "q0", "model": "j"} and call["reply"] == {"output_text": "a0"}


def test_copied_samples_are_cached_and_free_with_their_calls(store):
    first, second = make_run(store), make_run(store)
    store.write_samples([sample(0, cost_usd=2.0, cached=False, judge_calls=[_call(0)])], run_id=first)
    store.copy_samples(first, second, [("qa", "m1", 0, 0)], now=1)
    [copied] = store.samples(second)
    assert copied["cached"] is True and copied["cost_usd"] == 0
    [call] = store.judge_calls(second)
    assert call["cached"] is True and call["cost_usd"] == 0 and call["output_text"] == "a0"
    assert store.run_spend(second) == 0 and store.run_spend(first) == pytest.approx(2.25)


def test_a_malformed_judge_call_is_refused_naming_its_sample(store):
    run_id = make_run(store)
    with pytest.raises(ValueError, match=r"judge call -1 of sample \(task_id='qa', model='m1', sample_index=0\)"):
        store.write_samples([sample(0, judge_calls=[_call(-1)])], run_id=run_id)
    assert store.samples(run_id) == []  # all or nothing


def test_failure_reasons_and_failed_errors(store):
    run_id = make_run(store)
    refused = {"stage": "generation", "status": None, "message": "m1: connection error (ConnectError): refused"}
    store.write_samples([sample(0, status="failed", error=refused), sample(1, status="failed", error=refused),
                         sample(2, status="failed", error={"stage": "grading", "message": "KeyError: 'x'"}),
                         sample(3)], run_id=run_id)
    assert store.failure_reasons(run_id) == [(refused["message"], 2), ("KeyError: 'x'", 1)]
    assert store.failure_reasons(run_id, limit=1) == [(refused["message"], 2)]
    assert sorted(i for _, _, i, _, _ in store.failed_errors(run_id)) == [0, 1, 2]
    assert {e["stage"] for *_, e in store.failed_errors(run_id)} == {"generation", "grading"}
    store.update_run(run_id, status="completed")
    with pytest.raises(EvalnbError, match="is completed"):
        store.claim_run(run_id)
    store.claim_run(run_id, reopen=True)  # a resume sending its failed samples again
    assert store.get_run(run_id)["status"] == "in_progress"


def test_a_schema_7_store_gains_the_output_cost_and_keeps_its_outputs(tmp_path, monkeypatch):
    path = tmp_path / "v7.sqlite"
    monkeypatch.setattr(_schema, "SCHEMA_VERSION", 7)
    with Store(path) as old:
        assert old.schema_version == 7
    with sqlite3.connect(path) as conn:  # an answer cached by the evalnb of schema 7 (no cost column)
        assert "cost_usd" not in {r[1] for r in conn.execute("PRAGMA table_info(outputs)")}
        conn.execute("INSERT INTO outputs (request_key, output_text, created_at, run_id) VALUES ('k1', 'old', 1, 'r')")
    monkeypatch.setattr(_schema, "SCHEMA_VERSION", SCHEMA_VERSION)
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION >= 8
        assert store.lookup_outputs(["k1"])["k1"]["output_text"] == "old"
        assert store.lookup_outputs(["k1"])["k1"]["cost_usd"] is None  # not recorded then
        store.put_outputs([{"request_key": "k2", "output_text": "new", "cost_usd": 0.25}])
        assert store.lookup_outputs(["k2"])["k2"]["cost_usd"] == 0.25
