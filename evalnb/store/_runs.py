"""Run records: creating, updating, listing, claiming and finding runs to continue.

A mixin of `Store` (it uses the store's connection helpers); kept apart because "which runs
exist and who is running them" is its own job, with its own rules on status and ownership.
"""

from __future__ import annotations

import os
import platform
import re
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from evalnb.errors import EvalnbError
from evalnb.store._codec import SAMPLE_STATUSES, from_json, to_json
from evalnb.redaction import Redactor, model_secrets
from evalnb.store._keys import canonical_generation, canonical_json, run_signature, sanitize_models
from evalnb.store._owner import current_owner, owner_alive
from evalnb.store._scores import delete_run_scores

if TYPE_CHECKING:
    import pandas as pd

# "stopped": the run's cost budget (max_cost_usd) was reached; resume it with a larger one.
RUN_STATUSES = ("queued", "in_progress", "completed", "failed", "cancelled", "stopped")
TERMINAL_RUN_STATUSES = ("completed", "failed", "cancelled", "stopped")
RESUMABLE_RUN_STATUSES = ("queued", "in_progress", "failed", "cancelled", "stopped")
RUN_ID_RE = re.compile(r"^eval_run_[0-9a-f]{32}$")
MAX_EPOCHS = 100
# A run owned by a process on another host counts as abandoned once its heartbeat (written
# every ~15 s while it runs) is this old: this machine cannot look that process up.
STALE_AFTER_S = 120

# Fields `update_run` may change.
UPDATABLE_RUN_FIELDS = frozenset({"status", "started_at", "completed_at", "error", "metadata", "summary", "concurrency", "name"})
RUN_JSON_FIELDS = ("models", "generation", "task_ids", "metadata", "versions", "summary")
_RUN_COLUMNS = (
    "run_id", "suite_version", "status", "models", "generation", "task_ids", "max_samples", "concurrency",
    "judge_model", "embedding_model", "signature", "metadata", "versions", "summary", "error", "owner_pid",
    "owner_host", "owner_token", "created_at", "started_at", "completed_at", "updated_at", "epochs", "name",
)
MAX_RUN_NAME = 200
_PACKAGES = ("evalnb", "pydantic", "httpx", "pandas", "numpy", "datasets", "regex")

# Runs this process is executing right now: find_resumable_run never hands one of them out,
# even though their owner (this process) is alive.
_ACTIVE_RUNS: set[str] = set()
_ACTIVE_LOCK = threading.Lock()


class UnknownRunError(EvalnbError, KeyError):
    """No run with this id in the store."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown run"


class UnknownSuiteError(EvalnbError, KeyError):
    """No suite version with this id in the store."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown suite version"


def new_run_id() -> str:
    return f"eval_run_{uuid.uuid4().hex}"


def _now() -> int:
    return int(time.time())


def error_text(error: Any) -> str | None:
    """A run/task error as stored: text (exceptions as "Type: message", dicts as JSON)."""
    if error is None:
        return None
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}"
    return error if isinstance(error, str) else to_json(error)


@lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    """Versions that can change results, recorded on every run for reproducibility."""
    found: dict[str, str] = {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": f"{sys.platform}-{platform.machine()}",
    }
    listed = _dist_info_versions()
    for name in _PACKAGES:
        if name in listed:
            found[name] = listed[name]
            continue
        from importlib.metadata import PackageNotFoundError, version

        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def _dist_info_versions() -> dict[str, str]:
    """Versions read off the ``<name>-<version>.dist-info`` folder names on sys.path.

    One directory listing per path entry instead of `importlib.metadata`'s search per
    package (~3 ms each, on every run's start); the first entry for a name wins, as in imports.
    """
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for folder in names:
            stem = folder[: -len(".dist-info")] if folder.endswith(".dist-info") else ""
            if stem.count("-") == 1:  # wheel rule: the name's own dashes are underscores
                name, version = stem.split("-")
                found.setdefault(re.sub(r"[-_.]+", "-", name).lower(), version)
    return found


def check_run_status(status: Any) -> str:
    if status not in RUN_STATUSES:
        raise ValueError(f"run status must be one of {', '.join(RUN_STATUSES)}; got {status!r}")
    return status


def check_concurrency(concurrency: Any) -> int:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= 25:
        raise ValueError(f"concurrency must be an integer from 1 to 25, got {concurrency!r}")
    return concurrency


