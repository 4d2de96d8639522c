"""Scores as numbers beside the samples: what summaries read instead of every sample's JSON.

A sample's `scores` stay the stored truth (JSON in `samples.scores`); SQLite triggers copy each
score into `scores` (one narrow row per sample and metric: the series id, item, epoch and the
value as a REAL) whenever a sample is inserted, replaced, re-graded or deleted, whichever path
wrote it (the writer's UPSERT, a copy from an earlier run, `delete_run`). A series is one
(run, task, model, metric) in `score_series`, so a score row does not repeat those names.
Summing a million samples then reads narrow rows (about 20 bytes each, no JSON) plus the
samples' keys and status from a covering index, instead of a 500-byte row and two
`json_extract` per sample.

The value is what `json_extract` gave before: a JSON number as is, true/false as 1/0, anything
else (null, a string, an object) NULL. A key whose value is not a number still has its row (NULL
value): the key exists, as `Store.score_keys` reports it.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

# the stored scores when they are a JSON object, else NULL (json_each(NULL) yields no rows):
# nested CASE so json_type never sees text that is not JSON
_OBJECT = "CASE WHEN json_valid({s}) THEN CASE WHEN json_type({s}) = 'object' THEN {s} END END"
_VALUE = ("CASE j.type WHEN 'integer' THEN j.value WHEN 'real' THEN j.value WHEN 'true' THEN 1.0 "
          "WHEN 'false' THEN 0.0 END")


def _refill(row: str) -> str:
    """Trigger body: drop the sample's score rows (every series of its run, task and model; an
    INSERT OR REPLACE removes the old row without a delete trigger) and write its new ones."""
    obj = _OBJECT.format(s=f"{row}.scores")
    return (
        f"DELETE FROM scores WHERE series IN (SELECT id FROM score_series WHERE run_id = {row}.run_id "
        f"AND task_id = {row}.task_id AND model = {row}.model) AND sample_index = {row}.sample_index "
        f"AND epoch = {row}.epoch; "
        f"INSERT OR IGNORE INTO score_series (run_id, task_id, model, metric) "
        f"SELECT {row}.run_id, {row}.task_id, {row}.model, j.key FROM json_each({obj}) j; "
        f"INSERT OR IGNORE INTO scores (series, sample_index, epoch, value) "
        f"SELECT ss.id, {row}.sample_index, {row}.epoch, {_VALUE} FROM json_each({obj}) j "
        f"JOIN score_series ss ON ss.run_id = {row}.run_id AND ss.task_id = {row}.task_id "
        f"AND ss.model = {row}.model AND ss.metric = j.key; "
    )


DDL = [
    """CREATE TABLE score_series (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        model TEXT NOT NULL,
        metric TEXT NOT NULL,
        UNIQUE (run_id, task_id, model, metric))""",
    """CREATE TABLE scores (
        series INTEGER NOT NULL,
        sample_index INTEGER NOT NULL,
        epoch INTEGER NOT NULL,
        value REAL,
        PRIMARY KEY (series, sample_index, epoch)) WITHOUT ROWID""",
    # keys, status and flag of a (run, task, model) in key order without touching the wide rows
    "CREATE INDEX samples_lean ON samples (run_id, task_id, model, sample_index, epoch, status, missing_field)",
    f"CREATE TRIGGER samples_scores_insert AFTER INSERT ON samples BEGIN {_refill('NEW')}END",
    "CREATE TRIGGER samples_scores_update AFTER UPDATE OF scores ON samples "
    f"WHEN OLD.scores IS NOT NEW.scores BEGIN {_refill('NEW')}END",
    "CREATE TRIGGER samples_scores_delete AFTER DELETE ON samples BEGIN "
    "DELETE FROM scores WHERE series IN (SELECT id FROM score_series WHERE run_id = OLD.run_id "
    "AND task_id = OLD.task_id AND model = OLD.model) AND sample_index = OLD.sample_index AND epoch = OLD.epoch; END",
]


def add_scores_table(conn: sqlite3.Connection) -> None:
    """Migration 6 -> 7: create the tables, index and triggers, then fill them from the stored samples."""
    for statement in DDL:
        conn.execute(statement)
    obj = _OBJECT.format(s="s.scores")
    conn.execute("INSERT OR IGNORE INTO score_series (run_id, task_id, model, metric) "
                 f"SELECT DISTINCT s.run_id, s.task_id, s.model, j.key FROM samples s, json_each({obj}) j")
    conn.execute(
        "INSERT OR IGNORE INTO scores (series, sample_index, epoch, value) "
        f"SELECT ss.id, s.sample_index, s.epoch, {_VALUE} FROM samples s, json_each({obj}) j "
        "JOIN score_series ss ON ss.run_id = s.run_id AND ss.task_id = s.task_id AND ss.model = s.model "
        "AND ss.metric = j.key ORDER BY ss.id, s.sample_index, s.epoch")


def delete_run_scores(conn: sqlite3.Connection, run_id: str) -> None:
    """Drop a run's score rows and series in two range deletes (before its samples go: the
    per-sample delete trigger then finds nothing left to do)."""
    conn.execute("DELETE FROM scores WHERE series IN (SELECT id FROM score_series WHERE run_id = ?)", (run_id,))
    conn.execute("DELETE FROM score_series WHERE run_id = ?", (run_id,))


def series_firsts(read: Any, run_id: str) -> list[tuple[str, str, str, int, int]]:
    """(task, metric, model, item, epoch) of the first sample (in key order) of every series of a
    run that still holds a score row: what `Store.score_keys` orders keys by."""
    first = "SELECT min(sample_index) FROM scores WHERE series = ss.id"
    rows = read(
        f"SELECT ss.task_id, ss.metric, ss.model, ({first}), (SELECT min(epoch) FROM scores "
        f"WHERE series = ss.id AND sample_index = ({first})) FROM score_series ss WHERE ss.run_id = ?", (run_id,))
    return [row for row in rows if row[3] is not None]


# `lean_arrays`: status as its position in SAMPLE_STATUSES, the missing-field flag as 0/1/2 (NULL)
def _status_code(statuses: tuple[str, ...]) -> str:
    cases = " ".join(f"WHEN '{s}' THEN {i}" for i, s in enumerate(statuses))
    return f"CASE status {cases} ELSE {len(statuses)} END"


def lean_arrays(read: Any, run_id: str, task_id: str, model: str, metrics: list[str],
                statuses: tuple[str, ...]) -> dict[str, np.ndarray]:
    """One (task, model)'s samples as numpy columns, in (sample_index, epoch) order.

    ``sample_index``, ``epoch`` (int64), ``status`` (int32: the position in ``statuses``; an
    unknown status gets len(statuses)), ``missing_field`` (float64: 1/0, NaN when not recorded)
    and one float64 column per metric (``score:<id>``, NaN when the sample has no number).
    Two narrow values a sample (the item, then epoch, status and flag packed in one integer),
    one a score.
    """
    import numpy as np

    packed = (f"(epoch << 8) | ({_status_code(statuses)} << 2) | "
              "CASE missing_field WHEN 0 THEN 0 WHEN 1 THEN 1 ELSE 2 END")
    rows = read(f"SELECT sample_index, {packed} FROM samples INDEXED BY samples_lean "
                "WHERE run_id = ? AND task_id = ? AND model = ? ORDER BY sample_index, epoch", (run_id, task_id, model))
    keys = np.array(rows, dtype="int64").reshape(len(rows), 2)
    del rows
    index, rest = keys[:, 0].copy(), keys[:, 1]
    flag = (rest & 3).astype("float64")
    flag[flag == 2] = np.nan
    out: dict[str, np.ndarray] = {"sample_index": index, "epoch": rest >> 8,
                                  "status": ((rest >> 2) & 63).astype("int32"), "missing_field": flag}
    n = len(index)
    series = dict(read("SELECT metric, id FROM score_series WHERE run_id = ? AND task_id = ? AND model = ?",
                       (run_id, task_id, model)))
    for metric in metrics:
        column = np.full(n, np.nan)
        sid = series.get(metric)
        if sid is not None:
            values = read("SELECT value FROM scores WHERE series = ? ORDER BY sample_index, epoch", (sid,))
            if len(values) == n:  # every sample has this metric: the rows line up with the keys
                column = np.array(values, dtype="float64").reshape(n)
            elif values:
                found = np.array(read("SELECT sample_index, epoch, value FROM scores WHERE series = ? "
                                      "ORDER BY sample_index, epoch", (sid,)), dtype="float64")
                at, ok = _positions(index, out["epoch"], found[:, 0], found[:, 1])
                column[at[ok]] = found[ok, 2]
        out[f"score:{metric}"] = column
    return out


def _positions(index: np.ndarray, epoch: np.ndarray, their_index: np.ndarray,
               their_epoch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(where each (their_index, their_epoch) sits among the keys (index, epoch), sorted; whether
    it is there at all): the triggers keep a score row with its sample, read in one snapshot."""
    import numpy as np

    width = int(max(epoch.max(initial=0), their_epoch.max(initial=0))) + 1
    mine = index * width + epoch
    theirs = their_index.astype("int64") * width + their_epoch.astype("int64")
    at = np.minimum(np.searchsorted(mine, theirs), max(len(mine) - 1, 0))
    ok = mine[at] == theirs if len(mine) else np.zeros(len(theirs), dtype=bool)
    return at, ok
