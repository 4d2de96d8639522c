"""`Store.column_pages` in named steps: check the request, build its keyset-paged query, turn a
page of rows into columns. The SQL stays in the store package; the `Store` method drives them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from evalnb.store._codec import SAMPLE_STATUSES, from_json
from evalnb.store._columns import SampleColumns

SCORE_PREFIX = "score:"  # `column_pages` field "score:<metric id>": one score, read by SQLite


class PageQuery(NamedTuple):
    """One paged read: the first page's SQL, the next pages' (after the last key), their parameters."""

    first: str
    following: str
    params: tuple[Any, ...]
    keys: tuple[str, ...]  # the paging key, selected first
    position: dict[str, int]  # field -> its column in a row
    constant: dict[str, Any]  # fields given by the request (not read per row)


def check_request(known: SampleColumns, fields: list[str], batch_size: Any,
                  status: str | Iterable[str] | None) -> list[str] | None:
    """ValueError for an unknown field, a bad page size or status; the statuses asked for."""
    unknown = [f for f in fields if f not in known.kinds and not f.startswith(SCORE_PREFIX)]
    if unknown:
        raise ValueError(f"unknown sample field(s) {unknown}; known: {', '.join(known.fields)} "
                         f"and {SCORE_PREFIX}<metric id>")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if status is None:
        return None
    statuses = [status] if isinstance(status, str) else list(status)
    bad = [x for x in statuses if x not in SAMPLE_STATUSES]
    if bad:
        raise ValueError(f"sample status must be one of {', '.join(SAMPLE_STATUSES)}; got {bad[0]!r}")
    return statuses


def page_query(known: SampleColumns, run_id: str, fields: list[str], *, task_id: str | None, model: str | None,
               statuses: list[str] | None, after: tuple[int, int] | None) -> PageQuery:
    """The SELECT for `fields` of a run's samples, in key order, a page at a time."""
    # the paging key is selected first (and not again); within one (task, model) it is
    # (sample_index, epoch) alone and the two names are filled in, not read per row
    within = task_id is not None and model is not None
    keys = ("sample_index", "epoch") if within else ("task_id", "model", "sample_index", "epoch")
    read = [f for f in dict.fromkeys(fields) if f not in keys and not (within and f in ("task_id", "model"))]
    sql = _select(known, keys, read, fields)
    where, params = _where(run_id, task_id, model, statuses)
    if after is not None:
        if not within:
            raise ValueError("column_pages(after=...) needs task_id and model: it seeks within one of them")
        where.append("(s.sample_index, s.epoch) > (?, ?)")
        params.extend(after)
    base = sql + "WHERE " + " AND ".join(where)
    order = f" ORDER BY {', '.join('s.' + k for k in keys)} LIMIT ?"
    later = f" AND ({', '.join('s.' + k for k in keys)}) > ({', '.join('?' * len(keys))})"
    position = {k: i for i, k in enumerate(keys)}
    for f in read:
        position.setdefault(f, len(position))
    constant = {"task_id": task_id, "model": model} if within else {}
    return PageQuery(base + order, base + later + order, tuple(params), keys, position, constant)


def _select(known: SampleColumns, keys: tuple[str, ...], read: list[str], fields: list[str]) -> str:
    """SELECT ... FROM samples, with the texts kept once (prompt, dataset_row, ...) joined in."""
    joins = {f: (f"t{i}", known.columns[f]) for i, f in enumerate(known.refs)}
    select = [f"{joins[f][0]}.body" if f in joins else _score_sql(f[len(SCORE_PREFIX):])
              if f.startswith(SCORE_PREFIX) else f"s.{f}" for f in read]
    return (f"SELECT {', '.join('s.' + k for k in keys)}{''.join(', ' + c for c in select)} FROM samples s "
            + "".join(f"LEFT JOIN texts {a} ON {a}.hash = s.{c} " for f, (a, c) in joins.items() if f in fields))


def _where(run_id: str, task_id: str | None, model: str | None,
           statuses: list[str] | None) -> tuple[list[str], list[Any]]:
    where, params = ["s.run_id = ?"], [run_id]
    for column, value in (("task_id", task_id), ("model", model)):
        if value is not None:
            where.append(f"s.{column} = ?")
            params.append(value)
    if statuses is not None:
        where.append(f"s.status IN ({', '.join('?' * len(statuses))})")
        params.extend(statuses)
    return where, params


def page_columns(rows: list[tuple[Any, ...]], fields: list[str], query: PageQuery,
                 known: SampleColumns) -> dict[str, list[Any]]:
    """A page of rows as field -> list: JSON decoded, flags as bool, scores as numbers or None."""
    columns = list(zip(*rows))
    page: dict[str, list[Any]] = {}
    for f in fields:
        if f in query.constant:
            page[f] = [query.constant[f]] * len(rows)
            continue
        values = columns[query.position[f]]
        if f in known.json:
            page[f] = [None if v is None else from_json(v) for v in values]
        elif f in known.bools:
            page[f] = [None if v is None else bool(v) for v in values]
        elif f.startswith(SCORE_PREFIX):
            page[f] = _numbers(values)
        else:
            page[f] = list(values)
    return page


def score_path(key: str) -> str:
    """The JSON path of one score key (quoted: metric ids may hold dots)."""
    return '$."' + key.replace('"', '\\"') + '"'


def _score_sql(key: str) -> str:
    """SQL for one score: `json_extract` (true/false come out as 1/0); `_numbers` drops the rest."""
    path = "'" + score_path(key).replace("'", "''") + "'"
    return f"json_extract(s.scores, {path})"


def _numbers(values: tuple[Any, ...]) -> list[Any]:
    """Score values as numbers or None: a string (or an object's JSON text) is not a score."""
    if str in set(map(type, values)):  # one pass in C
        return [None if type(v) is str else v for v in values]
    return list(values)
