"""`Store`: the one place that knows SQL. Suites, runs, samples, task metrics, output cache."""

from __future__ import annotations

import hashlib

import os
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evalnb.errors import EvalnbError
from evalnb.store._codec import (
    SAMPLE_STATUSES,
    SampleEncoder,
    encode_output,
    from_json,
    to_json,
    write_ops,
)
from evalnb.redaction import Redactor
from evalnb.store._keys import canonical_json
from evalnb.sample import Sample
from evalnb.store._columns import columns_for, ensure_sample_columns
from evalnb.store._pages import check_request, page_columns, page_query
from evalnb.store._pairwise import PairwiseRecords
from evalnb.store._reuse import GradeReuse
from evalnb.store._runs import RunRecords, UnknownSuiteError, _now, error_text
from evalnb.store._schema import WRITER_MMAP_BYTES, connect, connect_read_only, ensure_schema, stored_version
from evalnb.store._schema_check import unexpected_schema
from evalnb.store._scores import distinct_keys, lean_arrays, series_firsts
from evalnb.store._writer import StoreWriter

_IN_CHUNK = 500  # keys per IN (...) query: well under SQLite's variable limit


def default_store_path() -> Path:
    """`<evalnb home>/evalnb.sqlite`."""
    from evalnb.home import evalnb_home

    return evalnb_home() / "evalnb.sqlite"


def open_store(store: Any = None, *, must_exist: bool = True) -> Store:
    """``store=`` as the public functions take it: None (the evalnb home's), a `Store`, or the
    path of a ``.sqlite`` file (one received from someone else, say). ``must_exist``: a path
    that is no file is an error (reading, resuming), rather than a new empty store (a run)."""
    if store is None:
        return Store()
    if isinstance(store, Store):
        return store
    if isinstance(store, (str, os.PathLike)):
        path = Path(store).expanduser()
        if path.is_dir():
            raise EvalnbError(f"store={str(store)!r} is a folder; give the .sqlite file (e.g. {path / 'evalnb.sqlite'})")
        if must_exist and not path.is_file():
            raise EvalnbError(f"no evalnb store at {path} (store= takes a Store or the path of a .sqlite file)")
        return Store(path)
    raise TypeError(f"store= takes an evalnb Store or the path of a .sqlite file, got {type(store).__name__}")


