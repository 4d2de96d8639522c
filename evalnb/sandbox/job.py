"""What the pool runs: user code, a job description and per-call results.

Also the small spec accessor shared by preprocessors and graders, so either the manifest's
pydantic models or plain dicts work.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from ..errors import SandboxError


def spec_value(spec: Any, name: str, default: Any = None) -> Any:
    """``spec.name`` for a model, ``spec[name]`` for a dict; ``default`` when missing or None."""
    if spec is None:
        return default
    value = spec.get(name) if isinstance(spec, dict) else getattr(spec, name, None)
    return default if value is None else value


@dataclass(frozen=True)
class UserCode:
    """Python source plus the file name its tracebacks and error lines refer to."""

    source: str
    filename: str
    key: str = field(init=False)

    def __post_init__(self) -> None:
        digest = hashlib.sha256(f"{self.filename}\0{self.source}".encode("utf-8", "surrogatepass")).hexdigest()
        object.__setattr__(self, "key", digest)

    def wire(self) -> dict[str, str]:
        return {"key": self.key, "source": self.source, "filename": self.filename}


def user_code_from_spec(spec: Any, *, what: str, task_id: str) -> UserCode:
    """The code of a preprocess/grader spec: inline ``source`` or an uploaded ``file_id``."""
    source, file_id = spec_value(spec, "source"), spec_value(spec, "file_id")
    if source is not None and file_id is not None:
        raise SandboxError(f"task {task_id!r}: {what} has both source and file_id; give exactly one")
    if source is not None:
        if not isinstance(source, str):
            raise SandboxError(f"task {task_id!r}: {what} source must be a string, got {type(source).__name__}")
        return UserCode(source, f"<{what} of task {task_id}>")
    if file_id is None:
        raise SandboxError(f"task {task_id!r}: {what} needs source or file_id")
    from evalnb.data import upload_store  # lazy: the file store is only needed for uploaded code

    try:
        text = upload_store.read_text(file_id)
    except Exception as exc:  # noqa: BLE001 - DatasetError, OSError, UnicodeDecodeError
        raise SandboxError(f"task {task_id!r}: {what} file {file_id!r} could not be read: {exc}") from None
    return UserCode(text, f"<{what} of task {task_id} (file {file_id})>")


@dataclass(frozen=True)
class Job:
    """One kind of call: which code, which function names, how many arguments, which limits."""

    code: UserCode
    names: tuple[str, ...]
    nargs: int
    timeout: float = 120.0
    ctx: dict[str, Any] | None = None  # None: never pass ctx
    model_access: bool = False
    max_model_calls: int = 0
    fail_fast: bool = False
    unpack: dict[str, Any] | None = None  # compact argument form the worker expands (see worker.py)

    def wire(self, cpu_seconds: float | None) -> dict[str, Any]:
        return {
            "code": self.code.wire(), "names": list(self.names), "nargs": self.nargs,
            "timeout": self.timeout, "cpu_seconds": cpu_seconds, "ctx": self.ctx,
            "model_access": self.model_access, "max_model_calls": self.max_model_calls,
            "fail_fast": self.fail_fast, "unpack": self.unpack,
        }  # fmt: skip


@dataclass(slots=True)
class CallResult:
    """The outcome of one call: the JSON value it returned, or the error message."""

    ok: bool
    value: Any = None
    error: str | None = None
    skipped: bool = False  # never ran: the batch stopped early (fail-fast, fatal error, broken worker)
    log: str | None = None  # what the call printed to sys.stdout/sys.stderr (its last few KB)


class CodeLoadError(SandboxError):
    """The job's code did not load (syntax error, exception at import, crash, missing function)."""

    def __init__(self, message: str, *, line: int | None = None, missing: bool = False):
        super().__init__(message)
        self.message = message
        self.line = line
        self.missing = missing
