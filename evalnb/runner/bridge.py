"""The grader bridge: model calls that user code asks for, made by the parent process.

A model-backed grader calls `ctx.responses_create` / `ctx.embeddings_create` inside its
sandbox worker; the worker forwards the request here, and this process makes the call with
the judge or embedding model's credentials, so keys never enter the sandbox. ``"auto"``
(or no model) means the run's `judge_model` / `embedding_model`; another name is sent to the
same endpoint as that model. Without an embedding model, embeddings come from the offline
default (`evalnb.runner.offline_embeddings`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from evalnb.providers.model import Model


class GraderBridge:
    """An async callable ``bridge(kind, request) -> dict`` for `evalnb.scoring.grading.Grader`."""

    def __init__(
        self,
        *,
        judge_model: Model | None,
        embedding_model: Model | None,
        client_factory: Callable[[Model], Any],
    ):
        self.judge_model = judge_model
        self.embedding_model = embedding_model
        self._client_factory = client_factory
        self._clients: dict[Model, Any] = {}
        self.calls = 0

    def _client(self, base: Model, requested: Any) -> Any:
        model = base
        if isinstance(requested, str) and requested not in ("", "auto") and requested != base.name:
            model = dataclasses.replace(base, name=requested, label=requested)
        client = self._clients.get(model)
        if client is None:
            client = self._clients[model] = self._client_factory(model)
        return client

    async def __call__(self, kind: str, request: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        requested = request.get("model", "auto")
        if kind == "responses":
            if self.judge_model is None:
                raise RuntimeError(
                    "ctx.responses_create needs a judge model: pass judge_model=... to evalnb.run"
                )
            return await self._client(self.judge_model, requested).responses_raw(dict(request))
        if kind == "embeddings":
            if self.embedding_model is None:
                from evalnb.runner import offline_embeddings

                return await offline_embeddings.embeddings_reply(request)
            params = {k: v for k, v in request.items() if k not in ("model", "input")}
            client = self._client(self.embedding_model, requested)
            return await client.embeddings(request.get("input"), **params)
        raise ValueError(f"unknown bridge call {kind!r}")
