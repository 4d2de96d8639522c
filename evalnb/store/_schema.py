"""The SQLite schema, connection settings and the migration hook.

One file, WAL journal: one writer at a time (across threads and processes) while any number
of readers keep reading the last committed state. `synchronous=NORMAL` makes a commit
durable against a crash of the writing process (the WAL is in the OS page cache); an OS crash
or power cut may lose the last commits but never corrupts the file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from evalnb.errors import EvalnbError
from evalnb.store._scores import add_scores_table

SCHEMA_VERSION = 9

# Large, repeated texts (prompts, dataset rows) live once in `texts`, keyed by a 16-byte
# BLAKE2b digest: the same prompt is shared by every model of a run and by every re-run.
_DDL_V1 = [
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE suites (
        version TEXT PRIMARY KEY,
        manifest TEXT NOT NULL,
        created_at INTEGER NOT NULL)""",
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        suite_version TEXT NOT NULL,
        status TEXT NOT NULL,
        models TEXT NOT NULL,
        generation TEXT NOT NULL,
        task_ids TEXT,
        max_samples INTEGER,
        concurrency INTEGER,
        judge_model TEXT,
        embedding_model TEXT,
        signature TEXT NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        versions TEXT NOT NULL DEFAULT '{}',
        summary TEXT,
        error TEXT,
        owner_pid INTEGER,
        owner_host TEXT,
        owner_token TEXT,
        created_at INTEGER NOT NULL,
        started_at INTEGER,
        completed_at INTEGER,
        updated_at INTEGER NOT NULL)""",
    "CREATE INDEX runs_by_signature ON runs (signature, created_at)",
    "CREATE INDEX runs_by_created ON runs (created_at)",
    "CREATE TABLE texts (hash BLOB PRIMARY KEY, body TEXT NOT NULL)",
    """CREATE TABLE samples (
        run_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        model TEXT NOT NULL,
        sample_index INTEGER NOT NULL,
        status TEXT NOT NULL,
        prompt_hash BLOB,
        target TEXT,
        output_text TEXT,
        extracted_output TEXT,
        scores TEXT,
        judge TEXT,
        error TEXT,
        latency_s REAL,
        usage TEXT,
        response_id TEXT,
        dataset_row_hash BLOB,
        request_key TEXT,
        grader_key TEXT,
        created_at INTEGER,
        started_at INTEGER,
        completed_at INTEGER,
        PRIMARY KEY (run_id, task_id, model, sample_index))""",
    "CREATE INDEX samples_by_status ON samples (run_id, status, task_id, model, sample_index)",
    """CREATE TABLE outputs (
        request_key TEXT PRIMARY KEY,
        output_text TEXT NOT NULL,
        usage TEXT,
        response_id TEXT,
        latency_s REAL,
        created_at INTEGER NOT NULL)""",
    """CREATE TABLE task_metrics (
        run_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        model TEXT NOT NULL,
        metrics TEXT,
        error TEXT,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (run_id, task_id, model))""",
]

# The samples columns after `epoch` was added (schema 2), in table order.
_SAMPLE_COLUMNS_V1 = (
    "run_id", "task_id", "model", "sample_index", "status", "prompt_hash", "target", "output_text",
    "extracted_output", "scores", "judge", "error", "latency_s", "usage", "response_id", "dataset_row_hash",
    "request_key", "grader_key", "created_at", "started_at", "completed_at",
)


def _v1_to_v2_epochs(conn: sqlite3.Connection) -> None:
    """Epochs (issue 14): an item may be asked K times, so a sample is (run, task, model, item, epoch).

    SQLite cannot change a primary key in place: the samples table is rebuilt with the new
    key, every existing sample becoming epoch 0 (what it was: the only ask). Runs record their
    `epochs` (1 for every earlier run).
    """
    columns = ", ".join(_SAMPLE_COLUMNS_V1)
    conn.execute("""CREATE TABLE samples_v2 (
        run_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        model TEXT NOT NULL,
        sample_index INTEGER NOT NULL,
        epoch INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL,
        prompt_hash BLOB,
        target TEXT,
        output_text TEXT,
        extracted_output TEXT,
        scores TEXT,
        judge TEXT,
        error TEXT,
        latency_s REAL,
        usage TEXT,
        response_id TEXT,
        dataset_row_hash BLOB,
        request_key TEXT,
        grader_key TEXT,
        created_at INTEGER,
        started_at INTEGER,
        completed_at INTEGER,
        PRIMARY KEY (run_id, task_id, model, sample_index, epoch))""")
    conn.execute(f"INSERT INTO samples_v2 ({columns}, epoch) SELECT {columns}, 0 FROM samples")
    conn.execute("DROP TABLE samples")
    conn.execute("ALTER TABLE samples_v2 RENAME TO samples")
    conn.execute("CREATE INDEX samples_by_status ON samples (run_id, status, task_id, model, sample_index, epoch)")
    conn.execute("ALTER TABLE runs ADD COLUMN epochs INTEGER NOT NULL DEFAULT 1")


# MIGRATIONS[n] upgrades a store from schema n to n + 1 inside the opening transaction.
# Add an entry (and bump SCHEMA_VERSION) whenever the schema changes; never edit _DDL_V1.
Migration = Callable[[sqlite3.Connection], None]


def _v2_to_v3(conn: sqlite3.Connection) -> None:
    """Samples keep the evaluated question without few-shot examples (`prompt_text`, shared in
    `texts` like the prompt) and the last few KB their grader printed (`log`); runs get a name."""
    conn.execute("ALTER TABLE samples ADD COLUMN prompt_text_hash BLOB")
    conn.execute("ALTER TABLE samples ADD COLUMN log TEXT")
    conn.execute("ALTER TABLE runs ADD COLUMN name TEXT")


def _v3_to_v4(conn: sqlite3.Connection) -> None:
    """Cached outputs remember the run that received them: a resumed run takes back its own
    answers even when it does not reuse other runs' (``reuse=False``), so a crash costs no
    answer that had reached the store."""
    conn.execute("ALTER TABLE outputs ADD COLUMN run_id TEXT")


def _v4_to_v5_judges_and_cost(conn: sqlite3.Connection) -> None:
    """Judge calls and cost (issue 15).

    `judge_calls`: every model call a grader made through the bridge, per sample (batch
    graders' calls have sample_index -1), with its request and reply (deduplicated in `texts`),
    latency, usage, cost and whether the store answered it. Samples gain `cost_usd` (the
    candidate call; 0 when answered from the store, NULL when the model had no price) and
    `cached`; cached bridge replies keep their whole JSON reply in `outputs.reply`. Earlier
    samples keep NULL for both: nobody recorded whether they were cached.
    """
    conn.execute("ALTER TABLE samples ADD COLUMN cost_usd REAL")
    conn.execute("ALTER TABLE samples ADD COLUMN cached INTEGER")
    conn.execute("ALTER TABLE outputs ADD COLUMN reply TEXT")
    conn.execute("""CREATE TABLE judge_calls (
        run_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        model TEXT NOT NULL,
        sample_index INTEGER NOT NULL,
        epoch INTEGER NOT NULL,
        call INTEGER NOT NULL,
        kind TEXT NOT NULL,
        judge_model TEXT,
        request_hash BLOB,
        reply_hash BLOB,
        output_text TEXT,
        usage TEXT,
        latency_s REAL,
        cost_usd REAL,
        cached INTEGER NOT NULL DEFAULT 0,
        request_key TEXT,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (run_id, task_id, model, sample_index, epoch, call))""")


def _v5_to_v6_sample_flags_and_executor_state(conn: sqlite3.Connection) -> None:
    """Issue 20: samples record `missing_field` (1: a template named a field the row lacks),
    set when the item is rendered, so results count them without decoding rows (NULL for
    earlier samples: not recorded then). `executor_state`: what an executor keeps per run to
    pick up again on resume (e.g. a provider batch's id), as JSON per key."""
    conn.execute("ALTER TABLE samples ADD COLUMN missing_field INTEGER")
    conn.execute("""CREATE TABLE executor_state (
        run_id TEXT NOT NULL,
        executor TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (run_id, executor, key))""")


def _v6_to_v7_scores_table(conn: sqlite3.Connection) -> None:
    """Issue 20: every score also as a number in `scores` (kept in step with `samples.scores`
    by triggers) and the samples' keys and status in a covering index, so a summary of a big run
    reads narrow rows instead of decoding each sample's JSON (`store/_scores.py`)."""
    add_scores_table(conn)


def _v7_to_v8_output_cost(conn: sqlite3.Connection) -> None:
    """Cached outputs keep what the run that received them paid (`cost_usd`; NULL before, or
    unpriced): a resumed run whose answer reached the store before a crash charges its sample
    what the call cost (a provider batch's discounted price), not the live price again."""
    conn.execute("ALTER TABLE outputs ADD COLUMN cost_usd REAL")


def _v8_to_v9_pairwise(conn: sqlite3.Connection) -> None:
    """Issue 32: pairwise judgements. `pairwise_judges`: each judge set-up a run was judged
    with (model, template, generation; `judge` is its digest). `pairwise_calls`: one row per
    judge call (an item shown in one order: `first` then `second`, candidate names), the
    verdict read from its reply (first, second or tie; NULL with `error` when it could not be read), the
    reply text, what it cost and whether the store answered it. A crashed pass resumes from
    these rows; `evalnb.report` shows them."""
    conn.execute("""CREATE TABLE pairwise_judges (
        run_id TEXT NOT NULL,
        judge TEXT NOT NULL,
        judge_model TEXT NOT NULL,
        setup TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (run_id, judge))""")
    conn.execute("""CREATE TABLE pairwise_calls (
        run_id TEXT NOT NULL,
        judge TEXT NOT NULL,
        task_id TEXT NOT NULL,
        sample_index INTEGER NOT NULL,
        epoch INTEGER NOT NULL,
        first TEXT NOT NULL,
        second TEXT NOT NULL,
        verdict TEXT,
        error TEXT,
        request_key TEXT NOT NULL,
        output_text TEXT,
        usage TEXT,
        latency_s REAL,
        cost_usd REAL,
        cached INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (run_id, judge, task_id, sample_index, epoch, first, second))""")


MIGRATIONS: dict[int, Migration] = {1: _v1_to_v2_epochs, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5_judges_and_cost,
                                    5: _v5_to_v6_sample_flags_and_executor_state, 6: _v6_to_v7_scores_table,
                                    7: _v7_to_v8_output_cost, 8: _v8_to_v9_pairwise}


# The writer's connection reads the B-tree pages it updates through a memory map (no read() per
# page). The store's own connection, which summaries read through, does not: a map's pages count
# in the process's resident memory (the kernel maps neighbouring cached pages on each fault),
# ~250 MB for a million-sample run, while read() fills SQLite's 32 MB page cache and no more.
WRITER_MMAP_BYTES = 268435456


def connect(path: Path, *, timeout: float = 30.0, mmap_bytes: int = 0) -> sqlite3.Connection:
    """A connection with evalnb's settings; usable from any thread (callers serialise use).
    ``mmap_bytes``: how much of the file SQLite reads through a memory map (0: none)."""
    conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise EvalnbError(f"cannot use {path} as an evalnb store: WAL journal mode unavailable (got {mode!r})")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("PRAGMA cache_size = -32000")  # up to 32 MB page cache per connection
        conn.execute(f"PRAGMA mmap_size = {int(mmap_bytes)}")
    except BaseException:
        conn.close()
        raise
    return conn


def connect_read_only(path: Path, *, timeout: float = 30.0) -> sqlite3.Connection:
    """A connection that cannot write: for a store whose schema holds objects evalnb did not make."""
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=timeout, isolation_level=None,
                           check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    conn.execute("PRAGMA trusted_schema = OFF")
    conn.execute("PRAGMA query_only = ON")
    return conn


def stored_version(conn: sqlite3.Connection) -> int | None:
    """The schema version the file records (None: no evalnb schema yet)."""
    return _stored_version(conn)


def _stored_version(conn: sqlite3.Connection) -> int | None:
    has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
    if not has_meta:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else None


def ensure_schema(conn: sqlite3.Connection) -> int:
    """Create the schema if missing and run pending migrations; returns the schema version.

    Refuses a store written by a newer evalnb rather than guessing at its layout.
    """
    current = _stored_version(conn)
    if current == SCHEMA_VERSION:
        return current
    conn.execute("BEGIN IMMEDIATE")  # another process may be creating it right now
    try:
        current = _stored_version(conn)
        if current is None:
            for statement in _DDL_V1:
                conn.execute(statement)
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '1')")
            current = 1
        if current > SCHEMA_VERSION:
            raise EvalnbError(
                f"this store uses schema version {current}, newer than this evalnb understands "
                f"({SCHEMA_VERSION}); upgrade evalnb to open it"
            )
        while current < SCHEMA_VERSION:
            migrate = MIGRATIONS.get(current)
            if migrate is None:
                raise EvalnbError(f"no migration from store schema version {current} to {current + 1}")
            migrate(conn)
            current += 1
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(current),))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return current