def check_epochs(epochs: Any) -> int:
    if isinstance(epochs, bool) or not isinstance(epochs, int) or not 1 <= epochs <= MAX_EPOCHS:
        raise ValueError(f"epochs must be an integer from 1 to {MAX_EPOCHS}, got {epochs!r}")
    return epochs


def check_name(name: Any) -> str | None:
    """A run name: a label people read (`evalnb runs`), 1-200 characters, or None."""
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"run name must be a non-empty string, got {name!r}")
    if len(name) > MAX_RUN_NAME:
        raise ValueError(f"run name must be at most {MAX_RUN_NAME} characters (found {len(name)})")
    return name


def check_metadata(metadata: Any) -> dict[str, Any]:
    """Run metadata: keys of 1-64 characters, string values of at most 512."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise ValueError(f"run metadata must be a dict, got {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str) or not key or len(key) > 64:
            raise ValueError(f"run metadata key {key!r}: must be a string of 1-64 characters")
        if isinstance(value, str) and len(value) > 512:
            raise ValueError(f"run metadata[{key!r}]: value longer than 512 characters ({len(value)})")
    return metadata


def run_identifiers(models: Iterable[Mapping[str, Any]], task_ids: Iterable[str] | None = ()) -> frozenset[str]:
    """A run's model labels and names and its task ids, which its samples hold as written: its
    records keep them as written too, unless one is shaped like a key (then it is masked)."""
    names = {str(m.get(k)) for m in models for k in ("label", "name") if m.get(k)} | set(task_ids or ())
    shapes = Redactor()  # no known secrets: key shapes only
    return frozenset(n for n in names if shapes.text(n) == n)


def _owner_gone(pid: int | None, host: str | None, token: str | None, updated: int | None, me: Any) -> bool:
    """Has a run's recorded owner stopped? On this host by its pid; elsewhere by its heartbeat."""
    if host and host != me.host:
        return _now() - int(updated or 0) >= STALE_AFTER_S
    return not owner_alive(pid, host, token)


