"""The samples table's columns, built from the `Sample` type's fields (`evalnb.sample.stored`).

One declaration per field: its kind says how it is encoded, which column holds it, its SQL
type, how it is read back and copied. `SampleColumns(cls)` works for `Sample` and for a
subclass with more fields; `add_missing_columns` gives the table a column for a field it lacks.
"""

from __future__ import annotations

import sqlite3
from functools import lru_cache

from evalnb.sample import Sample, sample_fields, stored_kinds

KEY_COLUMNS = ("run_id", "task_id", "model", "sample_index", "epoch")
# the columns the store keeps itself, beside a sample's own fields (`evalnb.sample.STORE_FIELDS`)
_STORE_KINDS = {"run_id": "key", "grader_key": "digest", "created_at": "time", "started_at": "time",
                "completed_at": "time"}
SQL_TYPES = {"text": "TEXT", "digest": "TEXT", "json": "TEXT", "text_ref": "BLOB", "json_ref": "BLOB",
             "real": "REAL", "flag": "INTEGER", "bool": "INTEGER", "time": "INTEGER"}
REF_KINDS = ("text_ref", "json_ref")  # kept once in `texts`; the row holds the digest


def column_of(name: str, kind: str) -> str:
    """The samples column that holds field `name`."""
    return f"{name}_hash" if kind in REF_KINDS else name


class SampleColumns:
    """The samples table as seen from one sample type: fields, kinds, columns, read-back rules."""

    def __init__(self, cls: type = Sample) -> None:
        self.cls = cls
        self.fields = sample_fields(cls)  # what a read sample holds, in order (SAMPLE_FIELDS for Sample)
        kinds = {**dict(stored_kinds(cls)), **_STORE_KINDS}
        self.kinds = {name: kinds[name] for name in self.fields}
        self.columns = {name: column_of(name, kind) for name, kind in self.kinds.items()}
        self.json = frozenset(n for n, k in self.kinds.items() if k in ("json", "json_ref"))
        self.bools = frozenset(n for n, k in self.kinds.items() if k == "bool")
        self.refs = tuple(n for n, k in self.kinds.items() if k in REF_KINDS)

    def copy_sql(self, replaced: dict[str, str]) -> tuple[str, tuple[str, ...]]:
        """``INSERT INTO samples (every column) SELECT ... FROM samples`` with `replaced` columns
        given by an expression (``"?"``: a parameter) instead of copied; an UPSERT on the key.
        Returns the SQL and the replaced names whose expression is ``"?"``, in parameter order."""
        columns = [self.columns[f] for f in self.fields]
        select = [replaced.get(c, c) for c in columns]
        updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in KEY_COLUMNS)
        sql = (f"INSERT INTO samples ({', '.join(columns)}) SELECT {', '.join(select)} FROM samples "
               "WHERE run_id = ? AND task_id = ? AND model = ? AND sample_index = ? AND epoch = ? "
               f"AND status = 'completed' ON CONFLICT ({', '.join(KEY_COLUMNS)}) DO UPDATE SET {updates}")
        return sql, tuple(c for c in columns if replaced.get(c) == "?")

    def missing_ddl(self, existing: set[str]) -> list[str]:
        """``ALTER TABLE`` statements for the fields whose column the table lacks."""
        return [f"ALTER TABLE samples ADD COLUMN {self.columns[name]} {SQL_TYPES[kind]}"
                for name, kind in self.kinds.items() if kind != "key" and self.columns[name] not in existing]


@lru_cache(maxsize=16)
def columns_for(cls: type = Sample) -> SampleColumns:
    return SampleColumns(cls)


def ensure_sample_columns(conn: sqlite3.Connection, columns: SampleColumns) -> list[str]:
    """Give the samples table a column for every field of `columns` it lacks (a field added to
    `Sample`, a subclass's field); returns the statements run (none: nothing was missing)."""
    existing = {row[1] for row in conn.execute("PRAGMA table_info(samples)")}
    statements = columns.missing_ddl(existing)
    if not statements:
        return statements
    conn.execute("BEGIN IMMEDIATE")  # another process may be adding them right now
    try:
        existing = {row[1] for row in conn.execute("PRAGMA table_info(samples)")}
        statements = columns.missing_ddl(existing)
        for statement in statements:
            conn.execute(statement)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return statements
