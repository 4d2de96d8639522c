"""Scores as numbers beside the samples: what summaries read instead of every sample's JSON.

A sample's `scores` stay the stored truth (JSON in `samples.scores`); SQLite triggers copy each
score into `scores` (one row per sample and metric: run, task, model, metric, item, epoch and the
value as a REAL) whenever a sample is inserted, re-graded or deleted, whichever path wrote it
(the writer's UPSERT, a copy from an earlier run, `delete_run`). Rows are keyed (run, task,
model, metric, item, epoch), so one metric of one (task, model) is one range, read in key
order. Summing a million samples then reads narrow rows (no JSON) plus the samples' keys and
status from the `samples_by_status` index, instead of a 500-byte row and two `json_extract`
per sample. (A table of series ids would make rows smaller but cost the writer a lookup per
score: measured 5-7 us a sample against 1-2 us for this layout.)

The value is what `json_extract` gave before: a JSON number as is, true/false as 1/0, anything
else (null, a string, an object) NULL. A key whose value is not a number still has its row (NULL
value): the key exists, as `Store.score_keys` reports it.
"""

from __future__ import annotations

import sqlite3
from itertools import chain
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

# the stored scores when they are a JSON object, else NULL (json_each(NULL) yields no rows):
# nested CASE so json_type never sees text that is not JSON
_OBJECT = "CASE WHEN json_valid({s}) THEN CASE WHEN json_type({s}) = 'object' THEN {s} END END"
_VALUE = ("CASE j.type WHEN 'integer' THEN j.value WHEN 'real' THEN j.value WHEN 'true' THEN 1.0 "
          "WHEN 'false' THEN 0.0 END")


def _fill(row: str) -> str:
    """Trigger body: write a sample's score rows.

    OR IGNORE: a key twice in one object (``{1: .., "1": ..}`` encodes so) keeps its first value,
    as `json_extract` does. Samples are never written with INSERT OR REPLACE (which drops the
    old row without a delete trigger, and whose policy a trigger's statements would take): the
    copy from an earlier run is an UPSERT, so a re-written sample goes through the update trigger.
    """
    obj = _OBJECT.format(s=f"{row}.scores")
    return (f"INSERT OR IGNORE INTO scores (run_id, task_id, model, metric, sample_index, epoch, value) "
            f"SELECT {row}.run_id, {row}.task_id, {row}.model, j.key, {row}.sample_index, {row}.epoch, {_VALUE} "
            f"FROM json_each({obj}) j; ")


def _drop(row: str) -> str:
    """Trigger body: drop a sample's score rows (one per key of its stored scores, as written)."""
    obj = _OBJECT.format(s=f"{row}.scores")
    return (f"DELETE FROM scores WHERE run_id = {row}.run_id AND task_id = {row}.task_id AND model = {row}.model "
            f"AND metric IN (SELECT key FROM json_each({obj})) AND sample_index = {row}.sample_index "
            f"AND epoch = {row}.epoch; ")


DDL = [
    """CREATE TABLE scores (
        run_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        model TEXT NOT NULL,
        metric TEXT NOT NULL,
        sample_index INTEGER NOT NULL,
        epoch INTEGER NOT NULL,
        value REAL,
        PRIMARY KEY (run_id, task_id, model, metric, sample_index, epoch)) WITHOUT ROWID""",
    # the samples whose missing-field flag is set or not recorded (few): the keys and status come
    # from samples_by_status, so no index on every sample is added to the writer's work
    "CREATE INDEX samples_flagged ON samples (run_id, task_id, model, sample_index, epoch, missing_field) "
    "WHERE missing_field IS NOT 0",
    f"CREATE TRIGGER samples_scores_insert AFTER INSERT ON samples BEGIN {_fill('NEW')}END",
    "CREATE TRIGGER samples_scores_update AFTER UPDATE OF scores ON samples "
    f"WHEN OLD.scores IS NOT NEW.scores BEGIN {_drop('OLD')}{_fill('NEW')}END",
    f"CREATE TRIGGER samples_scores_delete AFTER DELETE ON samples BEGIN {_drop('OLD')}END",
]


