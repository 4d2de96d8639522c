"""Is this SQLite file only what evalnb made? Checked before evalnb writes to it.

Why: a store is often someone else's (a colleague's results). A trigger, view or table left in
the file runs with the receiver's writes: a trigger on `runs` can point the receiver's own later
run at the sender's server. So the schema is compared with the one evalnb's own DDL and
migrations make for the file's schema version (built once per version in memory): every
table (by its columns), index and trigger (by its SQL), and no view or other object. Anything
extra or changed is named, and the store is opened read-only (`Store.read_only` says why).
"""

from __future__ import annotations

import functools
import re
import sqlite3

__all__ = ["unexpected_schema"]


def _objects(conn: sqlite3.Connection) -> dict[tuple[str, str], str]:
    """(type, name) -> what must match: a table's columns, an index's or trigger's SQL, a view's SQL."""
    found: dict[tuple[str, str], str] = {}
    for kind, name, sql in conn.execute("SELECT type, name, sql FROM sqlite_master"):
        if kind == "table":
            columns = conn.execute(f'SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(?)',
                                   (name,)).fetchall()
            found[(kind, name)] = repr(columns)
        else:
            found[(kind, name)] = re.sub(r"\s+", " ", sql or "").strip()
    return found


@functools.lru_cache(maxsize=None)
def _reference(version: int) -> dict[tuple[str, str], str]:
    """The objects evalnb's DDL and migrations make up to schema ``version``, in memory."""
    from evalnb.store._schema import _DDL_V1, MIGRATIONS

    conn = sqlite3.connect(":memory:")
    try:
        for statement in _DDL_V1:
            conn.execute(statement)
        for step in range(1, version):
            MIGRATIONS[step](conn)
        return _objects(conn)
    finally:
        conn.close()


def unexpected_schema(conn: sqlite3.Connection, version: int | None) -> list[str]:
    """What in the file evalnb did not create for schema ``version`` (empty: only its own objects).

    ``version`` None: no evalnb schema yet, so the file must hold nothing at all.
    """
    from evalnb.store._schema import SCHEMA_VERSION

    found = _objects(conn)
    if version is None:
        return [f"{kind} {name!r}, but the file has no evalnb schema" for kind, name in sorted(found)]
    if version > SCHEMA_VERSION or version < 1:
        return []  # ensure_schema refuses a newer store by itself; nothing to compare with
    expected = _reference(version)
    problems = []
    for key, shape in sorted(found.items()):
        kind, name = key
        if key not in expected:
            problems.append(f"a {kind} evalnb did not create: {name!r}")
        elif expected[key] != shape:
            problems.append(f"the {kind} {name!r} differs from evalnb's")
    return problems
