"""The grader bridge: model calls that user code asks for, made (and remembered) by the parent.

A model-backed grader calls `ctx.responses_create` / `ctx.embeddings_create` inside its
sandbox worker; the worker forwards the request here, and this process makes the call with
the judge or embedding model's credentials, so keys never enter the sandbox. ``"auto"``
(or no model) means the run's `judge_model` / `embedding_model`; another name is sent to the
same endpoint as that model (at that model's price). Without an embedding model, embeddings
come from the offline default (`evalnb.runner.offline_embeddings`): local, free, not cached.

What happens to a call:

1. The request is completed: the run's ``judge_generation`` (e.g. ``{"temperature": 0}``)
   gives the defaults of a Responses call, the grader's own kwargs override them, ``model``
   becomes the judge's name. That body is what is sent, keyed and stored.
2. Its key (`store.bridge_request_key`: kind, judge model, endpoint, API and body) is looked
   up in the output cache, and among identical calls of this run still in flight: a hit is
   answered without a call (``cached``, cost 0). ``reuse=False`` skips both. A grader that
   asks the very same thing again while grading one sample (e.g. to retry a reply it could
   not parse) wants a new answer: its n-th repeat gets a key of its own.
3. Otherwise the budget is asked (`Budget.reserve`), the call is made, its cost worked out
   from the reply's usage at the judge's price, and the reply cached.
4. The call is recorded on the sample that made it (`BoundBridge.calls_of`), and written
   with that sample (`judge_calls` in the store).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import Counter
from typing import Any, Callable

from evalnb.errors import BudgetExhausted
from evalnb.providers.model import Model
from evalnb.providers.pricing import call_cost, estimate_tokens, worst_case_cost

IN_RUN_KEPT = 2000  # finished calls remembered in memory; older ones are answered by the store
# Generation fields that are the client's business, not the request body's.
_CLIENT_FIELDS = ("timeout_seconds", "max_retries")


class GraderBridge:
    """Makes, caches, costs and records graders' model calls for one run.

    `bind` gives the per-batch callable the sandbox pool uses (it learns which sample made
    each call); calling the bridge itself, ``await bridge(kind, request)``, makes a call that
    is not recorded on any sample.
    """

    def __init__(
        self,
        *,
        judge_model: Model | None,
        embedding_model: Model | None,
        client_factory: Callable[..., Any],
        judge_generation: dict[str, Any] | None = None,
        store: Any = None,
        writer: Any = None,
        reuse: bool = True,
        budget: Any = None,
        on_call: Callable[[str | None, dict, str | None], None] | None = None,
    ):
        self.judge_model = judge_model
        self.embedding_model = embedding_model
        self._client_factory = client_factory
        self.judge_generation = dict(judge_generation or {})
        self._store, self._writer = store, writer
        self.reuse = reuse
        self.budget = budget
        self._on_call = on_call
        self._clients: dict[Model, Any] = {}
        # this run's calls by key (reuse only): in flight, or done and remembered until the store
        # has surely committed them (the newest IN_RUN_KEPT), so an identical request waits or reuses
        self._in_run: dict[str, asyncio.Future] = {}
        self.calls = 0  # requests graders made
        self.sent = 0  # of those, calls actually made to a model

    # ---- the public callables -----------------------------------------------------------
    def bind(self, *, model: str | None = None, task_id: str | None = None) -> BoundBridge:
        """A bridge for one grading batch (of ``model``'s samples of ``task_id``): it records each
        call on the sample (call index) that made it."""
        return BoundBridge(self, model, task_id)

    async def __call__(self, kind: str, request: dict[str, Any]) -> dict[str, Any]:
        reply, _record = await self.call(kind, request)
        return reply

    async def call(self, kind: str, request: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """(reply, record) of one grader call; record is None for offline embeddings."""
        self.calls += 1
        prepared = self.prepare(kind, request)
        if prepared is None:
            from evalnb.runner import offline_embeddings

            return await offline_embeddings.embeddings_reply(request), None
        return await self.send(kind, *prepared)

    def prepare(self, kind: str, request: dict[str, Any]) -> tuple[Model, dict[str, Any], str] | None:
        """(model, body as sent, cache key); None when the offline embedding model answers."""
        from evalnb.store import bridge_request_key

        if not isinstance(request, dict):
            raise TypeError(f"a model call request must be a dict, got {type(request).__name__}")
        requested = request.get("model", "auto")
        if kind == "responses":
            if self.judge_model is None:
                raise RuntimeError("ctx.responses_create needs a judge model: pass judge_model=... to evalnb.run")
            model = self._model(self.judge_model, requested)
            body = {**self._defaults(model),
                    **{k: v for k, v in request.items() if k not in ("model", "stream", "stream_options")}}
        elif kind == "embeddings":
            if self.embedding_model is None:
                return None
            model = self._model(self.embedding_model, requested)
            body = {k: v for k, v in request.items() if k != "model"}
        else:
            raise ValueError(f"unknown bridge call {kind!r}")
        body["model"] = model.name
        return model, body, bridge_request_key(kind, model.name, model.base_url, model.api, body)

    async def send(self, kind: str, model: Model, body: dict[str, Any], key: str) -> tuple[dict[str, Any], dict]:
        """Answer from the store or this run's identical call if allowed, else call the model."""
        if self.reuse:
            earlier = self._in_run.get(key)
            if earlier is not None:
                reply, usage, latency = await asyncio.shield(earlier)
                return reply, _record(kind, model, body, key, reply, usage, latency, 0.0, cached=True)
            hit = self._store.lookup_outputs([key]).get(key) if self._store is not None else None
            if hit is not None and isinstance(hit.get("reply"), dict):
                reply = hit["reply"]
                return reply, _record(kind, model, body, key, reply, hit.get("usage"), hit.get("latency_s"), 0.0,
                                      cached=True)
            future: asyncio.Future = asyncio.get_running_loop().create_future()
            self._in_run[key] = future
            self._forget_old()
        try:
            reply, usage, latency, cost = await self._make(kind, model, body, key)
        except BaseException as exc:
            if self.reuse:
                self._in_run.pop(key, None)
                if not future.done():
                    future.set_exception(exc)
                    future.exception()  # seen: nobody else may be waiting
            raise
        if self.reuse:
            future.set_result((reply, usage, latency))
        return reply, _record(kind, model, body, key, reply, usage, latency, cost, cached=False)

    def _forget_old(self) -> None:
        """Bound the memory of finished calls (a reply each): drop the oldest finished ones."""
        if len(self._in_run) <= IN_RUN_KEPT:
            return
        for key in list(self._in_run)[: len(self._in_run) - IN_RUN_KEPT]:
            if self._in_run[key].done():
                del self._in_run[key]

    # ---- making a call -----------------------------------------------------------------
    async def _make(self, kind: str, model: Model, body: dict[str, Any], key: str) -> tuple[dict, Any, float, Any]:
        from evalnb.providers.parse import normalise_usage

        worst = self._worst_case(kind, model, body)
        budget = self.budget
        if budget is not None and not await budget.reserve(worst):
            raise BudgetExhausted(f"the run's budget max_cost_usd={budget.limit:g} is reached "
                                  f"({budget.describe()}): this {kind} call was not made")
        cost = None
        try:
            client = self._client(model)
            started = time.perf_counter()
            if kind == "responses":
                reply = await client.responses_raw({k: v for k, v in body.items() if k != "model"})
            else:
                params = {k: v for k, v in body.items() if k not in ("model", "input")}
                reply = await client.embeddings(body.get("input"), **params)
            latency = time.perf_counter() - started
            self.sent += 1
            usage = normalise_usage(reply.get("usage"))
            cost = call_cost(usage, model.price)
        finally:
            if budget is not None:
                budget.settle(worst, cost)
        if self._writer is not None:
            text = reply.get("output_text") if kind == "responses" else ""
            self._writer.put_outputs([{"request_key": key, "output_text": text if isinstance(text, str) else "",
                                       "usage": usage, "latency_s": latency, "reply": reply}])
        return reply, usage, latency, cost

    def _worst_case(self, kind: str, model: Model, body: dict[str, Any]) -> float:
        """The most this call could cost (what the budget reserves for it)."""
        from evalnb.store import canonical_json

        if model.price is None:
            return 0.0
        text = body.get("input")
        if not isinstance(text, str):
            text = canonical_json(text)  # messages and lists: their JSON overestimates a little, on purpose
        tokens = estimate_tokens(text) + estimate_tokens(body.get("instructions") if isinstance(body.get("instructions"), str) else None)
        if kind == "embeddings":
            return worst_case_cost(tokens, None, model.price)
        max_out = body.get("max_output_tokens")
        if self.budget is not None and self.budget.limit is not None and not isinstance(max_out, int):
            raise ValueError(
                f"the run has a budget (max_cost_usd) and the judge {model.name!r} a price, but this call sets no "
                "max_output_tokens, so its cost has no bound; pass judge_generation={'max_output_tokens': N}"
            )
        return worst_case_cost(tokens, max_out if isinstance(max_out, int) else 0, model.price)

    def _model(self, base: Model, requested: Any) -> Model:
        if isinstance(requested, str) and requested not in ("", "auto") and requested != base.name:
            return dataclasses.replace(base, name=requested, label=requested)
        return base

    def _defaults(self, model: Model) -> dict[str, Any]:
        """judge_generation as a Responses body for this judge (model and input left out)."""
        from evalnb.providers.build import build_responses_request

        gen = {k: v for k, v in self.judge_generation.items() if k not in _CLIENT_FIELDS}
        body = build_responses_request(model.name, "", gen, is_openai=model.is_openai)
        return {k: v for k, v in body.items() if k not in ("model", "input")}

    def _client(self, model: Model) -> Any:
        client = self._clients.get(model)
        if client is None:
            options = {k: self.judge_generation[k] for k in _CLIENT_FIELDS if k in self.judge_generation}
            client = self._clients[model] = self._client_factory(model, **options)
        return client

    def _report(self, label: str | None, record: dict, task_id: str | None = None) -> None:
        if self._on_call is not None:
            self._on_call(label, record, task_id)


class BoundBridge:
    """The bridge as one grading batch sees it: ``bridge(kind, request, call_index)``.

    The sandbox pool passes the index of the grader call (the sample) that asked; its calls
    are kept in order under that index, and a budget refusal is remembered there too.
    """

    takes_index = True

    def __init__(self, parent: GraderBridge, label: str | None, task_id: str | None = None) -> None:
        self.parent, self.label, self.task_id = parent, label, task_id
        self._calls: dict[int, list[dict]] = {}
        self._asked: dict[int, Counter] = {}
        self.refused: set[int] = set()

    async def __call__(self, kind: str, request: dict[str, Any], index: int = 0) -> dict[str, Any]:
        from evalnb.store import repeat_request_key

        parent = self.parent
        parent.calls += 1
        try:
            prepared = parent.prepare(kind, request)
            if prepared is None:
                from evalnb.runner import offline_embeddings

                return await offline_embeddings.embeddings_reply(request)
            model, body, key = prepared
            asked = self._asked.setdefault(index, Counter())
            repeat = asked[key]
            asked[key] += 1
            reply, record = await parent.send(kind, model, body, repeat_request_key(key, repeat))
        except BudgetExhausted:
            self.refused.add(index)
            raise
        calls = self._calls.setdefault(index, [])
        record["call"] = len(calls)
        calls.append(record)
        parent._report(self.label, record, self.task_id)
        return reply

    def calls_of(self, index: int) -> list[dict]:
        """The model calls grader call ``index`` made, in order (each a judge-call record)."""
        return self._calls.get(index, [])


def _record(kind: str, model: Model, body: dict, key: str, reply: dict, usage: Any, latency: Any, cost: Any,
            *, cached: bool) -> dict[str, Any]:
    text = reply.get("output_text") if kind == "responses" else None
    return {
        "kind": kind, "judge_model": model.name, "request": body, "reply": reply,
        "output_text": text if isinstance(text, str) else None, "usage": usage, "latency_s": latency,
        "cost_usd": cost, "cached": cached, "request_key": key,
    }
