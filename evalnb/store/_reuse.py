"""Reusing whole graded samples from an earlier, identical run, and what a run already holds.

A run whose signature (suite version — so grader code and extraction too — models,
generation, tasks, judge and embedding models) and metadata equal a completed earlier run's
would grade the same outputs with the same code against the same targets. Those samples are
copied inside SQLite instead of being re-extracted, re-graded in the sandbox and re-encoded:
a second run of an unchanged suite is then bound by reading rows, not by Python per sample.

A run plans its work a stretch of items at a time (`runner.planner`), so the questions here
are asked for one task and a range of item indexes: memory stays flat however big the run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from evalnb.sample import Sample
from evalnb.store._codec import Op, from_json, text_hash, to_json
from evalnb.store._columns import SampleColumns, columns_for

# per model: the primary key (run, task, model, index, epoch) then walks one narrow stretch
_RANGE = "run_id = ? AND task_id = ? AND model = ? AND sample_index BETWEEN ? AND ? AND status = 'completed'"

# An UPSERT, not INSERT OR REPLACE: a replaced row would leave without its delete trigger, and
# the `scores` table (store/_scores.py) would keep score keys the copy does not have. Every
# column is copied (the list comes from `Sample`'s fields: a new one is copied too) but these:
# the new run's id and times, and a copy costs nothing in this run (answered from the store).
ON_COPY = {"run_id": "?", "created_at": "?", "completed_at": "?", "cost_usd": "0", "cached": "1"}
_COPY_SQL, _COPY_PARAMS = columns_for(Sample).copy_sql(ON_COPY)
assert _COPY_PARAMS == ("run_id", "created_at", "completed_at")  # (to_run, now, now) below
# A copied sample's grader model calls come along, as answered from the store (no cost here).
_COPY_CALLS_SQL = (
    "INSERT OR REPLACE INTO judge_calls (run_id, task_id, model, sample_index, epoch, call, kind, judge_model, "
    "request_hash, reply_hash, output_text, usage, latency_s, cost_usd, cached, request_key, created_at) "
    "SELECT ?, task_id, model, sample_index, epoch, call, kind, judge_model, request_hash, reply_hash, output_text, "
    "usage, latency_s, 0, 1, request_key, ? FROM judge_calls WHERE run_id = ? AND task_id = ? AND model = ? "
    "AND sample_index = ? AND epoch = ?"
)


def row_digest(row: Any) -> bytes:
    """The digest the store keeps for a dataset row (to compare rows without reading them)."""
    return text_hash(to_json(row))


class GradeReuse:
    """The reuse half of `Store` (needs `_rows`, `_transaction`, `get_run`)."""

    def previous_identical_run(self, run_id: str) -> str | None:
        """The newest completed run with the same signature and metadata as `run_id`, if any."""
        run = self.get_run(run_id)  # type: ignore[attr-defined]
        rows = self._rows(  # type: ignore[attr-defined]
            "SELECT run_id, metadata FROM runs WHERE signature = ? AND status = 'completed' AND run_id != ? "
            "ORDER BY created_at DESC, rowid DESC",
            (run["signature"], run_id),
        )
        for other, metadata in rows:
            if (from_json(metadata) or {}) == (run.get("metadata") or {}):
                return other
        return None

    def graded_samples(
        self, run_id: str
    ) -> dict[tuple[str, str, int, int], tuple[str | None, str | None, bytes | None, Any]]:
        """(task, model, index, epoch) -> (request_key, target, dataset_row digest, scores) of completed samples."""
        rows = self._rows(  # type: ignore[attr-defined]
            "SELECT task_id, model, sample_index, epoch, request_key, target, dataset_row_hash, scores "
            "FROM samples WHERE run_id = ? AND status = 'completed'",
            (run_id,),
        )
        return {(t, m, i, e): (key, target, digest, scores) for t, m, i, e, key, target, digest, scores in rows}

    def completed_range(self, run_id: str, task_id: str, models: Iterable[str], first: int,
                        last: int) -> list[tuple[Any, ...]]:
        """(model, sample_index, epoch, prompt digest, target, dataset_row digest) of the completed
        samples of one task and `models` with first <= sample_index <= last: what a continued run keeps."""
        sql = f"SELECT model, sample_index, epoch, prompt_hash, target, dataset_row_hash FROM samples WHERE {_RANGE}"
        return [row for m in models for row in self._rows(sql, (run_id, task_id, m, first, last))]  # type: ignore[attr-defined]

    def graded_range(self, run_id: str, task_id: str, models: Iterable[str], first: int,
                     last: int) -> list[tuple[Any, ...]]:
        """(model, sample_index, epoch, request_key, target, dataset_row digest, scores) of the completed
        samples of one task and `models` with first <= sample_index <= last (`graded_samples`, a stretch)."""
        sql = ("SELECT model, sample_index, epoch, request_key, target, dataset_row_hash, scores FROM samples "
               f"WHERE {_RANGE}")
        return [row for m in models for row in self._rows(sql, (run_id, task_id, m, first, last))]  # type: ignore[attr-defined]

    def has_completed(self, run_id: str) -> bool:
        """Whether the run holds any completed sample (a fresh run need not look for them)."""
        return bool(self._rows(  # type: ignore[attr-defined]
            "SELECT 1 FROM samples WHERE run_id = ? AND status = 'completed' LIMIT 1", (run_id,)))

    def copy_samples(self, from_run: str, to_run: str, keys: Iterable[tuple[str, str, int, int]], *, now: int) -> int:
        """Copy completed samples of `from_run` into `to_run` (same task, model, index, epoch).

        Copies are answered from the store: ``cached`` and cost 0, their grader model calls too.
        """
        keys = list(keys)
        params = [(to_run, now, now, from_run, t, m, i, e) for t, m, i, e in keys]
        if not params:
            return 0
        sql = self.sample_columns.copy_sql(ON_COPY)[0]  # type: ignore[attr-defined]
        with self._transaction() as conn:  # type: ignore[attr-defined]
            conn.executemany(sql, params)
            if conn.execute("SELECT 1 FROM judge_calls WHERE run_id = ? LIMIT 1", (from_run,)).fetchone():
                conn.executemany(_COPY_CALLS_SQL, [(to_run, now, from_run, t, m, i, e) for t, m, i, e in keys])
        return len(params)


def copy_ops(from_run: str, to_run: str, task_id: str, model: str, epoch: int, indexes: list[int], now: int,
             columns: SampleColumns | None = None) -> list[Op]:
    """The writes that copy the completed samples `indexes` of (task, model, epoch) from one run
    to another, and their grader model calls (as answered from the store).

    Handed to the run's `StoreWriter` (`copy_samples`), so copies commit in order with the
    run's other writes, on its one connection, a statement each per stretch of items.
    """
    marks = ", ".join("?" * len(indexes))
    where = f"AND epoch = ? AND sample_index IN ({marks})"
    sql = _COPY_SQL if columns is None else columns.copy_sql(ON_COPY)[0]  # a Sample subclass's columns too
    samples = sql.replace("AND sample_index = ? AND epoch = ?", where)
    calls = _COPY_CALLS_SQL.replace("AND sample_index = ? AND epoch = ?", where)
    return [Op(samples, (to_run, now, now, from_run, task_id, model, epoch, *indexes)),
            Op(calls, (to_run, now, from_run, task_id, model, epoch, *indexes))]
