"""Reusing whole graded samples from an earlier, identical run.

A run whose signature (suite version — so grader code and extraction too — models,
generation, tasks, judge and embedding models) and metadata equal a completed earlier run's
would grade the same outputs with the same code against the same targets. Those samples are
copied inside SQLite instead of being re-extracted, re-graded in the sandbox and re-encoded:
a second run of an unchanged suite is then bound by reading rows, not by Python per sample.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from evalnb.store._codec import from_json, text_hash, to_json

_COPY_SQL = (
    "INSERT OR REPLACE INTO samples (run_id, task_id, model, sample_index, epoch, status, prompt_hash, target, "
    "output_text, extracted_output, scores, judge, error, latency_s, usage, response_id, dataset_row_hash, "
    "request_key, grader_key, created_at, started_at, completed_at, prompt_text_hash, log, cost_usd, cached) "
    "SELECT ?, task_id, model, sample_index, epoch, status, prompt_hash, target, output_text, extracted_output, "
    "scores, judge, error, latency_s, usage, response_id, dataset_row_hash, request_key, grader_key, "
    "?, started_at, ?, prompt_text_hash, log, 0, 1 FROM samples WHERE run_id = ? AND task_id = ? AND model = ? "
    "AND sample_index = ? AND epoch = ? AND status = 'completed'"
)
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

    def copy_samples(self, from_run: str, to_run: str, keys: Iterable[tuple[str, str, int, int]], *, now: int) -> int:
        """Copy completed samples of `from_run` into `to_run` (same task, model, index, epoch).

        Copies are answered from the store: ``cached`` and cost 0, their grader model calls too.
        """
        keys = list(keys)
        params = [(to_run, now, now, from_run, t, m, i, e) for t, m, i, e in keys]
        if not params:
            return 0
        with self._transaction() as conn:  # type: ignore[attr-defined]
            conn.executemany(_COPY_SQL, params)
            if conn.execute("SELECT 1 FROM judge_calls WHERE run_id = ? LIMIT 1", (from_run,)).fetchone():
                conn.executemany(_COPY_CALLS_SQL, [(to_run, now, from_run, t, m, i, e) for t, m, i, e in keys])
        return len(params)
