"""Python dicts <-> SQLite rows for samples, cached outputs and task metrics.

Encoding happens on the caller's thread, so a malformed sample fails at the call that
handed it over (naming the sample and field), never later inside the writer thread.
A write is an `Op`: the SQL, its parameters and the deduplicated texts it refers to.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Mapping
from functools import lru_cache
from itertools import groupby
from operator import attrgetter
from typing import Any, NamedTuple

from evalnb.redaction import Redactor
from evalnb.sample import SAMPLE_FIELDS, Sample
from evalnb.store._columns import KEY_COLUMNS, SampleColumns, columns_for

# "not_run": never called, its model or task stopped by a failure that hits every call (its
# error says why); a resume runs it
SAMPLE_STATUSES = ("queued", "generating", "scoring", "completed", "failed", "not_run")
FINISHED_SAMPLE_STATUSES = ("completed", "failed")

_KEY_COLS = KEY_COLUMNS
_SKIP, _TEXT, _JSON, _PROMPT, _ROW, _FLOAT, _TIME, _KEY, _FLAG = range(9)
# a field's kind (`evalnb.sample.stored`) -> how it is encoded; the key and status lead every row
_ENCODING = {"key": _SKIP, "text": _TEXT, "digest": _KEY, "json": _JSON, "text_ref": _PROMPT, "json_ref": _ROW,
             "real": _FLOAT, "flag": _FLAG, "bool": _FLAG, "time": _TIME}


def _encodings(columns: SampleColumns) -> dict[str, int]:
    """field -> its encoding (``created_at`` is set by the encoder itself: first insert only)."""
    return {name: _SKIP if name == "created_at" else _ENCODING[kind] for name, kind in columns.kinds.items()}


_SAMPLES = columns_for(Sample)
_KINDS = _encodings(_SAMPLES)


def _unsupported(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


try:  # the C encoder, built once: json.dumps rebuilds it on every call, which dominates for small dicts
    from json.encoder import c_make_encoder as _c_make_encoder
    from json.encoder import encode_basestring as _encode_basestring

    _c_encode = _c_make_encoder(None, _unsupported, _encode_basestring, None, ":", ",", False, False, True)
except ImportError:  # pragma: no cover - pure-Python json
    _c_encode = None
_py_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_unsupported).encode


def to_json(value: Any) -> str:
    """Compact JSON (not ASCII-escaped; NaN allowed); exceptions are stored as {"type", "message"}."""
    if isinstance(value, BaseException):
        value = {"type": type(value).__name__, "message": str(value)}
    if _c_encode is None or isinstance(value, str):
        return _py_dumps(value)
    try:
        return "".join(_c_encode(value, 0))
    except RecursionError:
        raise ValueError("circular reference (or nesting too deep) in a JSON value") from None


class Op(NamedTuple):
    """One encoded write: consecutive Ops with the same SQL are sent in one executemany."""

    sql: str
    params: tuple[Any, ...]
    texts: tuple[tuple[bytes, str], ...] = ()


def text_hash(body: str) -> bytes:
    """The 16-byte content address of a stored text."""
    return hashlib.blake2b(body.encode("utf-8"), digest_size=16).digest()


_scan_once = json.JSONDecoder().scan_once  # what json.loads does, minus per-call overhead


def from_json(text: str | None) -> Any:
    """Decode JSON the store wrote (compact, no surrounding whitespace); anything else via json.loads."""
    if text is None:
        return None
    try:
        value, end = _scan_once(text, 0)
    except StopIteration:
        return json.loads(text)  # raises the usual JSONDecodeError
    return value if end == len(text) else json.loads(text)


@lru_cache(maxsize=256)
def _sample_sql(cols: tuple[str, ...], update_created: bool) -> str:
    updates = [c for c in cols if c not in _KEY_COLS and (c != "created_at" or update_created)]
    conflict = "DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in updates) if updates else "DO NOTHING"
    return (
        f"INSERT INTO samples ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
        f"ON CONFLICT (run_id, task_id, model, sample_index, epoch) {conflict}"
    )


@lru_cache(maxsize=256)
def _fields(keys: tuple[str, ...], columns: SampleColumns = _SAMPLES) -> tuple[tuple[str, int], ...]:
    """(name, kind) of the stored fields among a sample's keys, in the sample's order.

    The runner's samples all have the same keys, so this is worked out once per key order
    instead of once per field of every sample.
    """
    kinds = _KINDS if columns is _SAMPLES else _encodings(columns)
    return tuple((name, kind) for name in keys if (kind := kinds.get(name)) is not None and kind != _SKIP)


@lru_cache(maxsize=256)
def _sample_sql_for(fields: tuple[tuple[str, int], ...], stamp: bool, update_created: bool) -> str:
    # a text kept once (`texts`): the row holds its digest, in `<field>_hash` (store._columns.column_of)
    cols = [*_KEY_COLS, "status", *(f"{name}_hash" if kind in (_PROMPT, _ROW) else name for name, kind in fields)]
    cols += ["completed_at"] * stamp + ["created_at"]
    return _sample_sql(tuple(cols), update_created)


def _check_key(s: Any, rid: Any, task_id: Any, model: Any, index: Any, epoch: Any, status: Any) -> None:
    """ValueError naming the sample and field when its key or status is not what the table holds."""
    if not isinstance(rid, str) or not rid:
        raise ValueError(f"{_where(s)}: no run_id (give it in the sample or to the writer)")
    if not isinstance(task_id, str) or not task_id:
        raise ValueError(f"{_where(s)}: task_id must be a non-empty string")
    if not isinstance(model, str) or not model:
        raise ValueError(f"{_where(s)}: model must be a non-empty string (the model label)")
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"{_where(s)}: sample_index must be an integer >= 0")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"{_where(s)}: epoch must be an integer >= 0")
    if status not in SAMPLE_STATUSES:
        raise ValueError(f"{_where(s)}: status must be one of {', '.join(SAMPLE_STATUSES)}; got {status!r}")


def _where(s: Any) -> str:
    get = s.get if isinstance(s, Mapping) else lambda name: getattr(s, name, None)
    epoch = f", epoch={get('epoch')!r}" if get("epoch") else ""
    return f"sample (task_id={get('task_id')!r}, model={get('model')!r}, sample_index={get('sample_index')!r}{epoch})"


@lru_cache(maxsize=16)
def _plan(cls: type) -> tuple[tuple[tuple[str, int], ...], Any]:
    """A Sample type's stored fields but the key and status (which lead every row), how each is
    encoded, and a getter of their values in that order."""
    kinds = _encodings(columns_for(cls))
    fields = tuple((name, kinds[name]) for name, kind in columns_for(cls).kinds.items()
                   if kinds[name] != _SKIP and name not in _STORE_ONLY)
    return fields, attrgetter(*(name for name, _ in fields))


_STORE_ONLY = ("grader_key", "started_at", "completed_at")  # not Sample fields: the store's own
_SAMPLE_KINDS, _sample_values = _plan(Sample)


class SampleEncoder:
    """Turns sample dicts into UPSERT ops, remembering which texts it has already emitted.

    Every model of a run writes the same prompt and dataset row for an item; the encoder
    hashes and emits each text once and later ops just reference its digest. That memory is
    only valid for ops applied in order on one connection, so each writer owns an encoder and
    calls `reset()` whenever ops it produced were not written.

    Every text and JSON value goes through `redactor.text` on its way in (JSON after
    encoding: every string inside is covered, and a mask keeps the JSON valid). A stored
    prompt or row keeps the digest of the text as it was, so reuse still recognises it.
    """

    _CACHE_LIMIT = 50_000

    def __init__(self, redactor: Redactor | None = None, columns: SampleColumns = _SAMPLES) -> None:
        self._redact = (redactor or Redactor()).text
        self._columns = columns  # which fields a sample dict may carry (a Sample subclass's too)
        self._prompts: dict[str, bytes] = {}
        # (run_id, task_id, sample_index) -> (the row object, its digest); hit only on the same object
        self._rows: dict[tuple[str, str, int], tuple[Any, bytes]] = {}

    def reset(self) -> None:
        self._prompts.clear()
        self._rows.clear()

    def encode(self, s: Mapping[str, Any], run_id: str | None, now: int) -> Op:
        """One sample dict as an UPSERT: fields present overwrite, fields absent keep their value.

        Required: run_id (in the dict or given), task_id, model, sample_index, status; `epoch`
        defaults to 0 (the first ask of the item). Keys the store does not know (e.g. an
        attached `item`) are ignored. A finished sample without
        `completed_at` gets `now`; `created_at` is set on first insert only.
        """
        try:
            return self._encode(s, run_id, now)
        except BaseException:
            self.reset()  # texts remembered during this call were never emitted
            raise

    def encode_many(self, samples: Iterable[Mapping[str, Any]], run_id: str | None, now: int) -> list[Op]:
        """All or nothing: if one sample is malformed, the memory of the others is dropped too.

        A sample carrying ``judge_calls`` (the model calls its grader made) also gives one
        judge-call UPSERT per call, after the sample's own.
        """
        try:
            ops: list[Op] = []
            for s in samples:
                ops.append(self._encode(s, run_id, now))
                if isinstance(s, Sample):
                    calls, rid, key = s.judge_calls, run_id, (s.task_id, s.model, s.sample_index, s.epoch)
                elif isinstance(s, Mapping):
                    calls, rid = s.get("judge_calls"), s.get("run_id") or run_id
                    key = (s.get("task_id"), s.get("model"), s.get("sample_index"), s.get("epoch", 0))
                else:
                    calls = None
                if calls:
                    ops.extend(self.judge_call_op(rid, *key, call, now) for call in calls)
            return ops
        except BaseException:
            self.reset()
            raise

    def judge_call_op(self, run_id: str, task_id: str, model: str, sample_index: int, epoch: int,
                      call: Mapping[str, Any], now: int) -> Op:
        """One grader model call as an UPSERT keyed by its sample and its number within it (texts redacted)."""
        where = f"judge call {call.get('call')!r} of sample (task_id={task_id!r}, model={model!r}, " \
                f"sample_index={sample_index!r})"
        number = call.get("call")
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise ValueError(f"{where}: call must be an integer >= 0")
        kind = call.get("kind")
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"{where}: kind must be a non-empty string")
        texts: list[tuple[bytes, str]] = []
        hashes = []
        for name in ("request", "reply"):
            value = call.get(name)
            if value is None:
                hashes.append(None)
                continue
            body = self._redact(to_json(value))  # a mask keeps the JSON valid
            digest = text_hash(body)
            texts.append((digest, body))
            hashes.append(digest)
        usage, latency, cost = call.get("usage"), call.get("latency_s"), call.get("cost_usd")
        text = call.get("output_text")
        params = (
            run_id, task_id, model, sample_index, epoch, number, kind, call.get("judge_model"), hashes[0], hashes[1],
            None if text is None else self._redact(str(text)), None if usage is None else self._redact(to_json(usage)),
            None if latency is None else float(latency), None if cost is None else float(cost),
            1 if call.get("cached") else 0, call.get("request_key"), now,
        )
        return Op(_JUDGE_CALL_SQL, params, tuple(texts))

    def _encode(self, s: Sample | Mapping[str, Any], run_id: str | None, now: int) -> Op:
        if type(s) is Sample:  # the runner's samples: every stored field, in the type's order
            return self._encode_fields(s, run_id, s.task_id, s.model, s.sample_index, s.epoch, s.status,
                                       _SAMPLE_KINDS, _sample_values(s), now, None, False)
        if isinstance(s, Sample):  # a subclass: its own fields too
            fields, values = _plan(type(s))
            return self._encode_fields(s, run_id, s.task_id, s.model, s.sample_index, s.epoch, s.status,
                                       fields, values(s), now, None, False)
        if not isinstance(s, Mapping):
            raise TypeError(f"a sample must be a Sample or a dict, got {type(s).__name__}")
        fields = _fields(tuple(s), self._columns)
        return self._encode_fields(s, s.get("run_id") or run_id, s.get("task_id"), s.get("model"),
                                   s.get("sample_index"), s.get("epoch", 0), s.get("status"), fields,
                                   [s[name] for name, _ in fields], now, s.get("created_at"), "completed_at" in s)

    def _encode_fields(self, s: Any, rid: Any, task_id: Any, model: Any, index: Any, epoch: Any, status: Any,
                       fields: tuple[tuple[str, int], ...], values: Any, now: int, created: Any,
                       has_completed: bool) -> Op:
        """One sample's UPSERT: its key checked, its stored fields encoded, its times stamped."""
        _check_key(s, rid, task_id, model, index, epoch, status)
        vals: list[Any] = [rid, task_id, model, index, epoch, status]
        texts: list[tuple[bytes, str]] = []
        self._encode_values(s, (rid, task_id, index), fields, values, vals, texts)
        stamp = status in FINISHED_SAMPLE_STATUSES and not has_completed
        if stamp:
            vals.append(now)
        vals.append(now if created is None else int(created))
        return Op(_sample_sql_for(fields, stamp, created is not None), tuple(vals), tuple(texts))

    def _encode_values(self, s: Any, row_key: tuple[str, str, int], fields: tuple[tuple[str, int], ...],
                       values: Any, vals: list[Any], texts: list[tuple[bytes, str]]) -> None:
        """Append each stored field's column value to `vals` (texts redacted, JSON encoded, a
        prompt or row as the digest of its text, added to `texts` once); a bad value names its field."""
        redact = self._redact
        name = ""
        try:  # one pass over the sample's stored fields: this is the runner's hot path
            for (name, kind), value in zip(fields, values):
                if value is None:  # every kind stores None as NULL (a third of a sample's fields)
                    pass
                elif kind == _TEXT:
                    if type(value) is not str and not isinstance(value, str):
                        raise TypeError(f"must be a string or None, got {type(value).__name__}")
                    value = redact(value)
                elif kind == _JSON:
                    value = redact(to_json(value))
                elif kind == _KEY:
                    if type(value) is not str and not isinstance(value, str):
                        raise TypeError(f"must be a string or None, got {type(value).__name__}")
                elif kind == _PROMPT:
                    value = self._prompt_ref(value, texts)
                elif kind == _ROW:
                    value = self._row_ref(row_key, value, texts)
                elif kind == _FLOAT:
                    value = float(value)
                elif kind == _FLAG:
                    value = 1 if value else 0
                else:  # _TIME
                    value = int(value)
                vals.append(value)
        except (TypeError, ValueError) as exc:
            kind_of = TypeError if isinstance(exc, TypeError) else ValueError
            raise kind_of(f"{_where(s)}: {name} {exc}") from None

    def _prompt_ref(self, prompt: Any, texts: list[tuple[bytes, str]]) -> bytes | None:
        if prompt is None:
            return None
        if not isinstance(prompt, str):
            raise TypeError(f"must be a string or None, got {type(prompt).__name__}")
        digest = self._prompts.get(prompt)
        if digest is None:
            digest = text_hash(prompt)
            texts.append((digest, self._redact(prompt)))
            if len(self._prompts) >= self._CACHE_LIMIT:
                self._prompts.clear()
            self._prompts[prompt] = digest
        return digest

    def _row_ref(self, key: tuple[str, str, int], row: Any, texts: list[tuple[bytes, str]]) -> bytes | None:
        if row is None:
            return None
        cached = self._rows.get(key)
        if cached is not None and cached[0] is row:
            return cached[1]
        body = to_json(row)
        digest = text_hash(body)
        texts.append((digest, self._redact(body)))
        if len(self._rows) >= self._CACHE_LIMIT:
            self._rows.clear()
        self._rows[key] = (row, digest)
        return digest