class RunRecords:
    """The run half of `Store` (needs `_rows`, `_transaction`, `_scrub`, `_redactor`, `add_secrets`, `path`)."""

    def create_run(
        self,
        suite_version: str,
        *,
        models: Iterable[Any],
        generation: Mapping[str, Any] | None = None,
        task_ids: Iterable[str] | None = None,
        max_samples: int | None = None,
        concurrency: int | None = None,
        judge_model: str | None = None,
        embedding_model: str | None = None,
        metadata: dict[str, Any] | None = None,
        manifest: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        status: str = "queued",
        epochs: int = 1,
        name: str | None = None,
        judge_generation: Mapping[str, Any] | None = None,
    ) -> str:
        """Record a new run owned by this process and return its id (`eval_run_<32 hex>`).

        `models` may be `evalnb.Model` objects or dicts: only name/base_url/api/label are kept,
        never api keys or headers (their values are also masked wherever else they appear).
        `manifest`, when given, is saved as the suite version first. `epochs`: how many times
        each item is asked (part of what makes two runs the same run), as is `judge_generation`
        (the defaults of the graders' model calls).
        """
        models = list(models)
        for model in models:
            self.add_secrets(*model_secrets(model))
        clean_models = sanitize_models(models)
        if manifest is not None:
            self.save_suite(suite_version, manifest)
        elif not self.has_suite(suite_version):
            raise UnknownSuiteError(f"suite version {suite_version!r} is not stored; save_suite() it first")
        gen = self._scrub(canonical_generation(generation))
        tasks = list(task_ids) if task_ids is not None else None
        if tasks is not None and (not tasks or not all(isinstance(t, str) and t for t in tasks)):
            raise ValueError("task_ids must be a non-empty list of task id strings (or None for all)")
        if max_samples is not None and (isinstance(max_samples, bool) or not isinstance(max_samples, int) or max_samples < 1):
            raise ValueError(f"max_samples must be a positive integer or None, got {max_samples!r}")
        if concurrency is not None:
            check_concurrency(concurrency)
        meta = self._scrub(check_metadata(metadata))
        name = self._scrub(check_name(name))
        check_run_status(status)
        check_epochs(epochs)
        run_id = run_id or new_run_id()
        if not RUN_ID_RE.match(run_id):
            raise ValueError(f"run id {run_id!r} must look like eval_run_<32 hex digits>")
        signature = run_signature(suite_version, clean_models, gen, tasks, max_samples, judge_model, embedding_model,
                                  epochs=epochs, judge_generation=self._scrub(canonical_generation(judge_generation)))
        owner = current_owner()
        now = _now()
        with self._transaction() as conn:
            if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone():
                raise ValueError(f"run {run_id} already exists")
            conn.execute(
                "INSERT INTO runs (run_id, suite_version, status, models, generation, task_ids, max_samples, "
                "concurrency, judge_model, embedding_model, signature, metadata, versions, owner_pid, owner_host, "
                "owner_token, created_at, started_at, updated_at, epochs, name) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id, suite_version, status, to_json(self._scrub(clean_models, run_identifiers(clean_models, tasks))), canonical_json(gen),
                    None if tasks is None else to_json(tasks), max_samples, concurrency,
                    self._scrub(judge_model), self._scrub(embedding_model), signature, to_json(meta), to_json(package_versions()), owner.pid,
                    owner.host, owner.token, now, now if status == "in_progress" else None, now, epochs, name,
                ),
            )
        if status not in TERMINAL_RUN_STATUSES:
            with _ACTIVE_LOCK:
                _ACTIVE_RUNS.add(run_id)
        return run_id

    def _identifiers_of(self, run_id: str, conn: Any = None) -> frozenset[str]:
        """`run_identifiers` of a stored run (its models column; task ids from its summary's plan)."""
        sql = "SELECT models, task_ids, summary FROM runs WHERE run_id = ?"
        row = conn.execute(sql, (run_id,)).fetchone() if conn is not None else next(iter(self._rows(sql, (run_id,))), None)
        if row is None:
            return frozenset()
        summary = from_json(row[2]) or {}
        tasks = [*(from_json(row[1]) or []), *(summary.get("planned") or {})]
        models = [m for m in (from_json(row[0]) or []) if isinstance(m, Mapping)]
        return run_identifiers(models, [t for t in tasks if isinstance(t, str)])

    def update_run(self, run_id: str, **fields: Any) -> None:
        """Change a run's status, timestamps, error, metadata, summary or concurrency.

        A terminal status sets `completed_at` (unless given) and releases the run from this
        process; `in_progress` sets `started_at` the first time.
        """
        unknown = sorted(set(fields) - UPDATABLE_RUN_FIELDS)
        if unknown:
            raise ValueError(f"cannot update run field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(UPDATABLE_RUN_FIELDS))}")
        now = _now()
        status = fields.get("status")
        sets: dict[str, Any] = {}
        if "status" in fields:
            sets["status"] = check_run_status(status)
            if status in TERMINAL_RUN_STATUSES and "completed_at" not in fields:
                sets["completed_at"] = now
        for name in ("started_at", "completed_at"):
            if name in fields:
                sets[name] = None if fields[name] is None else int(fields[name])
        if "error" in fields:
            sets["error"] = self._scrub(error_text(fields["error"]))
        if "metadata" in fields:
            sets["metadata"] = to_json(self._scrub(check_metadata(fields["metadata"])))
        if "summary" in fields:
            sets["summary"] = (None if fields["summary"] is None
                               else to_json(self._scrub(fields["summary"], self._identifiers_of(run_id))))
        if "concurrency" in fields:
            sets["concurrency"] = check_concurrency(fields["concurrency"])
        if "name" in fields:
            sets["name"] = self._scrub(check_name(fields["name"]))
        assignments = [f"{name} = ?" for name in sets]
        params: list[Any] = list(sets.values())
        if status == "in_progress" and "started_at" not in fields:
            assignments.append("started_at = COALESCE(started_at, ?)")  # the first start counts
            params.append(now)
        assignments.append("updated_at = ?")
        params.append(now)
        with self._transaction() as conn:
            cur = conn.execute(f"UPDATE runs SET {', '.join(assignments)} WHERE run_id = ?", (*params, run_id))
            if cur.rowcount == 0:
                raise UnknownRunError(f"unknown run {run_id!r} (not in {self.path})")
        if status in TERMINAL_RUN_STATUSES:
            with _ACTIVE_LOCK:
                _ACTIVE_RUNS.discard(run_id)

    def _decode_run(self, row: tuple[Any, ...]) -> dict[str, Any]:
        run = dict(zip(_RUN_COLUMNS, row))
        for name in RUN_JSON_FIELDS:
            run[name] = from_json(run[name])
        run["owner"] = {"pid": run.pop("owner_pid"), "host": run.pop("owner_host")}
        run.pop("owner_token")
        return run

    def get_run(self, run_id: str) -> dict[str, Any]:
        """The run record, with live sample `counts` ({"total": n, "<status>": n, ...})."""
        rows = self._rows(f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs WHERE run_id = ?", (run_id,))
        if not rows:
            raise UnknownRunError(f"unknown run {run_id!r} (not in {self.path})")
        run = self._decode_run(rows[0])
        run["counts"] = self.sample_counts(run_id)
        return run

    def sample_counts(self, run_id: str) -> dict[str, int]:
        """{"total": n, "completed": n, "failed": n, ...} for every sample status."""
        counts = dict.fromkeys((x for x in SAMPLE_STATUSES if x != "not_run"), 0)  # not_run: only when there are
        for status, n in self._rows("SELECT status, count(*) FROM samples WHERE run_id = ? GROUP BY status", (run_id,)):
            counts[status] = n
        return {"total": sum(counts.values()), **counts}

    def list_runs(self, *, suite_version: str | None = None, status: str | None = None, limit: int | None = None) -> pd.DataFrame:
        """Runs, newest first: one row each, with sample counts and UTC datetimes.

        ``n_planned``: the samples the run set out to make; ``n_samples`` those it made
        (completed, failed or not graded yet); ``n_not_run`` the rest (<NA> for a run recorded
        before plans were, unless it marked samples not run).
        """
        import pandas as pd

        where, params = [], []
        if suite_version is not None:
            where.append("r.suite_version = ?")
            params.append(suite_version)
        if status is not None:
            where.append("r.status = ?")
            params.append(check_run_status(status))
        sql = (
            "SELECT r.run_id, r.name, r.suite_version, r.status, r.models, r.task_ids, r.judge_model, r.created_at, "
            "r.started_at, r.completed_at, r.error, r.metadata, "
            "(SELECT count(*) FROM samples s WHERE s.run_id = r.run_id AND s.status != 'not_run'), "
            "(SELECT count(*) FROM samples s WHERE s.run_id = r.run_id AND s.status = 'completed'), "
            "(SELECT count(*) FROM samples s WHERE s.run_id = r.run_id AND s.status = 'failed'), "
            "(SELECT count(*) FROM samples s WHERE s.run_id = r.run_id AND s.status = 'not_run'), "
            "r.summary "
            "FROM runs r" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY r.created_at DESC, r.rowid DESC"
        )
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        records = []
        for (rid, name, sver, st, models, tasks, judge, created, started, completed, error, meta, n, n_ok, n_failed,
             n_marked, summary) in self._rows(sql, params):
            planned = _planned_total(summary)
            records.append(
                {
                    "run_id": rid, "name": name, "suite_version": sver, "status": st,
                    "models": ", ".join(m["label"] for m in from_json(models)),
                    "tasks": ", ".join(from_json(tasks)) if tasks else "(all)",
                    "n_planned": planned, "n_samples": n, "n_completed": n_ok, "n_failed": n_failed,
                    # marked not run (a stopped model), or never reached (cancelled, budget)
                    "n_not_run": (n_marked or None) if planned is None else max(planned - n, 0),
                    "created_at": created, "started_at": started, "completed_at": completed,
                    "duration_s": (completed - started) if completed is not None and started is not None else None,
                    "judge_model": judge, "error": error, "metadata": from_json(meta),
                }
            )
        columns = [
            "run_id", "name", "suite_version", "status", "models", "tasks", "n_planned", "n_samples", "n_completed",
            "n_failed", "n_not_run", "created_at", "started_at", "completed_at", "duration_s", "judge_model", "error",
            "metadata",
        ]
        frame = pd.DataFrame.from_records(records, columns=columns)
        for name in ("n_planned", "n_not_run"):  # <NA> for a run recorded before plans were
            frame[name] = pd.array([r[name] for r in records], dtype="Int64")
        frame["name"] = pd.Series([r["name"] for r in records], dtype="object")  # None stays None, not NaN
        for name in ("created_at", "started_at", "completed_at"):
            frame[name] = pd.to_datetime(frame[name], unit="s", utc=True)
        frame["duration_s"] = frame["duration_s"].astype("Float64")
        return frame

    def set_planned(self, run_id: str, planned: dict[str, dict[str, int]]) -> None:
        """Record how many samples a run plans per task and model (``{task: {model: n}}``, items x
        epochs): what `list_runs` and the metrics count the samples never run against."""
        with self._transaction() as conn:
            row = conn.execute("SELECT summary FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                raise UnknownRunError(f"unknown run {run_id!r} (not in {self.path})")
            summary = from_json(row[0]) or {}
            summary["planned"] = {str(t): {str(m): int(n) for m, n in per.items()} for t, per in planned.items()}
            # planned's keys are task ids and model labels: stored as the samples hold them
            conn.execute("UPDATE runs SET summary = ? WHERE run_id = ?",
                         (to_json(self._scrub(summary, self._identifiers_of(run_id, conn))), run_id))

    def planned(self, run_id: str) -> dict[str, dict[str, int]] | None:
        """`set_planned`'s counts ({task: {model: n}}), or None for a run recorded before them."""
        rows = self._rows("SELECT summary FROM runs WHERE run_id = ?", (run_id,))
        if not rows:
            raise UnknownRunError(f"unknown run {run_id!r} (not in {self.path})")
        return (from_json(rows[0][0]) or {}).get("planned")

    def failure_reasons(self, run_id: str, limit: int = 3) -> list[tuple[str, int]]:
        """The commonest reasons samples failed or were not run, with their counts, most first:
        what the CLI, the result's repr and the panel show instead of only "60 failed"."""
        rows = self._rows(
            "SELECT json_extract(error, '$.message') AS m, count(*) AS n FROM samples "
            "WHERE run_id = ? AND status IN ('failed', 'not_run') AND error IS NOT NULL "
            "GROUP BY m ORDER BY n DESC, m LIMIT ?", (run_id, int(limit)))
        return [(str(m), int(n)) for m, n in rows if m is not None]

    def failed_errors(self, run_id: str) -> list[tuple[str, str, int, int, Any]]:
        """(task_id, model, sample_index, epoch, error) of every failed or not-run sample of a run."""
        return [(t, m, i, e, from_json(err)) for t, m, i, e, err in self._rows(
            "SELECT task_id, model, sample_index, epoch, error FROM samples WHERE run_id = ? "
            "AND status IN ('failed', 'not_run')", (run_id,))]

    def latest_run_id(self) -> str | None:
        """The id of the newest run (by creation time), or None when the store has none."""
        rows = self._rows("SELECT run_id FROM runs ORDER BY created_at DESC, rowid DESC LIMIT 1")
        return rows[0][0] if rows else None

    def claim_run(self, run_id: str, *, force: bool = False, reopen: bool = False) -> dict[str, Any]:
        """Make this process the owner of a run to continue it: status `in_progress`, error cleared.

        Refuses a completed run (unless ``reopen``: a resume that sends its failed samples
        again), and a run whose owner is another live process. An owner on
        this machine is checked by pid (even `force` does not take a run from a live local
        process); one on another host counts as gone once its heartbeat (`updated_at`) is
        older than `STALE_AFTER_S`, or at once with `force=True`.
        """
        me = current_owner()
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT status, owner_pid, owner_host, owner_token, updated_at FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None:
                raise UnknownRunError(f"unknown run {run_id!r} (not in {self.path})")
            status, pid, host, token, updated = row
            if status == "completed" and not reopen:
                raise EvalnbError(f"run {run_id} is completed; nothing to continue")
            mine = pid == me.pid and host == me.host and token == me.token
            if status in ("queued", "in_progress") and not mine and not _owner_gone(pid, host, token, updated, me):
                if host and host != me.host:
                    age = _now() - int(updated or 0)
                    if not force:
                        raise EvalnbError(
                            f"run {run_id} is owned by process {pid} on host {host!r}, which this machine "
                            f"cannot check (last heartbeat {age} s ago). If that process is gone (a "
                            f"re-created container gets a new host name), take the run over with "
                            f"resume(..., force=True) / `evalnb resume --force`, or wait until the "
                            f"heartbeat is {STALE_AFTER_S} s old"
                        )
                else:
                    hint = " (force=True does not take a run from a live process on this machine)" if force else ""
                    raise EvalnbError(f"run {run_id} is still running (process {pid} on {host}){hint}")
            if mine:
                with _ACTIVE_LOCK:
                    if run_id in _ACTIVE_RUNS and status in ("queued", "in_progress"):
                        raise EvalnbError(f"run {run_id} is already running in this process")
            now = _now()
            conn.execute(
                "UPDATE runs SET status = 'in_progress', error = NULL, completed_at = NULL, "
                "started_at = COALESCE(started_at, ?), owner_pid = ?, owner_host = ?, owner_token = ?, updated_at = ? "
                "WHERE run_id = ?",
                (now, me.pid, me.host, me.token, now, run_id),
            )
        with _ACTIVE_LOCK:
            _ACTIVE_RUNS.add(run_id)
        return self.get_run(run_id)

    def heartbeat(self, run_id: str) -> None:
        """Mark a run this process owns as alive now (other hosts judge staleness by it)."""
        me = current_owner()
        with self._transaction() as conn:
            conn.execute(
                "UPDATE runs SET updated_at = ? WHERE run_id = ? AND owner_pid = ? AND owner_host = ? "
                "AND status IN ('queued', 'in_progress')",
                (_now(), run_id, me.pid, me.host),
            )

    def find_resumable_run(
        self,
        suite_version: str,
        *,
        models: Iterable[Any],
        generation: Mapping[str, Any] | None = None,
        task_ids: Iterable[str] | None = None,
        max_samples: int | None = None,
        judge_model: str | None = None,
        embedding_model: str | None = None,
        epochs: int = 1,
        judge_generation: Mapping[str, Any] | None = None,
    ) -> str | None:
        """The newest run of exactly this configuration that died or stopped, else None.

        Candidates: `failed`, `cancelled` or `stopped` runs, and `queued`/`in_progress` runs whose owner
        process is gone. A run still executing (in another live process, or in this one) is
        never returned. Arguments are the same as `create_run`'s.
        """
        gen = self._scrub(canonical_generation(generation))
        signature = run_signature(
            suite_version, sanitize_models(models), gen,
            list(task_ids) if task_ids is not None else None, max_samples, judge_model, embedding_model,
            epochs=check_epochs(epochs), judge_generation=self._scrub(canonical_generation(judge_generation)),
        )
        placeholders = ", ".join("?" * len(RESUMABLE_RUN_STATUSES))
        rows = self._rows(
            f"SELECT run_id, status, owner_pid, owner_host, owner_token, updated_at FROM runs WHERE signature = ? "
            f"AND status IN ({placeholders}) ORDER BY created_at DESC, rowid DESC",
            (signature, *RESUMABLE_RUN_STATUSES),
        )
        me = current_owner()
        for run_id, status, pid, host, token, updated in rows:
            with _ACTIVE_LOCK:
                if run_id in _ACTIVE_RUNS:
                    continue
            if status in ("failed", "cancelled", "stopped"):
                return run_id
            mine = pid == me.pid and host == me.host and token == me.token
            if mine or _owner_gone(pid, host, token, updated, me):
                return run_id
        return None

    def delete_run(self, run_id: str) -> None:
        """Remove a run, its samples and task metrics. Cached outputs stay (they are shared);
        `compact()` reclaims the prompts and rows nothing refers to any more."""
        with self._transaction() as conn:
            cur = conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
            if cur.rowcount == 0:
                raise UnknownRunError(f"unknown run {run_id!r} (not in {self.path})")
            delete_run_scores(conn, run_id)
            conn.execute("DELETE FROM samples WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM task_metrics WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM judge_calls WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM executor_state WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM pairwise_calls WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM pairwise_judges WHERE run_id = ?", (run_id,))
        with _ACTIVE_LOCK:
            _ACTIVE_RUNS.discard(run_id)


def _planned_total(summary: Any) -> int | None:
    """The samples a run planned in all (from its summary's ``planned``), None when not recorded."""
    planned = (from_json(summary) or {}).get("planned") if summary else None
    if not isinstance(planned, dict):
        return None
    return sum(int(n) for per in planned.values() if isinstance(per, dict) for n in per.values())
