"""The store's questions for a streaming run: one task and a stretch of items at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalnb.store import Store, row_digest
from evalnb.store._codec import text_hash

MANIFEST = {"tasks": [{"id": "qa"}]}


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / "evalnb.sqlite") as s:
        s.save_suite("v1", MANIFEST)
        yield s


def _run(store: Store) -> str:
    return store.create_run("v1", models=[{"name": "m1"}], generation={})


def _sample(i: int, status: str = "completed", **extra) -> dict:
    return {"task_id": "qa", "model": "m1", "sample_index": i, "status": status, "prompt": f"P{i}",
            "target": str(i), "dataset_row": {"q": i}, "request_key": f"k{i}", "scores": {"em": i % 2}, **extra}


def test_ranges_of_completed_samples(store):
    run = _run(store)
    store.write_samples([_sample(i) for i in range(10)] + [_sample(10, "failed")], run_id=run)
    assert not store.has_completed(_run(store)) and store.has_completed(run)
    got = store.completed_range(run, "qa", ["m1", "m2"], 3, 10)
    assert [(m, i, e) for m, i, e, *_ in got] == [("m1", i, 0) for i in range(3, 10)]  # not the failed one
    _, _, _, prompt_hash, target, row_hash = got[0]
    assert prompt_hash == text_hash("P3") and target == "3" and row_hash == row_digest({"q": 3})
    graded = store.graded_range(run, "qa", ["m1"], 0, 1)
    assert [(i, key, scores) for _, i, _, key, _, _, scores in graded] == [(0, "k0", '{"em":0}'), (1, "k1", '{"em":1}')]


def test_writer_copies_a_stretch_from_another_run_in_order(store):
    old, new = _run(store), _run(store)
    store.write_samples([_sample(i) for i in range(6)], run_id=old)
    with store.writer(new) as writer:
        writer.add(_sample(0, "failed", error={"message": "x"}))
        writer.copy_samples(old, "qa", "m1", 0, [0, 2, 5])  # after the add: it wins over it
    copied = {s["sample_index"]: s for s in store.samples(new)}
    assert sorted(copied) == [0, 2, 5]
    assert copied[0]["status"] == "completed" and copied[5]["scores"] == {"em": 1}
    assert copied[2]["prompt"] == "P2" and copied[2]["dataset_row"] == {"q": 2}


def test_cached_keys_and_column_pages(store):
    run = _run(store)
    store.put_outputs([{"request_key": f"k{i}", "output_text": str(i)} for i in range(3)])
    assert store.cached_keys(["k0", "k2", "k9"]) == {"k0", "k2"}
    store.write_samples([_sample(i) for i in range(25)], run_id=run)
    pages = list(store.column_pages(run, ["sample_index", "scores", "dataset_row"], batch_size=10))
    assert [len(p["sample_index"]) for p in pages] == [10, 10, 5]
    assert pages[1]["scores"][0] == {"em": 0} and pages[2]["dataset_row"][-1] == {"q": 24}
    assert [p["sample_index"] for p in store.column_pages(run, ["sample_index"], status="failed")] == []
    with pytest.raises(ValueError, match="unknown sample field"):
        list(store.column_pages(run, ["nope"]))


def test_score_fields_are_read_by_sqlite_as_numbers_only(store):
    run = _run(store)
    scores = [{"em": 1, "f1": 0.5, "flag": True}, {"em": 0, "f1": "0.5", "flag": False}, {"f1": None, "odd": [1]},
              None, {"em": 1.0, "flag": {"x": 1}}]
    store.write_samples([_sample(i, scores=sc, model=m) for m in ("m2", "m1") for i, sc in enumerate(scores)],
                        run_id=run)
    assert store.score_keys(run) == {"qa": ["em", "f1", "flag", "odd"]}  # first appearance: sample, then key order
    assert store.sample_groups(run) == [("qa", "m1"), ("qa", "m2")]
    fields = ["task_id", "model", "sample_index", "score:em", "score:f1", "score:flag", "score:odd"]
    (page,) = list(store.column_pages(run, fields, task_id="qa", model="m1"))
    assert page["task_id"] == ["qa"] * 5 and page["model"] == ["m1"] * 5 and page["sample_index"] == [0, 1, 2, 3, 4]
    assert page["score:em"] == [1, 0, None, None, 1.0]
    assert page["score:f1"] == [0.5, None, None, None, None]  # a string is not a score, "0.5" neither
    assert page["score:flag"] == [1, 0, None, None, None]  # true/false as 1/0; an object is not a score
    assert page["score:odd"] == [None] * 5
    # the same across pages of one row, and after a key: the paging key is (sample_index, epoch) here
    one = [p["score:em"][0] for p in store.column_pages(run, ["score:em"], task_id="qa", model="m2", batch_size=1)]
    assert one == [1, 0, None, None, 1.0]
    assert [p["sample_index"] for p in store.column_pages(run, ["sample_index"], task_id="qa", model="m2",
                                                          after=(2, 0))] == [[3, 4]]
    with pytest.raises(ValueError, match="after=.*needs task_id and model"):
        next(store.column_pages(run, ["sample_index"], task_id="qa", after=(2, 0)))
    with pytest.raises(ValueError, match="unknown sample field"):
        next(store.column_pages(run, ["scores.em"]))