_OUTPUT_SQL = (
    "INSERT INTO outputs (request_key, output_text, usage, response_id, latency_s, created_at, run_id, reply, "
    "cost_usd) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (request_key) DO UPDATE SET "
    "output_text = excluded.output_text, usage = excluded.usage, response_id = excluded.response_id, "
    "latency_s = excluded.latency_s, created_at = excluded.created_at, run_id = excluded.run_id, "
    "reply = excluded.reply, cost_usd = excluded.cost_usd"
)


def encode_output(o: Mapping[str, Any], now: int, redactor: Redactor | None = None,
                  run_id: str | None = None) -> Op | None:
    """A cache entry, or None for an output that must not be cached (it carries an error).

    ``reply`` (optional): the whole JSON reply, kept for grader-bridge calls, whose callers read
    more than the text.
    """
    if type(o) is not dict and not isinstance(o, Mapping):  # the ABC check only when not a plain dict
        raise TypeError(f"a cached output must be a dict, got {type(o).__name__}")
    if o.get("error"):
        return None
    key, text = o.get("request_key"), o.get("output_text")
    if not isinstance(key, str) or not key:
        raise ValueError("a cached output needs a request_key string")
    if not isinstance(text, str):
        raise ValueError(f"cached output {key[:12]}…: output_text must be a string (only successful outputs are cached)")
    usage = o.get("usage")
    latency = o.get("latency_s")
    redact = (redactor or Redactor()).text
    response_id = o.get("response_id")
    reply = o.get("reply")
    cost = o.get("cost_usd")  # what the receiving run paid (a resume of that run charges it again)
    params = (
        key,
        redact(text),
        None if usage is None else redact(to_json(usage)),
        None if response_id is None else redact(str(response_id)),
        None if latency is None else float(latency),
        int(o.get("created_at") or now),
        o.get("run_id") or run_id,
        None if reply is None else redact(to_json(reply)),
        None if cost is None else float(cost),
    )
    return Op(_OUTPUT_SQL, params)


