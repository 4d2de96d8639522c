"""The pairwise tables (schema 9): written and read back, replaced by key, migrated from schema 8,
deleted with their run, and masked like every stored text."""

from __future__ import annotations

import pytest

from evalnb.store import SCHEMA_VERSION, Store
from evalnb.store import _schema

CALL = {"task_id": "t", "sample_index": 3, "epoch": 0, "first": "m1", "second": "m2", "verdict": "first",
        "error": None, "request_key": "k1", "output_text": "A is better. [[A]]", "usage": {"input_tokens": 5},
        "latency_s": 0.1, "cost_usd": 0.002, "cached": False}


def _run(store: Store) -> str:
    store.save_suite("v1", {"tasks": []})
    return store.create_run("v1", models=[{"name": "m1", "label": "m1"}, {"name": "m2", "label": "m2"}])


def test_calls_round_trip_and_replace_by_key(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        run_id = _run(store)
        store.save_pairwise_judge(run_id, "j1", "judge", {"template": None})
        store.save_pairwise_judge(run_id, "j1", "judge", {"template": "changed?"})  # first set-up kept
        store.write_pairwise_calls(run_id, "j1", [CALL, {**CALL, "first": "m2", "second": "m1", "verdict": "tie"}])
        store.write_pairwise_calls(run_id, "j1", [{**CALL, "verdict": None, "error": "no verdict"}])
        [judge] = store.pairwise_judges(run_id)
        assert judge["judge_model"] == "judge" and judge["setup"] == {"template": None}
        calls = store.pairwise_calls(run_id, "j1")
        assert [(c["first"], c["verdict"], c["error"]) for c in calls] == [("m1", None, "no verdict"),
                                                                            ("m2", "tie", None)]
        assert calls[1]["usage"] == {"input_tokens": 5} and calls[1]["cached"] is False
        assert store.pairwise_calls(run_id, "other") == [] and len(store.pairwise_calls(run_id)) == 2
        store.delete_run(run_id)
        assert store.pairwise_calls(run_id) == [] and store.pairwise_judges(run_id) == []


def test_judge_set_ups_are_listed_in_order_of_last_use(tmp_path):
    """Set-ups made in the same second (``created_at`` has whole seconds) keep the order they were
    used in, and one used again moves to the end with its first record kept."""
    with Store(tmp_path / "s.sqlite") as store:
        run_id = _run(store)
        for digest in ("ffff", "0000", "aaaa"):  # not in digest order
            store.save_pairwise_judge(run_id, digest, f"judge-{digest}", {"template": digest})
        assert [j["judge"] for j in store.pairwise_judges(run_id)] == ["ffff", "0000", "aaaa"]
        store.save_pairwise_judge(run_id, "ffff", "renamed?", {"template": "changed?"})
        judges = store.pairwise_judges(run_id)
        assert [j["judge"] for j in judges] == ["0000", "aaaa", "ffff"]
        assert (judges[-1]["judge_model"], judges[-1]["setup"]) == ("judge-ffff", {"template": "ffff"})
        store.save_pairwise_judge(run_id, "ffff", "judge-ffff", {"template": "ffff"})  # already last: stays
        assert [j["judge"] for j in store.pairwise_judges(run_id)] == ["0000", "aaaa", "ffff"]


def test_a_key_in_a_judge_reply_is_masked(tmp_path):
    secret = "sk-" + "x" * 40
    with Store(tmp_path / "s.sqlite") as store:
        run_id = _run(store)
        store.write_pairwise_calls(run_id, "j1", [{**CALL, "output_text": f"my key is {secret} [[A]]",
                                                   "error": f"bad {secret}"}])
        [call] = store.pairwise_calls(run_id)
        assert secret not in call["output_text"] and secret not in call["error"]
    assert secret.encode() not in (tmp_path / "s.sqlite").read_bytes()


def test_a_schema_8_store_gains_the_pairwise_tables(tmp_path, monkeypatch):
    path = tmp_path / "old.sqlite"
    monkeypatch.setattr(_schema, "SCHEMA_VERSION", 8)
    with Store(path) as old:
        assert old.schema_version == 8
        assert not old._rows("SELECT 1 FROM sqlite_master WHERE name = 'pairwise_calls'")
        run_id = _run(old)
        with pytest.raises(Exception, match="no such table"):
            old.pairwise_calls(run_id)
    monkeypatch.setattr(_schema, "SCHEMA_VERSION", SCHEMA_VERSION)
    with Store(path) as new:
        assert new.schema_version == SCHEMA_VERSION >= 9
        assert new.pairwise_calls(run_id) == [] and new.get_run(run_id)["run_id"] == run_id
        new.write_pairwise_calls(run_id, "j1", [CALL])
        assert len(new.pairwise_calls(run_id)) == 1
