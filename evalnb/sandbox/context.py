"""The ``ctx`` a grader receives when its function takes one: run facts and bridged model calls.

``ctx.responses_create`` / ``ctx.embeddings_create`` never hold a key: they send the request
to the parent, which makes the call. The checks here (model access, max_model_calls) give
user code an early, catchable error; the parent repeats them and its count is the one that
counts. This module imports only the standard library because the worker loads it by path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class ModelAccessError(RuntimeError):
    """ctx model helpers were called by a grader whose model_access is "none"."""


class ModelCallLimitError(RuntimeError):
    """The grader execution already made max_model_calls bridge calls."""


class ModelCallError(RuntimeError):
    """The parent could not complete a model call (provider error, timeout, refused)."""


class Context:
    """Passed as the trailing ``ctx`` argument of ``grade`` / ``grade_batch`` when accepted."""

    __slots__ = ("task_id", "model", "run_id", "metadata", "_send", "_access", "_limit", "_used")

    def __init__(self, info: dict, send: Callable[[str, dict], dict], access: bool, limit: int) -> None:
        self.task_id = info.get("task_id")
        self.model = info.get("model")
        self.run_id = info.get("run_id")
        self.metadata = info.get("metadata") or {}
        self._send, self._access, self._limit, self._used = send, access, limit, 0

    def responses_create(self, model: str = "auto", input: Any = None, **kwargs: Any) -> dict:
        """Call the Responses API through the parent; returns its JSON (with ``output_text``)."""
        return self._call("responses", {**kwargs, "model": model, "input": input})

    def embeddings_create(self, model: str = "auto", input: Any = None, **kwargs: Any) -> dict:
        """Call the Embeddings API through the parent; returns its JSON."""
        return self._call("embeddings", {**kwargs, "model": model, "input": input})

    def _call(self, kind: str, request: dict) -> dict:
        if not self._access:
            raise ModelAccessError(
                f"ctx.{kind}_create is disabled: this grader has model_access 'none' (set model_access: mka1)"
            )
        if self._used >= self._limit:
            raise ModelCallLimitError(f"max_model_calls ({self._limit}) reached for this grader execution")
        self._used += 1
        return self._send(kind, request)

    def __repr__(self) -> str:
        return f"Context(task_id={self.task_id!r}, model={self.model!r}, run_id={self.run_id!r})"