JUDGE_CALL_COLUMNS = (
    "run_id", "task_id", "model", "sample_index", "epoch", "call", "kind", "judge_model", "request_hash",
    "reply_hash", "output_text", "usage", "latency_s", "cost_usd", "cached", "request_key", "created_at",
)
# A call paid for by an earlier attempt of the run (a sample whose grading a budget stop
# interrupted) and answered from the store when the sample is graded again stays paid:
# same key, recorded uncached before, so its cost and `cached` are kept.
_PAID_BEFORE = ("judge_calls.cached = 0 AND excluded.cached = 1 AND judge_calls.request_key IS excluded.request_key")
_JUDGE_CALL_SQL = (
    f"INSERT INTO judge_calls ({', '.join(JUDGE_CALL_COLUMNS)}) VALUES ({', '.join('?' * len(JUDGE_CALL_COLUMNS))}) "
    "ON CONFLICT (run_id, task_id, model, sample_index, epoch, call) DO UPDATE SET "
    + ", ".join(
        f"{c} = CASE WHEN {_PAID_BEFORE} THEN judge_calls.{c} ELSE excluded.{c} END" if c in ("cost_usd", "cached")
        else f"{c} = excluded.{c}"
        for c in JUDGE_CALL_COLUMNS[6:]
    )
)
_TEXT_SQL = "INSERT OR IGNORE INTO texts (hash, body) VALUES (?, ?)"


