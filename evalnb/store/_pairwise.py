"""Pairwise judgements in the store: the judge set-ups a run was judged with, and each call.

A pairwise pass (`evalnb.runner.pairwise_pass`) writes one row per judge call as soon as its
reply is read, so a pass that crashes resumes from what reached the store; `RunResult.pairwise`
and the run report read them back. A call is named by (run, judge, task, item, epoch, first,
second): the candidate shown first and the one shown second, so the calls of ``a`` against
``b`` and of ``b`` against ``a`` are the same rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evalnb.store._codec import from_json, to_json

PAIRWISE_CALL_FIELDS = ("task_id", "sample_index", "epoch", "first", "second", "verdict", "error", "request_key",
                        "output_text", "usage", "latency_s", "cost_usd", "cached", "created_at")


class PairwiseRecords:
    """`Store` methods for pairwise judgements (mixed into `Store`)."""

    def save_pairwise_judge(self, run_id: str, judge: str, judge_model: str, setup: Mapping[str, Any]) -> None:
        """Remember a judge set-up (its model, template and generation) under its digest ``judge``,
        and that it is the one used last.

        Called on every pairwise pass, also one the store answers whole. The first call keeps the
        set-up and ``created_at``; each call moves the row to the end of the table (the next
        rowid), so rowid order is the order of last use and `pairwise_judges` ends with the set-up
        used last, whether it is new or an older one used again. ``created_at`` has whole seconds
        only, so it cannot order set-ups made in the same second.
        """
        from evalnb.store._runs import _now

        with self._transaction() as conn:  # type: ignore[attr-defined]
            conn.execute(
                "INSERT INTO pairwise_judges (run_id, judge, judge_model, setup, created_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id, judge) DO NOTHING",
                (run_id, judge, judge_model, to_json(self._scrub(dict(setup))), _now()))  # type: ignore[attr-defined]
            conn.execute(
                "UPDATE pairwise_judges SET rowid = (SELECT MAX(rowid) + 1 FROM pairwise_judges) "
                "WHERE run_id = ? AND judge = ? AND rowid < (SELECT MAX(rowid) FROM pairwise_judges)", (run_id, judge))

    def pairwise_judges(self, run_id: str) -> list[dict[str, Any]]:
        """The judge set-ups of a run's pairwise judgements, least recently used first: the last
        one is the set-up used last (what the run page and `pairwise_judgements` show)."""
        rows = self._rows(  # type: ignore[attr-defined]
            "SELECT judge, judge_model, setup, created_at FROM pairwise_judges WHERE run_id = ? "
            "ORDER BY rowid", (run_id,))
        return [{"judge": j, "judge_model": m, "setup": from_json(s), "created_at": c} for j, m, s, c in rows]

    def write_pairwise_calls(self, run_id: str, judge: str, calls: Iterable[Mapping[str, Any]]) -> int:
        """Record judge calls (each a dict of `PAIRWISE_CALL_FIELDS`), replacing earlier ones of the same key."""
        from evalnb.store._runs import _now

        now = _now()
        columns = ("run_id", "judge", *PAIRWISE_CALL_FIELDS)
        rows = []
        for c in calls:
            row = {**c, "usage": to_json(c.get("usage")) if c.get("usage") is not None else None,
                   "output_text": self._redactor.text(c["output_text"]) if c.get("output_text") else c.get("output_text"),  # type: ignore[attr-defined]
                   "error": self._redactor.text(c["error"]) if c.get("error") else None,  # type: ignore[attr-defined]
                   "cached": int(bool(c.get("cached"))), "created_at": now}
            rows.append((run_id, judge, *(row.get(f) for f in PAIRWISE_CALL_FIELDS)))
        if not rows:
            return 0
        with self._transaction() as conn:  # type: ignore[attr-defined]
            conn.executemany(f"INSERT OR REPLACE INTO pairwise_calls ({', '.join(columns)}) "
                             f"VALUES ({', '.join('?' * len(columns))})", rows)
        return len(rows)

    def pairwise_calls(self, run_id: str, judge: str | None = None) -> list[dict[str, Any]]:
        """A run's pairwise judge calls (of one judge set-up, or all: then with ``judge``), in key order."""
        where, params = ("run_id = ? AND judge = ?", (run_id, judge)) if judge else ("run_id = ?", (run_id,))
        rows = self._rows(  # type: ignore[attr-defined]
            f"SELECT judge, {', '.join(PAIRWISE_CALL_FIELDS)} FROM pairwise_calls WHERE {where} "
            "ORDER BY judge, task_id, sample_index, epoch, first, second", params)
        out = []
        for row in rows:
            call = dict(zip(("judge", *PAIRWISE_CALL_FIELDS), row))
            call["usage"] = from_json(call["usage"])
            call["cached"] = bool(call["cached"])
            out.append(call)
        return out