def add_scores_table(conn: sqlite3.Connection) -> None:
    """Migration 6 -> 7: create the tables, index and triggers, then fill them from the stored samples."""
    for statement in DDL:
        conn.execute(statement)
    obj = _OBJECT.format(s="s.scores")
    conn.execute(
        "INSERT INTO scores (run_id, task_id, model, metric, sample_index, epoch, value) "
        f"SELECT s.run_id, s.task_id, s.model, j.key, s.sample_index, s.epoch, {_VALUE} "
        f"FROM samples s, json_each({obj}) j ORDER BY 1, 2, 3, 4, 5, 6")


def delete_run_scores(conn: sqlite3.Connection, run_id: str) -> None:
    """Drop a run's score rows in one range delete (before its samples go: the per-sample
    delete trigger then finds nothing left to do)."""
    conn.execute("DELETE FROM scores WHERE run_id = ?", (run_id,))


def distinct_keys(execute: Any, table: str, run_id: str, columns: tuple[str, ...],
                  extra: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
    """The distinct values of ``columns`` (a prefix of ``table``'s key after run_id) of a run, in
    key order, each with the ``extra`` columns of its first row: one index seek per value found
    (the next one after the last, found column by column, as SQLite seeks a row-value range on
    its first column only), not a walk over every row."""
    found: list[tuple[Any, ...]] = []
    select = ", ".join(columns + extra)
    order = ", ".join(columns + extra)

    def first(depth: int, after: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        where, params = ["run_id = ?"], [run_id]
        if after is not None:  # same first `depth` columns, a later one at `depth`
            where += [f"{c} = ?" for c in columns[:depth]] + [f"{columns[depth]} > ?"]
            params += [*after[:depth + 1]]
        row = execute(f"SELECT {select} FROM {table} WHERE {' AND '.join(where)} ORDER BY {order} LIMIT 1",
                      params).fetchone()
        return None if row is None else tuple(row)

    row = first(0, None)
    while row is not None:
        found.append(row)
        row = None
        for depth in reversed(range(len(columns))):  # the next value of the last column, else of the one before
            row = first(depth, found[-1])
            if row is not None:
                break
    return found


def series_firsts(execute: Any, run_id: str) -> list[tuple[str, str, str, int, int]]:
    """(task, model, metric, item, epoch) of the first score row of every (task, model, metric)
    of a run, in key order: what `Store.score_keys` orders keys by."""
    return distinct_keys(execute, "scores", run_id, ("task_id", "model", "metric"), ("sample_index", "epoch"))


_METRIC = "FROM scores WHERE run_id = ? AND task_id = ? AND model = ? AND metric = ?"


def lean_arrays(execute: Any, run_id: str, task_id: str, model: str, metrics: list[str],
                statuses: tuple[str, ...]) -> dict[str, np.ndarray]:
    """One (task, model)'s samples as numpy columns, in (sample_index, epoch) order.

    ``sample_index``, ``epoch`` (int64), ``status`` (int32: the position in ``statuses``; an
    unknown status gets len(statuses)), ``missing_field`` (float64: 1/0, NaN when not recorded)
    and one float64 column per metric (``score:<id>``, NaN when the sample has no number).
    The keys come as one string (`_keys`), each score as a narrow row streamed from the cursor
    into numpy: no list of rows is ever built, so a million samples leave no heap of freed
    tuples behind. ``execute``: `sqlite3.Connection.execute` inside one read transaction.
    """
    import numpy as np

    index, epoch, status, flag = _keys(execute, (run_id, task_id, model), statuses)
    out: dict[str, np.ndarray] = {"sample_index": index, "epoch": epoch, "status": status, "missing_field": flag}
    n = len(index)
    where = (run_id, task_id, model)
    for metric in metrics:
        column = np.fromiter(chain.from_iterable(execute(
            f"SELECT value {_METRIC} ORDER BY sample_index, epoch", (*where, metric))), dtype="float64")
        if len(column) != n:  # not every sample has this metric: place each by its key
            found = np.fromiter(chain.from_iterable(execute(
                f"SELECT sample_index, epoch {_METRIC} ORDER BY sample_index, epoch", (*where, metric))),
                dtype="int64").reshape(-1, 2)
            at, ok = _positions(index, epoch, found[:, 0], found[:, 1])
            placed = np.full(n, np.nan)
            placed[at[ok]] = column[ok]
            column = placed
        out[f"score:{metric}"] = column
    return out


def _keys(execute: Any, where: tuple[str, str, str], statuses: tuple[str, ...]) -> tuple[np.ndarray, ...]:
    """(sample_index, epoch, status code, missing-field flag) of one (task, model), sorted by key.

    The keys and status come from the `samples_by_status` index (one range per status), the
    flag from the small `samples_flagged` index (0 for every sample not in it). Each sample is
    one integer, ``index << 24 | epoch << 8 | status << 2 | flag``, and SQLite joins them into
    one comma-separated string that numpy parses in C: a Python object per (task, model), not
    per sample (integers, so the text is exact; sorted after parsing, so the order SQLite
    concatenates in does not matter). Keys that do not fit (an epoch >= 2**16, an index >=
    2**39) are read a row a sample instead.
    """
    import numpy as np

    marks = ", ".join("?" * len(statuses))
    code = "CASE status " + " ".join(f"WHEN ? THEN {i}" for i in range(len(statuses))) + " END"
    by_status = (f"FROM samples INDEXED BY samples_by_status WHERE run_id = ? AND status IN ({marks}) "
                 "AND task_id = ? AND model = ?")
    flagged = ("FROM samples INDEXED BY samples_flagged WHERE run_id = ? AND task_id = ? AND model = ? "
               "AND missing_field IS NOT 0")
    status_params = (*statuses, where[0], *statuses, *where[1:])
    text, n, top_epoch, top_index = execute(
        f"SELECT group_concat((sample_index << 24) | (epoch << 8) | (({code}) << 2)), count(*), max(epoch), "
        f"max(sample_index) {by_status}", status_params).fetchone()
    flag_sql = "CASE missing_field WHEN 1 THEN 1 ELSE 2 END"
    if n and (top_epoch >= 1 << 16 or top_index >= 1 << 39):
        rows = execute(f"SELECT sample_index, epoch, {code} {by_status} ORDER BY sample_index, epoch", status_params)
        keys = np.fromiter(chain.from_iterable(rows), dtype="int64").reshape(-1, 3)
        index, epoch, status = keys[:, 0].copy(), keys[:, 1].copy(), keys[:, 2].astype("int32")
        flags = np.fromiter(chain.from_iterable(execute(
            f"SELECT sample_index, epoch, {flag_sql} {flagged}", where)), dtype="int64").reshape(-1, 3)
        at, ok = _positions(index, epoch, flags[:, 0], flags[:, 1])
        flag = np.zeros(len(index))
        flag[at[ok]] = flags[ok, 2]
    else:
        packed = np.sort(np.fromstring(text or "", dtype=np.int64, sep=","))
        if len(packed) != n:
            raise RuntimeError(f"read {len(packed)} sample keys of {n}")  # not expected: the text is ours
        (marked,) = execute(f"SELECT group_concat((sample_index << 24) | (epoch << 8) | {flag_sql}) {flagged}",
                            where).fetchone()
        marked = np.fromstring(marked or "", dtype=np.int64, sep=",")
        key = packed >> 8
        at = np.minimum(np.searchsorted(key, marked >> 8), max(len(key) - 1, 0))
        ok = key[at] == (marked >> 8) if len(key) else np.zeros(len(marked), dtype=bool)
        packed[at[ok]] |= marked[ok] & 3
        index, epoch, status = packed >> 24, (packed >> 8) & 0xFFFF, ((packed >> 2) & 63).astype("int32")
        flag = (packed & 3).astype("float64")
    flag[flag == 2] = np.nan
    return index, epoch, status, flag


def _positions(index: np.ndarray, epoch: np.ndarray, their_index: np.ndarray,
               their_epoch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(where each (their_index, their_epoch) sits among the keys (index, epoch), sorted; whether
    it is there at all): the triggers keep a score row with its sample, read in one snapshot."""
    import numpy as np

    width = int(max(epoch.max(initial=0), their_epoch.max(initial=0))) + 1
    mine = index * width + epoch
    theirs = their_index * width + their_epoch
    at = np.minimum(np.searchsorted(mine, theirs), max(len(mine) - 1, 0))
    ok = mine[at] == theirs if len(mine) else np.zeros(len(theirs), dtype=bool)
    return at, ok
