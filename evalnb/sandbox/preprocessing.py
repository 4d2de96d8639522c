"""Preprocessors: a task's Python ``row`` or ``batch`` transform, run in the sandbox.

A preprocessor that fails stops its task before any model is called, so every failure is a
PreprocessError that names the task and, for the row contract, the row index.
"""

from __future__ import annotations

import threading
from typing import Any

from ..errors import PreprocessError, SandboxError
from evalnb.aio import run_sync
from .job import CodeLoadError, Job, spec_value, user_code_from_spec
from .pool import SandboxPool

ROW_FUNCTIONS = ("transform_row", "transform", "process_doc")
BATCH_FUNCTIONS = ("transform_batch", "process_docs")
EXPECTED = "a dict, a list of dicts, or None"

_default_pool: SandboxPool | None = None
_default_lock = threading.Lock()


def default_pool() -> SandboxPool:
    """The process-wide pool used when no pool is passed (created on first use)."""
    global _default_pool
    with _default_lock:
        if _default_pool is None or _default_pool.closed:
            _default_pool = SandboxPool()
        return _default_pool


def preprocess(task: Any, rows: list[dict], *, pool: SandboxPool | None = None) -> list[dict]:
    """The seam ``evalnb.suite.items`` calls: apply ``task.preprocess`` (if any) to ``rows``."""
    spec = spec_value(task, "preprocess")
    if spec is None:
        return list(rows)
    return run_preprocessor(spec, rows, task_id=str(spec_value(task, "id", "?")), pool=pool)


def run_preprocessor(spec: Any, rows: list[dict], *, task_id: str, pool: SandboxPool | None = None) -> list[dict]:
    """Run a preprocess spec over ``rows`` in the sandbox; works with or without a running loop."""
    return run_sync(arun_preprocessor(spec, rows, task_id=task_id, pool=pool))


async def arun_preprocessor(
    spec: Any, rows: list[dict], *, task_id: str, pool: SandboxPool | None = None
) -> list[dict]:
    """Async form of :func:`run_preprocessor`."""
    rows = list(rows)
    if spec is None:
        return rows
    contract, job = _job(spec, task_id)
    if not rows:
        return []
    calls = [[row] for row in rows] if contract == "row" else [[rows]]
    try:
        results = await (pool or default_pool()).run(job, calls)
    except CodeLoadError as exc:
        raise _load_error(exc, contract, job, task_id) from None
    failed = [(i, r) for i, r in enumerate(results) if not r.ok]
    if failed:
        index, result = next(((i, r) for i, r in failed if not r.skipped), failed[0])
        where = f" on row {index}" if contract == "row" else ""
        raise PreprocessError(f"task {task_id!r}: the preprocessor failed{where}: {result.error}")
    out: list[dict] = []
    for index, result in enumerate(results):
        out.extend(_rows(result.value, task_id, index if contract == "row" else None))
    return out


async def check_preprocessor(spec: Any, *, task_id: str, pool: SandboxPool | None = None) -> None:
    """Load the preprocessor in a worker and find its function, without running it on a row."""
    contract, job = _job(spec, task_id)
    try:
        await (pool or default_pool()).check(job)
    except CodeLoadError as exc:
        raise _load_error(exc, contract, job, task_id) from None


def _load_error(exc: CodeLoadError, contract: str, job: Job, task_id: str) -> PreprocessError:
    if exc.missing:
        return PreprocessError(
            f"task {task_id!r}: the preprocessor (contract {contract!r}) defines none of the "
            f"accepted functions: {', '.join(job.names)}"
        )
    return PreprocessError(f"task {task_id!r}: the preprocessor failed to load: {exc.message}")


def _job(spec: Any, task_id: str) -> tuple[str, Job]:
    kind = spec_value(spec, "type", "python")
    if kind != "python":
        raise PreprocessError(f"task {task_id!r}: preprocess type must be 'python', got {kind!r}")
    contract = spec_value(spec, "contract", "row")
    if contract not in ("row", "batch"):
        raise PreprocessError(f"task {task_id!r}: preprocess contract must be 'row' or 'batch', got {contract!r}")
    timeout = float(spec_value(spec, "timeout_seconds", 120))
    if not 1 <= timeout <= 600:
        raise PreprocessError(f"task {task_id!r}: preprocess timeout_seconds must be 1-600, got {timeout:g}")
    try:
        code = user_code_from_spec(spec, what="preprocessor", task_id=task_id)
    except SandboxError as exc:
        raise PreprocessError(str(exc)) from None
    names = ROW_FUNCTIONS if contract == "row" else BATCH_FUNCTIONS
    return contract, Job(code, names, nargs=1, timeout=timeout, fail_fast=True)


def _rows(value: Any, task_id: str, index: int | None) -> list[dict]:
    where = f" for row {index}" if index is not None else ""
    if value is None:
        return []
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        for position, row in enumerate(value):
            if not isinstance(row, dict):
                raise PreprocessError(
                    f"task {task_id!r}: the preprocessor returned a list{where} whose item {position} is "
                    f"{_type_name(row)}; expected {EXPECTED}"
                )
        return value
    raise PreprocessError(
        f"task {task_id!r}: the preprocessor returned {_type_name(value)}{where}; expected {EXPECTED}"
    )


def _type_name(value: Any) -> str:
    names = {str: "a string", int: "an int", float: "a float", bool: "a bool", list: "a list", dict: "a dict"}
    text = repr(value)
    return f"{names.get(type(value), type(value).__name__)} ({text[:60] + '...' if len(text) > 60 else text})"
