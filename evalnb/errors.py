"""The small error hierarchy every user-facing failure belongs to.

Each error a user can cause names what went wrong and where (task, row, field, file, line),
so a notebook shows one readable sentence instead of a traceback from deep inside.
"""

from __future__ import annotations

from typing import Any


class EvalnbError(Exception):
    """Base class of every error evalnb raises on purpose."""


class ManifestError(EvalnbError, ValueError):
    """A manifest broke one or more rules; ``.errors`` lists every problem with its location."""

    def __init__(self, errors: list[dict[str, Any]]):
        self.errors = list(errors)
        lines = [f"{e['loc']}: {e['msg']}" if e.get("loc") else e["msg"] for e in self.errors]
        noun = "problem" if len(lines) == 1 else "problems"
        super().__init__(f"invalid manifest ({len(lines)} {noun}):\n  " + "\n  ".join(lines))


class DatasetError(EvalnbError, ValueError):
    """A dataset could not be read: names the task, the file and, where known, the line."""


class TemplateError(EvalnbError, ValueError):
    """A template could not be rendered (only raised for non-string templates)."""


class SandboxError(EvalnbError):
    """User code (a preprocessor or grader) failed: raised, timed out, crashed or hit a limit."""


class PreprocessError(SandboxError):
    """A preprocessor failed; names the task and the row index."""


class ProviderError(EvalnbError):
    """A model call failed for good (after retries); carries the HTTP status and server message."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False):
        self.status = status
        self.retryable = retryable
        super().__init__(message)


class MissingKeyError(EvalnbError, ValueError):
    """A model's API key variable is unset: raised before a run makes any call (each would get a 401)."""


class MissingFieldWarning(UserWarning):
    """A template names a field that none of a task's rows has: every prompt renders it as ""."""


class BudgetExhausted(EvalnbError):
    """A run's cost budget (``max_cost_usd``) has no room for another call; the run stops."""


class LmEvalImportError(EvalnbError, ValueError):
    """An lm-eval task could not be imported: names the task (or YAML) and what does not map."""


class ForeignRunError(EvalnbError, ValueError):
    """A stored run this user's evalnb did not record: its models are not sent a key unless the
    caller passes models again (``models=``) or trusts them (``trust_stored_models=True``)."""
