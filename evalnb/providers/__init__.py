"""Calling candidate models on OpenAI-compatible servers (Responses API or Chat Completions).

- `Model`: which model, where, which API; the key is read at call time and never shown.
- `ModelClient`: ``await client.complete(prompt, gen) -> Completion`` with retries, rate-limit
  handling and empty-output retries; ``embeddings`` and ``responses_raw`` for graders.
- `ClientPool`: a run's HTTP connections, shared by every model on a server (httpx's own
  client for ``https://`` and proxied servers; a lean keep-alive path for direct ``http://``).
- `AdaptiveLimit`: concurrency that halves on 429s and recovers on success (AIMD).
- `retry`: the retry policy as pure functions.

The HTTP parts load on first use of `ModelClient`, `ClientPool` or `Completion` (httpx itself
only once a request needs it: ``https://``, a proxy, or an error; see `http_clients`), so
``evalnb.Model`` stays cheap to import.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from evalnb.providers.aimd import AdaptiveLimit
from evalnb.providers.build import build_chat_request, build_responses_request, unsent_fields
from evalnb.providers.model import Model
from evalnb.providers.parse import Reply, normalise_usage, parse_chat, parse_responses
from evalnb.providers.retry import backoff_delay, is_retryable_status, next_delay, parse_retry_after

_LAZY = {
    "ModelClient": "evalnb.providers.client",
    "Completion": "evalnb.providers.client",
    "ClientPool": "evalnb.providers.http_clients",
}

__all__ = [
    "AdaptiveLimit",
    "ClientPool",
    "Completion",
    "Model",
    "ModelClient",
    "Reply",
    "backoff_delay",
    "build_chat_request",
    "build_responses_request",
    "is_retryable_status",
    "next_delay",
    "normalise_usage",
    "parse_chat",
    "parse_responses",
    "parse_retry_after",
    "unsent_fields",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'evalnb.providers' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover
    from evalnb.providers.client import Completion, ModelClient
    from evalnb.providers.http_clients import ClientPool