def write_ops(conn: sqlite3.Connection, ops: Iterable[Op]) -> int:
    """Apply ops in order in one transaction (all or nothing); returns how many were applied."""
    ops = list(ops)
    if not ops:
        return 0
    texts: dict[bytes, str] = {}
    for op in ops:
        if op.texts:
            texts.update(op.texts)
    conn.execute("BEGIN IMMEDIATE")
    try:
        if texts:
            _insert_rows(conn, _TEXT_SQL, list(texts.items()))
        for sql, group in groupby(ops, key=lambda op: op.sql):
            if " VALUES (" in sql:
                _insert_rows(conn, sql, [op.params for op in group])
            else:  # INSERT ... SELECT (a copy from another run): one statement each
                for op in group:
                    conn.execute(sql, op.params)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return len(ops)


# Variables one statement may bind (SQLITE_MAX_VARIABLE_NUMBER: 32766 since 3.32, 999 before).
_MAX_VARIABLES = 32766 if sqlite3.sqlite_version_info >= (3, 32, 0) else 999
_MAX_ROWS = 512


def _insert_rows(conn: sqlite3.Connection, sql: str, rows: list[tuple[Any, ...]]) -> None:
    """`executemany(sql, rows)` as multi-row ``VALUES (...), (...)`` statements.

    Same rows, same order, same conflict handling (SQLite applies the rows of one statement
    one after another). Why: `executemany` releases and retakes the GIL around every row, and
    while the run's event loop keeps the GIL busy each retake can wait the 5 ms switch
    interval, so the writer thread fell far behind; one statement per few hundred rows
    retakes it once. Statements hold a power-of-two number of rows (37 rows: 32 + 4 + 1), so
    the few distinct texts stay in the connection's statement cache: a statement with a new
    row count would be parsed and compiled again, which for long VALUES lists cost more than
    binding the rows. BLOB parameters go in as bytearray: sqlite3 binds those directly, while
    `bytes` takes its adapter lookup, which raises and clears an AttributeError per value.
    """
    head, values, tail = _split_values(sql)
    width = values.count("?")
    per = max(1, min(_MAX_ROWS, _MAX_VARIABLES // max(width, 1)))
    per = 1 << (per.bit_length() - 1)  # the largest power of two that fits
    start, total = 0, len(rows)
    while start < total:
        n = min(per, 1 << ((total - start).bit_length() - 1))
        chunk = rows[start:start + n]
        start += n
        params = [bytearray(v) if type(v) is bytes else v for row in chunk for v in row]
        conn.execute(sql if n == 1 else _multi_row_sql(head, values, tail, n), params)


@lru_cache(maxsize=64)
def _split_values(sql: str) -> tuple[str, str, str]:
    """``INSERT ... VALUES (?, ?) rest`` -> (``INSERT ... VALUES ``, ``(?, ?)``, `` rest``)."""
    start = sql.index(" VALUES (") + len(" VALUES ")
    end = sql.index(")", start) + 1
    return sql[:start], sql[start:end], sql[end:]


@lru_cache(maxsize=256)
def _multi_row_sql(head: str, values: str, tail: str, n: int) -> str:
    return head + ", ".join([values] * n) + tail


JSON_FIELDS = tuple(sorted(_SAMPLES.json))  # read back decoded
