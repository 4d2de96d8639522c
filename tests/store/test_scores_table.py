"""The `scores` table (schema 7): every sample's scores as numbers, kept in step by triggers.

Summaries read it instead of each sample's JSON (issue 20), so it must hold exactly what
`json_extract` gave from `samples.scores` after every way a sample is written: first write,
retry (re-graded, other keys), a status-only update, a copy from an earlier run over an
existing sample, deletion of a run, and the migration of a store written before the table.
The lean frame and `metrics` built from it are compared with the samples' own JSON.
"""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from evalnb.results import RunResult
from evalnb.store import SAMPLE_STATUSES, SCHEMA_VERSION, Store
from evalnb.store import _schema

MANIFEST = {"schema_version": "2026-05-27", "tasks": [
    {"id": "qa", "metrics": [{"id": "acc"}, {"id": "f1"}]},
    {"id": "math"},  # no declared metrics: every score key found counts
]}
MODELS = [{"name": "m1", "label": "m1"}, {"name": "m2", "label": "m2"}]


def _number(value):
    """What `json_extract` made of a stored score: a number, bools as 1/0, anything else None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return None


def expected_scores(store: Store, run_id: str) -> dict[tuple, float | None]:
    """(task, model, index, epoch, key) -> value, from the samples' JSON as stored."""
    out = {}
    for s in store.samples(run_id):
        if isinstance(s["scores"], dict):
            for key, value in s["scores"].items():
                out[(s["task_id"], s["model"], s["sample_index"], s["epoch"], key)] = _number(value)
    return out


def table_scores(store: Store, run_id: str) -> dict[tuple, float | None]:
    rows = store._rows("SELECT task_id, model, sample_index, epoch, metric, value FROM scores WHERE run_id = ?",
                       (run_id,))
    return {tuple(r[:5]): r[5] for r in rows}


def orphans(store: Store) -> int:
    """Score rows whose sample is gone (the triggers should leave none)."""
    return store._rows(
        "SELECT count(*) FROM scores s LEFT JOIN samples x ON x.run_id = s.run_id AND x.task_id = s.task_id "
        "AND x.model = s.model AND x.sample_index = s.sample_index AND x.epoch = s.epoch WHERE x.run_id IS NULL")[0][0]


def random_score(rng: random.Random):
    return rng.choice([
        lambda: float(rng.random() < 0.6), lambda: rng.random(), lambda: rng.random() < 0.5,
        lambda: rng.randint(-3, 7), lambda: None, lambda: "n/a", lambda: {"nested": 1}, lambda: 1e30,
        lambda: 2 ** 60 + 1,
    ])()


def random_samples(rng: random.Random, n_items: int, epochs: int = 1) -> list[dict]:
    out = []
    for task in ("math", "qa"):
        for model in ("m2", "m1"):  # not the store's order: the frame is put in run order
            for i in range(n_items):
                for e in range(epochs):
                    status = rng.choices(["completed", "failed", "scoring", "not_run"], [8, 1, 1, 1])[0]
                    scores = None
                    if status == "completed":
                        keys = ("acc", "f1", "extra") if task == "qa" else ("score", "len")
                        scores = {k: random_score(rng) for k in keys if rng.random() < 0.9}
                        if rng.random() < 0.02:
                            scores = [1, 2] if rng.random() < 0.5 else 3  # not an object: no scores
                    out.append({"task_id": task, "model": model, "sample_index": i, "epoch": e, "status": status,
                                "scores": scores, "prompt": f"q{i}", "dataset_row": {"q": i},
                                "missing_field": rng.random() < 0.1 if rng.random() < 0.9 else None})
    return out


def reference_lean(store: Store, run_id: str, columns: dict[str, str]) -> pd.DataFrame:
    """The lean frame as it was read before the table: every score out of the JSON by SQLite."""
    fields = ["task_id", "model", "sample_index", "epoch", "status", "missing_field",
              *(f"score:{m}" for m in columns)]
    parts = [pd.DataFrame(page) for page in store.column_pages(run_id, fields)]
    frame = pd.concat(parts, ignore_index=True)
    frame = frame.rename(columns={f"score:{m}": c for m, c in columns.items()})
    for c in ["missing_field", *columns.values()]:
        frame[c] = pd.to_numeric(frame[c].astype(object), errors="coerce").astype("float64")
    return frame.sort_values(["task_id", "model", "sample_index", "epoch"]).reset_index(drop=True)


