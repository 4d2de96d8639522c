"""Failures that will hit every remaining call: found early, stopped, and said why.

A wrong key (401/403), a URL nobody answers (refused or unresolvable, after its retries), a
model or path the server does not have (404) or a server that fails every call (5xx, timeouts)
fails each of a model's calls the same way. Sending them all costs minutes and, against a paid
endpoint, money, and says nothing the first few did not. So:

- **Up front** (`check_keys`, `judge_needed`): a key variable that is unset, or a grader that
  calls ``ctx.responses_create`` in a run without ``judge_model``, is known before any call.
- **While running** (`FailFast`): after `STOP_AFTER` consecutive failures of one model of the
  same kind with no success in between, that model's remaining calls are not made; after
  `STOP_AFTER` grader failures of one task with one and the same message and no success, that
  task's remaining calls are not made. What was not run is marked so, with the reason; a
  `resume` sends it again (`resendable`).

Failures of one sample's own making (a 400 for that prompt, a 429 the retries absorb, a grader
error for that answer) never stop anything.
"""

from __future__ import annotations

import ast
import os
from collections import Counter
from typing import Any, Iterable

STOP_AFTER = 3  # consecutive failures of one kind (no success between) that stop a model or task

# kinds of failure that will hit every call of a model: (test on status, test on message)
_KINDS = (
    ("auth", lambda s, m: s in (401, 403)),
    ("not found", lambda s, m: s == 404),
    ("connection", lambda s, m: s is None and "connection error" in m),
    ("timeout", lambda s, m: s is None and "timed out" in m),
    ("server error", lambda s, m: s is not None and 500 <= s <= 599),
)
# a failed sample whose error is one of these is the provider's or the transport's doing, not
# the sample's: resume sends it again (a stopped model's samples are "not run" and go again too)
_RESEND_STATUS = frozenset({401, 403, 404, 408, 409, 429})


def failure_kind(status: int | None, message: str) -> str | None:
    """The model-wide kind of a failed call ("auth", "connection", ...), or None for one that
    may be the sample's own (a 400, a 422, a 429 left after retries)."""
    text = message or ""
    for kind, test in _KINDS:
        if test(status, text):
            return kind
    return None


def resendable(error: Any) -> bool:
    """Whether a failed sample failed for the transport's or provider's reasons (a resume sends
    it again) rather than its own (a 400 for that prompt, an extraction or grader error)."""
    if not isinstance(error, dict):
        return False
    stage = error.get("stage")
    if stage == "not_run":
        return True
    if stage != "generation":
        return False
    if error.get("retryable"):
        return True
    status = error.get("status")
    if status is None:  # connection errors and timeouts carry no status
        return failure_kind(None, str(error.get("message") or "")) is not None
    return status in _RESEND_STATUS or 500 <= int(status) <= 599


class FailFast:
    """Counts failures as they come and says when a model or a task should stop (see module doc)."""

    def __init__(self, stop_after: int = STOP_AFTER) -> None:
        self.stop_after = stop_after
        self.stopped_models: dict[str, str] = {}  # model label -> why its calls stopped
        self.stopped_tasks: dict[str, str] = {}  # task id -> why its calls stopped
        self._model_streak: dict[str, tuple[str | None, int]] = {}
        self._task_streak: dict[str, tuple[str | None, int]] = {}
        self._task_ok: set[str] = set()
        self.reasons: Counter[str] = Counter()  # failed and not-run samples by reason, for the display

    # ---- generation --------------------------------------------------------------------------
    def call_failed(self, label: str, status: int | None, message: str) -> str | None:
        """A model call failed for good (after its retries): the stop reason if this stops the model."""
        kind = failure_kind(status, message)
        previous, count = self._model_streak.get(label, (None, 0))
        count = count + 1 if kind is not None and kind == previous else (1 if kind is not None else 0)
        self._model_streak[label] = (kind, count)
        if kind is None or count < self.stop_after or label in self.stopped_models:
            return None
        reason = (f"model {label!r} stopped after {count} consecutive failed calls ({kind}): "
                  f"{_short(_without_label(message, label))}")
        self.stopped_models[label] = reason
        return reason

    def call_succeeded(self, label: str) -> None:
        self._model_streak[label] = (None, 0)

    # ---- grading ------------------------------------------------------------------------------
    def grade_failed(self, task_id: str, message: str) -> str | None:
        """A grader failed on a sample: the stop reason if its task fails the same way every time."""
        if task_id in self._task_ok:
            return None
        previous, count = self._task_streak.get(task_id, (None, 0))
        count = count + 1 if message == previous else 1
        self._task_streak[task_id] = (message, count)
        if count < self.stop_after or task_id in self.stopped_tasks:
            return None
        reason = (f"task {task_id!r} stopped: its grader failed the first {count} samples the same way: "
                  f"{_short(message)}")
        self.stopped_tasks[task_id] = reason
        return reason

    def grade_succeeded(self, task_id: str) -> None:
        self._task_ok.add(task_id)  # one success: the grader works, its errors are the samples' own

    def stop_reason(self, task_id: str, label: str) -> str | None:
        """Why a (task, model) sample must not be called now, or None."""
        return self.stopped_models.get(label) or self.stopped_tasks.get(task_id)

    # ---- reporting ----------------------------------------------------------------------------
    def count(self, reason: str) -> None:
        self.reasons[_short(reason, 160)] += 1

    def top(self, n: int = 3) -> list[tuple[str, int]]:
        return self.reasons.most_common(n)


def top_reasons_text(reasons: Iterable[tuple[str, int]]) -> str:
    """``401 ... (97); connection refused (3)``: the top reasons with their counts, one line."""
    return "; ".join(f"{_short(reason, 160)} ({n})" for reason, n in reasons)


def missing_keys(models: Iterable[Any]) -> str | None:
    """What is wrong when a model's key variable is unset (no key given in code), or None."""
    missing: dict[str, list[str]] = {}
    for m in models:
        if m is None or getattr(m, "api_key", None):
            continue
        env = m.key_env
        if env and not os.environ.get(env):
            missing.setdefault(env, []).append(f"{m.name} at {m.base_url}")
    if not missing:
        return None
    return "; ".join(f"environment variable {var} is not set (the API key for {', '.join(who)})"
                     for var, who in missing.items())


def judge_needed(task: Any) -> int | None:
    """The line of a ``ctx.responses_create`` call in a task's grader source (None when there is
    none to see): such a grader fails every sample of a run without ``judge_model``."""
    source = getattr(task.grader, "source", None)
    if not source:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "responses_create":
            return node.lineno
    return None


def _without_label(message: str, label: str) -> str:
    prefix = f"{label}: "
    return message[len(prefix):] if message.startswith(prefix) else message


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
