"""The samples table is built from `Sample`'s fields: a field added in a subclass is stored,
copied when a run reuses an earlier run's samples, and read back, with no other change.

Also: every column list the store uses (the table, SAMPLE_FIELDS, the copy SQL) comes from the
one declaration, and a field that does not say how it is stored fails at once.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from evalnb.sample import SAMPLE_FIELDS, STORED_FIELDS, Sample, sample_fields, stored, stored_kinds
from evalnb.store import Store
from evalnb.store._columns import SampleColumns, columns_for


@dataclass(slots=True, eq=False)
class Reviewed(Sample):
    """A sample with two more fields: a reviewer's note (text) and their labels (JSON)."""

    note: str | None = stored("text", default=None)
    labels: dict | None = stored("json", default=None)
    source_doc: str | None = stored("text_ref", default=None)  # a long text kept once


def _make(i: int) -> Reviewed:
    s = Reviewed("qa", "m1", i, 0, f"Q{i}?", f"Q{i}?", str(i), {"q": i}, output_text=f"A{i}",
                 extracted_output=str(i), note=f"looked at {i}", labels={"hard": i % 2 == 0},
                 source_doc="a long document " * 20)
    s.scores = {"em": 1}
    s.status = "completed"
    return s


def _columns(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[1] for row in conn.execute("PRAGMA table_info(samples)")]


def test_a_subclass_field_is_stored_copied_on_reuse_and_read_back(tmp_path):
    path = tmp_path / "evalnb.sqlite"
    with Store(path) as plain:  # a store made for `Sample`: no column for the new fields yet
        plain.save_suite("v1", {"tasks": [{"id": "qa"}]})
    assert "note" not in _columns(path)
    with Store(path, sample_class=Reviewed) as store:
        assert {"note", "labels", "source_doc_hash"} <= set(_columns(path))  # the table grew from the type
        first = store.create_run("v1", models=[{"name": "m1"}], generation={})
        with store.writer(first) as writer:
            writer.add_samples([_make(i) for i in range(3)])
        stored_first = {s["sample_index"]: s for s in store.samples(first)}
        assert stored_first[1]["note"] == "looked at 1" and stored_first[0]["labels"] == {"hard": True}
        assert stored_first[2]["source_doc"] == "a long document " * 20
        # reuse: a second run copies the completed samples inside SQLite (the run's path) ...
        second = store.create_run("v1", models=[{"name": "m1"}], generation={})
        with store.writer(second) as writer:
            writer.copy_samples(first, "qa", "m1", 0, [0, 2])
        # ... and the one-by-one path
        third = store.create_run("v1", models=[{"name": "m1"}], generation={})
        store.copy_samples(first, third, [("qa", "m1", 1, 0)], now=1)
        copied = {s["sample_index"]: s for s in store.samples(second)}
        assert sorted(copied) == [0, 2]
        assert copied[2]["note"] == "looked at 2" and copied[2]["labels"] == {"hard": True}
        assert copied[0]["source_doc"] == "a long document " * 20 and copied[0]["cached"] is True
        assert store.samples(third)[0]["note"] == "looked at 1"
        # read back as columns too (what RunResult reads), the new fields among them
        page = next(store.column_pages(second, ["sample_index", "note", "labels"]))
        assert page == {"sample_index": [0, 2], "note": ["looked at 0", "looked at 2"],
                        "labels": [{"hard": True}, {"hard": True}]}
        # a sample dict with the field (a batch grader's update) stores it as well
        store.write_samples([{**stored_first[1], "note": "changed", "run_id": first}], run_id=first)
        assert {s["sample_index"]: s["note"] for s in store.samples(first)}[1] == "changed"
    with Store(path) as plain:  # opened for `Sample` again: the extra columns stay, unread
        assert "note" not in plain.samples(first)[0] and plain.samples(first)[0]["output_text"] == "A0"


def test_every_column_list_comes_from_the_sample_type():
    columns = columns_for(Sample)
    assert SAMPLE_FIELDS == sample_fields(Sample) == columns.fields
    assert set(STORED_FIELDS) <= set(SAMPLE_FIELDS) and "judge_calls" not in SAMPLE_FIELDS
    sql, params = columns.copy_sql({"run_id": "?", "created_at": "?"})
    listed = sql.split("(", 1)[1].split(")", 1)[0].split(", ")
    assert listed == [columns.columns[f] for f in SAMPLE_FIELDS] and "prompt_hash" in listed
    assert params == ("run_id", "created_at")
    extended = SampleColumns(Reviewed)
    assert extended.fields[:len(SAMPLE_FIELDS) - 4] == SAMPLE_FIELDS[:-4]  # the new fields follow Sample's own
    assert extended.fields[-7:-4] == ("note", "labels", "source_doc")
    assert "note" in extended.copy_sql({})[0] and "source_doc_hash" in extended.copy_sql({})[0]
    assert extended.missing_ddl(set(columns.columns.values())) == [
        "ALTER TABLE samples ADD COLUMN note TEXT", "ALTER TABLE samples ADD COLUMN labels TEXT",
        "ALTER TABLE samples ADD COLUMN source_doc_hash BLOB"]


def test_a_field_that_does_not_say_how_it_is_stored_fails_at_once():
    @dataclass(slots=True, eq=False)
    class Careless(Sample):
        mood: str | None = field(default=None)

    with pytest.raises(TypeError, match=r"Careless\.mood: declare how the store keeps it"):
        stored_kinds(Careless)