def assert_same_as_json(store: Store, run_id: str) -> None:
    expected = expected_scores(store, run_id)
    found = table_scores(store, run_id)
    assert found.keys() == expected.keys()
    for key, value in expected.items():
        got = found[key]
        assert (got is None and value is None) or got == value, (key, got, value)
    result = RunResult(store, run_id)
    frame, columns = result._lean
    mine = frame.sort_values(["task_id", "model", "sample_index", "epoch"]).reset_index(drop=True)
    ref = reference_lean(store, run_id, columns)
    pd.testing.assert_frame_equal(mine.astype({"task_id": object, "model": object, "status": object}),
                                  ref[mine.columns].astype({"task_id": object, "model": object, "status": object}))
    # the metrics of the stored run equal those of the same samples held in memory (decoded in Python)
    memory = RunResult.from_data(store.samples(run_id), run=store.get_run(run_id), manifest=MANIFEST)
    pd.testing.assert_frame_equal(result.metrics, memory.metrics)


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "evalnb.sqlite") as s:
        s.save_suite("v1", MANIFEST)
        yield s


@pytest.mark.parametrize("seed", [1, 2])
def test_a_random_run_reads_the_same_scores_as_its_json(store, seed):
    rng = random.Random(seed)
    run_id = store.create_run("v1", models=MODELS, epochs=2)
    store.write_samples(random_samples(rng, 60, epochs=2), run_id=run_id)
    assert_same_as_json(store, run_id)
    assert orphans(store) == 0


def test_retry_resume_and_copy_keep_the_scores_in_step(store):
    rng = random.Random(7)
    first = store.create_run("v1", models=MODELS)
    store.write_samples(random_samples(rng, 40), run_id=first)
    run_id = store.create_run("v1", models=MODELS)
    with store.writer(run_id) as writer:
        writer.add_samples(random_samples(rng, 40))
    # a retry re-grades some samples with other keys; a resume rewrites others without scores
    retried = [{"task_id": "qa", "model": "m1", "sample_index": i, "status": "completed",
                "scores": {"f1": 0.25 * (i % 4)}} for i in range(0, 40, 3)]
    status_only = [{"task_id": "qa", "model": "m2", "sample_index": i, "status": "completed"} for i in range(5)]
    before = {k: v for k, v in table_scores(store, run_id).items() if k[1] == "m2" and k[2] < 5}
    store.write_samples(retried + status_only, run_id=run_id)
    after = table_scores(store, run_id)
    for i in range(0, 40, 3):
        assert after[("qa", "m1", i, 0, "f1")] == 0.25 * (i % 4)
        assert ("qa", "m1", i, 0, "acc") not in after and ("qa", "m1", i, 0, "extra") not in after
    assert {k: v for k, v in after.items() if k[1] == "m2" and k[2] < 5} == before  # scores kept
    # scores cleared by a retry that failed
    store.write_samples([{"task_id": "math", "model": "m1", "sample_index": 1, "status": "failed", "scores": None}],
                        run_id=run_id)
    assert not [k for k in table_scores(store, run_id) if k[:3] == ("math", "m1", 1)]
    # a copy from the earlier run over samples this run already has (INSERT OR REPLACE)
    done = [(t, m, i, e) for (t, m, i, e) in {k[:4] for k in table_scores(store, first)}
            if t == "qa" and i < 20]
    completed = {(s["task_id"], s["model"], s["sample_index"], s["epoch"]) for s in store.samples(first, status="completed")}
    keys = [k for k in done if k in completed]
    assert keys
    store.copy_samples(first, run_id, keys, now=1)
    with store.writer(run_id) as writer:
        writer.copy_samples(first, "math", "m2", 0, list(range(40)))
    assert_same_as_json(store, run_id)
    assert_same_as_json(store, first)
    assert orphans(store) == 0
    assert store._rows("SELECT count(*) FROM scores WHERE run_id = ?", (run_id,))[0][0] > 0
    store.delete_run(run_id)
    assert table_scores(store, run_id) == {}
    assert_same_as_json(store, first)  # the other run untouched
    assert orphans(store) == 0