class Store(RunRecords, GradeReuse, PairwiseRecords):
    """SQLite store in WAL mode: one writer at a time, any number of concurrent readers.

    Safe to share between threads (calls are serialised by a lock); for the hot path use
    `writer()`, which commits from its own thread and connection.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0,
                 sample_class: type = Sample) -> None:
        self.path = Path(path).expanduser().resolve() if path is not None else default_store_path()
        # the sample type whose fields are the samples columns (a subclass adds columns of its own)
        self.sample_columns = columns_for(sample_class)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._timeout = timeout
        self._lock = threading.RLock()
        self._redactor = Redactor()  # shared with this store's writers
        self._encoder = SampleEncoder(self._redactor, self.sample_columns)
        self.read_only: str | None = None  # why this store takes no writes (None: it does)
        self._conn = connect(self.path, timeout=self._timeout)  # no memory map: see WRITER_MMAP_BYTES
        try:
            # a store may be someone else's: nothing of its schema runs until it is known to be evalnb's own
            # (its own triggers use json functions SQLite does not mark innocuous, so ON again after)
            self._conn.execute("PRAGMA trusted_schema = OFF")
            self._conn.execute("BEGIN")  # one snapshot: another process may be creating the schema now
            try:
                problems = unexpected_schema(self._conn, stored_version(self._conn))
            finally:
                self._conn.execute("COMMIT")
            if problems:
                # not only evalnb's: read it, never write (a trigger would run with our writes)
                self._conn.close()
                self._conn = connect_read_only(self.path, timeout=self._timeout)
                self.read_only = (f"{self.path} holds SQLite objects evalnb did not create ({'; '.join(problems)}), "
                                  "so evalnb opened it read-only: it can be read and reported, not written")
                self.schema_version = stored_version(self._conn)
            else:
                self._conn.execute("PRAGMA trusted_schema = ON")
                self.schema_version = ensure_schema(self._conn)
                ensure_sample_columns(self._conn, self.sample_columns)
        except BaseException:
            self._conn.close()
            raise
        self._closed = False
        # a store dropped without close() (a notebook variable reassigned) still closes its file
        self._finalizer = weakref.finalize(self, self._conn.close)

    def _connect(self):  # noqa: ANN202 - sqlite3.Connection, used by StoreWriter
        return connect(self.path, timeout=self._timeout, mmap_bytes=WRITER_MMAP_BYTES)

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # ---- plumbing ---------------------------------------------------------------------------
    def _rows(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            self._check_open()
            return self._conn.execute(sql, tuple(params)).fetchall()

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self._lock:
            self._check_open()
            self.check_writable()
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def check_writable(self) -> None:
        """Raise, saying why, when this store was opened read-only (see `read_only`)."""
        if self.read_only:
            raise EvalnbError(self.read_only)

    def _check_open(self) -> None:
        if getattr(self, "_closed", False):
            raise EvalnbError(f"the store {self.path} is closed")

    def close(self) -> None:
        """Close the connection (idempotent). Writers from `writer()` must be closed first."""
        with self._lock:
            if not self._closed:
                self._finalizer()
                self._closed = True

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def integrity_check(self) -> str:
        """SQLite's own verdict on the file: "ok" when intact."""
        return "\n".join(str(r[0]) for r in self._rows("PRAGMA integrity_check"))

    def add_secrets(self, *secrets: str) -> None:
        """Strings that must never be written: masked wherever they appear in anything stored."""
        self._redactor.add(*secrets)

    def _scrub(self, value: Any, keep: frozenset[str] = frozenset()) -> Any:
        """Run records (arguments, metadata, summary, errors): masked like everything else, but
        for the identifiers in ``keep`` (see `Redactor.value`)."""
        return self._redactor.value(value, keep) if value else value

    def scrub(self, value: Any) -> Any:
        """``value`` with this store's secrets and anything shaped like a key masked: for text a
        run shows rather than stores (failure reasons on the progress display)."""
        return self._scrub(value)

    # ---- suites -----------------------------------------------------------------------------
    def save_suite(self, version: str, manifest: Mapping[str, Any]) -> str:
        """Store a suite version's manifest once (the version is a content hash, so re-saving is a no-op)."""
        if not isinstance(version, str) or not version:
            raise ValueError("suite version must be a non-empty string")
        if not isinstance(manifest, Mapping):
            raise TypeError(f"manifest must be a dict, got {type(manifest).__name__}")
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO suites (version, manifest, created_at) VALUES (?, ?, ?) ON CONFLICT (version) DO NOTHING",
                (version, self._suite_text(manifest), _now()),
            )
        return version

    def _suite_text(self, manifest: Mapping[str, Any]) -> str:
        # masked like every other text (a key pasted into grader code): as text, so no field is dropped
        return self._redactor.text(canonical_json(dict(manifest)))

    def manifest_digest(self, manifest: Mapping[str, Any]) -> str:
        """SHA-256 hex of the text `save_suite` writes for ``manifest``: what a run signs as its
        suite (not the row already stored, which may have been edited before this run saved)."""
        return _digest(self._suite_text(manifest))

    def suite_digest(self, version: str) -> str | None:
        """SHA-256 hex of a suite version's stored manifest text (None if not stored): checked
        against the run's signed digest before a resume trusts the stored suite."""
        rows = self._rows("SELECT manifest FROM suites WHERE version = ?", (version,))
        return _digest(str(rows[0][0])) if rows else None

    def get_suite(self, version: str) -> dict[str, Any]:
        """The stored manifest dict of a suite version."""
        rows = self._rows("SELECT manifest FROM suites WHERE version = ?", (version,))
        if not rows:
            raise UnknownSuiteError(f"unknown suite version {version!r} (not in {self.path})")
        return from_json(rows[0][0])

    def has_suite(self, version: str) -> bool:
        return bool(self._rows("SELECT 1 FROM suites WHERE version = ?", (version,)))

    def compact(self) -> int:
        """Drop prompts/rows no sample refers to any more, then VACUUM; returns texts dropped.

        Call it when no run is writing: a live writer may be about to refer to a text again.
        """
        with self._transaction() as conn:
            cur = conn.execute(
                "DELETE FROM texts WHERE hash NOT IN (SELECT prompt_hash FROM samples WHERE prompt_hash IS NOT NULL "
                "UNION SELECT dataset_row_hash FROM samples WHERE dataset_row_hash IS NOT NULL "
                "UNION SELECT prompt_text_hash FROM samples WHERE prompt_text_hash IS NOT NULL "
                "UNION SELECT request_hash FROM judge_calls WHERE request_hash IS NOT NULL "
                "UNION SELECT reply_hash FROM judge_calls WHERE reply_hash IS NOT NULL)"
            )
            dropped = cur.rowcount
        self._encoder.reset()
        with self._lock:
            self._conn.execute("VACUUM")
        return dropped

    # ---- samples ----------------------------------------------------------------------------
    def write_samples(self, samples: Iterable[Mapping[str, Any]], *, run_id: str | None = None) -> int:
        """UPSERT samples in one transaction; returns how many. See `StoreWriter` for the hot path.

        Keyed by (run_id, task_id, model, sample_index, epoch): fields present overwrite, fields
        absent keep their stored value. Malformed samples raise before anything is written.
        """
        with self._lock:
            self._check_open()
            self.check_writable()
            ops = self._encoder.encode_many(samples, run_id, _now())
            try:
                return write_ops(self._conn, ops)
            except BaseException:
                self._encoder.reset()
                raise

    def writer(self, run_id: str | None = None, **options: Any) -> StoreWriter:
        """A group-committing background writer on its own connection (see `StoreWriter`)."""
        self.check_writable()
        columns = None if self.sample_columns.cls is Sample else self.sample_columns
        return StoreWriter(self._connect, self._redactor, run_id=run_id, columns=columns, **options)

    def column_pages(
        self, run_id: str, fields: Iterable[str] | None = None, *, task_id: str | None = None,
        model: str | None = None, status: str | Iterable[str] | None = None, batch_size: int = 20_000,
        after: tuple[int, int] | None = None,
    ) -> Iterator[dict[str, list[Any]]]:
        """The one way samples are read: some fields of a run's samples, a page of columns at a time.

        Pages are dicts field -> list (JSON fields decoded, ``cached`` as bool), ``batch_size``
        samples each, in (task_id, model, sample_index, epoch) order; each page starts after the
        last key of the one before (keyset paging), so memory stays bounded however large the
        run and rows committed meanwhile may or may not be seen. A summary asks only for the
        columns it needs (keys and scores, not prompts and outputs): text fields (prompt,
        dataset_row, prompt_text) are joined in only when asked for, and ``"score:<metric id>"``
        is one score read out of the stored ``scores`` by SQLite (a number; a bool as 1/0;
        None when absent, null or not a number), so no sample's JSON is decoded in Python. ``after`` ((sample_index,
        epoch), with ``task_id`` and ``model`` given) starts after that sample: a page deep in a
        run is read without the pages before it.
        """
        known = self.sample_columns
        fields = list(known.fields if fields is None else fields)
        statuses = check_request(known, fields, batch_size, status)
        query = page_query(known, run_id, fields, task_id=task_id, model=model, statuses=statuses, after=after)
        rows = self._rows(query.first, (*query.params, batch_size))
        while rows:
            yield page_columns(rows, fields, query, known)
            if len(rows) < batch_size:
                return
            rows = self._rows(query.following, (*query.params, *rows[-1][:len(query.keys)], batch_size))

    def sample_groups(self, run_id: str) -> list[tuple[str, str]]:
        """The (task_id, model) pairs a run has samples for, in key order: one seek in the key
        index per pair (the next pair after the last one found), not a walk over every sample."""
        with self._lock:
            self._check_open()
            return distinct_keys(self._conn.execute, "samples", run_id, ("task_id", "model"))

    def score_keys(self, run_id: str) -> dict[str, list[str]]:
        """task -> the score keys its samples carry, in order of first appearance (samples in key
        order, keys in each sample's order), from the `scores` table (no sample's JSON read but
        the first one of a key, for its place among the keys of that sample)."""
        firsts: dict[str, dict[str, tuple[Any, ...]]] = {}
        with self._lock:
            self._check_open()
            found_rows = series_firsts(self._conn.execute, run_id)
        for task, model, metric, index, epoch in found_rows:
            here = (model, index, epoch)
            seen = firsts.setdefault(task, {})
            if metric not in seen or here < seen[metric]:
                seen[metric] = here
        found: dict[str, list[str]] = {}
        for task in sorted(firsts):
            seen = firsts[task]
            if len(seen) == 1:
                found[task] = list(seen)
                continue
            place = {k: (*where, self._key_position(run_id, task, where, k)) for k, where in seen.items()}
            found[task] = sorted(seen, key=place.__getitem__)
        return found

    def _key_position(self, run_id: str, task_id: str, where: tuple[Any, ...], key: str) -> int:
        """The place of ``key`` among the score keys of one sample ((model, index, epoch) of ``task_id``)."""
        (row,) = self._rows(
            "SELECT (SELECT j.id FROM json_each(s.scores) j WHERE j.key = ?) FROM samples s WHERE s.run_id = ? "
            "AND s.task_id = ? AND s.model = ? AND s.sample_index = ? AND s.epoch = ?", (key, run_id, task_id, *where))
        return row[0]

    def lean_arrays(self, run_id: str, task_id: str, model: str, metrics: Iterable[str]) -> dict[str, Any]:
        """One (task, model)'s samples as numpy columns in (sample_index, epoch) order: keys, status
        (as strings), the missing-field flag and ``score:<metric>`` floats; see `_scores.lean_arrays`.
        What summaries read: narrow rows from the `scores` table and a covering index, no JSON."""
        with self._lock:
            self._check_open()
            self._conn.execute("BEGIN")  # one snapshot: keys and scores of the same samples
            try:
                return lean_arrays(self._conn.execute, run_id, task_id, model, list(metrics), SAMPLE_STATUSES)
            finally:
                self._conn.execute("COMMIT")

    def samples(self, run_id: str, *, task_id: str | None = None, model: str | None = None,
                status: str | Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Matching samples as dicts (the shape the runner wrote), in key order: `column_pages`
        of every field, as rows. For big runs read `column_pages` instead."""
        out: list[dict[str, Any]] = []
        fields = self.sample_columns.fields
        for page in self.column_pages(run_id, fields, task_id=task_id, model=model, status=status, batch_size=5000):
            out.extend(dict(zip(fields, values)) for values in zip(*page.values()))
        return out

    # ---- the output cache -------------------------------------------------------------------
    def lookup_outputs(self, request_keys: Iterable[str], *, run_id: str | None = None) -> dict[str, dict[str, Any]]:
        """Cached successful outputs for the keys that have one (misses are simply absent).

        With `run_id`, only the outputs that run received (a resumed run that reuses nothing
        else still keeps its own answers). Keys are looked up in sorted order, 500 per query,
        so each query walks one narrow stretch of the index instead of jumping around the file.
        """
        found: dict[str, dict[str, Any]] = {}
        columns = "request_key, output_text, usage, response_id, latency_s, created_at, reply, run_id, cost_usd"
        for key, text, usage, response_id, latency, created, reply, received_by, cost in self._output_rows(
                columns, request_keys, run_id):
            found[key] = {
                "request_key": key, "output_text": text, "usage": from_json(usage),
                "response_id": response_id, "latency_s": latency, "created_at": created,
                "run_id": received_by, "cost_usd": cost,
            }
            if reply is not None:
                found[key]["reply"] = from_json(reply)
        return found

    def cached_keys(self, request_keys: Iterable[str], *, run_id: str | None = None) -> set[str]:
        """Which of `request_keys` have a cached output (`lookup_outputs` without reading the outputs)."""
        return {row[0] for row in self._output_rows("request_key", request_keys, run_id)}

    def _output_rows(self, columns: str, request_keys: Iterable[str], run_id: str | None) -> list[tuple]:
        """`columns` of the cached outputs of `request_keys` (of `run_id`'s only, if given), 500 keys a query."""
        keys = sorted(set(request_keys))
        own = " AND run_id = ?" if run_id is not None else ""
        rows: list[tuple] = []
        with self._lock:
            self._check_open()
            for start in range(0, len(keys), _IN_CHUNK):
                chunk = keys[start : start + _IN_CHUNK]
                rows += self._conn.execute(
                    f"SELECT {columns} FROM outputs WHERE request_key IN ({', '.join('?' * len(chunk))}){own}",
                    [*chunk, run_id] if run_id is not None else chunk,
                ).fetchall()
        return rows

    def put_outputs(self, outputs: Iterable[Mapping[str, Any]]) -> int:
        """Cache successful outputs (latest wins); entries with an `error` are skipped. Returns how many were stored."""
        now = _now()
        ops = [op for op in (encode_output(o, now, self._redactor) for o in outputs) if op is not None]
        with self._lock:
            self._check_open()
            return write_ops(self._conn, ops)

    # ---- grader model calls and spend --------------------------------------------------------
    def write_judge_calls(self, run_id: str, task_id: str, model: str, calls: Iterable[Mapping[str, Any]], *,
                          sample_index: int = -1, epoch: int = 0) -> int:
        """Record grader model calls outside a sample write (a batch grader's: sample_index -1)."""
        now = _now()
        with self._lock:
            self._check_open()
            ops = [self._encoder.judge_call_op(run_id, task_id, model, sample_index, epoch, c, now) for c in calls]
            return write_ops(self._conn, ops)

    def judge_calls(self, run_id: str) -> list[dict[str, Any]]:
        """Every grader model call of a run, by (task, model, sample, epoch, call), JSON decoded."""
        rows = self._rows(
            "SELECT j.task_id, j.model, j.sample_index, j.epoch, j.call, j.kind, j.judge_model, q.body, a.body, "
            "j.output_text, j.usage, j.latency_s, j.cost_usd, j.cached, j.request_key, j.created_at "
            "FROM judge_calls j LEFT JOIN texts q ON q.hash = j.request_hash LEFT JOIN texts a ON a.hash = j.reply_hash "
            "WHERE j.run_id = ? ORDER BY j.task_id, j.model, j.sample_index, j.epoch, j.call",
            (run_id,),
        )
        names = ("task_id", "model", "sample_index", "epoch", "call", "kind", "judge_model", "request", "reply",
                 "output_text", "usage", "latency_s", "cost_usd", "cached", "request_key", "created_at")
        out = []
        for row in rows:
            call = dict(zip(names, row))
            for name in ("request", "reply", "usage"):
                call[name] = from_json(call[name])
            call["cached"] = bool(call["cached"])
            out.append(call)
        return out

    def paid_samples(self, run_id: str) -> dict[tuple[str, str, int, int], tuple[str | None, float | None]]:
        """(task, model, index, epoch) -> (request_key, cost_usd) of the run's unfinished samples whose
        candidate call was made (not answered from the store): a resume that takes their output
        from the cache keeps what the call cost."""
        rows = self._rows(
            "SELECT task_id, model, sample_index, epoch, request_key, cost_usd FROM samples WHERE run_id = ? "
            "AND status != 'completed' AND cached = 0 AND output_text IS NOT NULL",
            (run_id,),
        )
        return {(t, m, i, e): (key, cost) for t, m, i, e, key, cost in rows}

    def run_spend(self, run_id: str) -> float:
        """USD recorded for a run so far: its candidate calls, its grader model calls and its
        pairwise judge calls (`RunResult.pairwise`), so a resumed run's budget counts them all."""
        rows = self._rows(
            "SELECT (SELECT COALESCE(SUM(cost_usd), 0) FROM samples WHERE run_id = ?) + "
            "(SELECT COALESCE(SUM(cost_usd), 0) FROM judge_calls WHERE run_id = ?) + "
            "(SELECT COALESCE(SUM(cost_usd), 0) FROM pairwise_calls WHERE run_id = ?)",
            (run_id, run_id, run_id),
        )
        return float(rows[0][0] or 0.0)

    # ---- batch-grader task metrics ------------------------------------------------------------
    def write_task_metrics(
        self, run_id: str, task_id: str, model: str, metrics: Mapping[str, Any] | None = None, error: Any = None
    ) -> None:
        """Record a batch grader's task metrics (metric id -> number) or its error, replacing earlier ones."""
        if metrics is not None and not isinstance(metrics, Mapping):
            raise TypeError(f"task metrics must be a dict of metric id -> number, got {type(metrics).__name__}")
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO task_metrics (run_id, task_id, model, metrics, error, updated_at) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id, task_id, model) DO UPDATE SET metrics = excluded.metrics, "
                "error = excluded.error, updated_at = excluded.updated_at",
                (run_id, task_id, model, None if metrics is None else self._redactor.text(to_json(dict(metrics))),
                 self._scrub(error_text(error)), _now()),
            )

    # ---- executor state: what an executor keeps per run to pick up on resume -------------------
    def save_executor_state(self, run_id: str, executor: str, key: str, value: Any) -> None:
        """Keep `value` (JSON) under (run, executor name, key), committed now; None removes it.

        For executors whose work outlives the process (a provider batch's id): resume reads it
        back with `executor_state`. Written at once, not through the run's writer, so it is on
        disk before the executor waits on the work it names.
        """
        with self._transaction() as conn:
            if value is None:
                conn.execute("DELETE FROM executor_state WHERE run_id = ? AND executor = ? AND key = ?",
                             (run_id, executor, key))
            else:
                conn.execute(
                    "INSERT INTO executor_state (run_id, executor, key, value, updated_at) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (run_id, executor, key) DO UPDATE SET value = excluded.value, "
                    "updated_at = excluded.updated_at",
                    (run_id, executor, key, self._redactor.text(to_json(value)), _now()))

    def executor_state(self, run_id: str, executor: str) -> dict[str, Any]:
        """Everything `save_executor_state` kept for (run, executor): key -> value."""
        rows = self._rows("SELECT key, value FROM executor_state WHERE run_id = ? AND executor = ? ORDER BY key",
                          (run_id, executor))
        return {k: from_json(v) for k, v in rows}

    def task_metrics(self, run_id: str) -> list[dict[str, Any]]:
        """Batch-grader results of a run: [{task_id, model, metrics, error, updated_at}]."""
        rows = self._rows(
            "SELECT task_id, model, metrics, error, updated_at FROM task_metrics WHERE run_id = ? ORDER BY task_id, model",
            (run_id,),
        )
        return [
            {"task_id": t, "model": m, "metrics": from_json(x), "error": e, "updated_at": u} for t, m, x, e, u in rows
        ]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