def test_a_schema_6_store_gains_the_table_and_reads_the_same(tmp_path, monkeypatch):
    path = tmp_path / "old.sqlite"
    rng = random.Random(3)
    monkeypatch.setattr(_schema, "SCHEMA_VERSION", 6)
    with Store(path) as old:  # written by the evalnb before the table: no scores table, no triggers
        assert old.schema_version == 6
        assert not old._rows("SELECT 1 FROM sqlite_master WHERE name = 'scores'")
        old.save_suite("v1", MANIFEST)
        run_id = old.create_run("v1", models=MODELS, epochs=2)
        old.write_samples(random_samples(rng, 50, epochs=2), run_id=run_id)
        stored = expected_scores(old, run_id)
    monkeypatch.setattr(_schema, "SCHEMA_VERSION", SCHEMA_VERSION)
    with Store(path) as s:
        assert s.schema_version == SCHEMA_VERSION >= 7
        assert table_scores(s, run_id) == stored  # filled from every stored sample
        assert_same_as_json(s, run_id)  # lean frame as json_extract reads it; metrics as from the JSON
        # and the triggers work on the migrated store
        s.write_samples([{"task_id": "qa", "model": "m1", "sample_index": 0, "epoch": 1, "status": "completed",
                          "scores": {"acc": True}}], run_id=run_id)
        assert table_scores(s, run_id)[("qa", "m1", 0, 1, "acc")] == 1.0
        assert_same_as_json(s, run_id)


def test_keys_too_wide_to_pack_and_metrics_some_samples_lack(store):
    run_id = store.create_run("v1", models=MODELS)
    big = 2 ** 40  # an item index past the packed keys' 39 bits: read a row a sample
    samples = [{"task_id": "qa", "model": "m1", "sample_index": big + i, "status": "completed",
                "scores": {"acc": float(i % 2)} if i % 3 else {"f1": 0.5}} for i in range(12)]
    samples.append({"task_id": "qa", "model": "m1", "sample_index": 3, "status": "failed", "scores": None})
    store.write_samples(samples, run_id=run_id)
    arrays = store.lean_arrays(run_id, "qa", "m1", ["acc", "f1", "absent"])
    assert arrays["sample_index"].tolist() == [3, *range(big, big + 12)]
    assert np.array_equal(arrays["score:acc"], [np.nan] + [np.nan if i % 3 == 0 else float(i % 2) for i in range(12)],
                          equal_nan=True)
    assert np.array_equal(arrays["score:f1"], [np.nan] + [0.5 if i % 3 == 0 else np.nan for i in range(12)],
                          equal_nan=True)
    assert np.isnan(arrays["score:absent"]).all() and len(arrays["score:absent"]) == 13
    assert [SAMPLE_STATUSES[c] for c in arrays["status"]] == ["failed"] + ["completed"] * 12
    assert_same_as_json(store, run_id)


def test_a_key_twice_in_one_sample_keeps_the_value_json_extract_reads(store):
    run_id = store.create_run("v1", models=MODELS)
    store.write_samples([{"task_id": "qa", "model": "m1", "sample_index": 0, "status": "completed",
                          "scores": {1: 0.5, "1": 0.75}}], run_id=run_id)  # both encode as "1"
    (extracted,) = store._rows("SELECT json_extract(scores, '$.\"1\"') FROM samples WHERE run_id = ?", (run_id,))[0]
    assert table_scores(store, run_id) == {("qa", "m1", 0, 0, "1"): extracted}
    store.write_samples([{"task_id": "qa", "model": "m1", "sample_index": 0, "status": "completed",
                          "scores": {"1": 0.25}}], run_id=run_id)  # re-graded: the pair goes, one row stays
    assert table_scores(store, run_id) == {("qa", "m1", 0, 0, "1"): 0.25}
