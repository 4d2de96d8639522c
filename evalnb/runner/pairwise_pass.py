"""A pairwise judging pass: ask the judge about each (item, order), through the grader bridge.

Each call is a Responses call with the rendered template as its ``input``, made by the same
`GraderBridge` graders use, so it gets the same treatment: the run's judge cache (a request
already answered for any run is answered by the store: nothing is sent, cost 0), the judge's
price and an optional budget (``max_cost_usd``: no call starts that could pass it), and its
reply cached. No user code runs, so no sandbox is involved.

Every call's verdict is written to the store (`Store.write_pairwise_calls`) as soon as its
reply is read. A pass that crashed or was interrupted resumes from those rows: a call whose
stored row has the same request key (same judge, template and outputs) is not asked again,
not even of the cache. A reply without a verdict is stored with its error (asking the same
judge the same thing again would give the same reply); a call that failed (HTTP errors after
retries, the budget) is not stored, so the next pass asks it again.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from typing import Any

from evalnb.errors import BudgetExhausted

__all__ = ["Call", "judge_calls", "judge_digest"]

Key = tuple[str, int, int, str, str]  # task_id, sample_index, epoch, first, second


@dataclass(frozen=True)
class Call:
    """One judge call to make: an item's two outputs in one order (``first`` shown as A)."""

    task_id: str
    sample_index: int
    epoch: int
    first: str
    second: str
    prompt: str
    output_first: str
    output_second: str
    target: str | None

    @property
    def key(self) -> Key:
        return (self.task_id, self.sample_index, self.epoch, self.first, self.second)


def judge_digest(judge_model: Any, template: str | None, judge_generation: dict[str, Any]) -> tuple[str, dict]:
    """(digest, set-up) of a judge: its model (name, endpoint, API), template (None: the default) and generation."""
    from evalnb.store import canonical_json

    setup = {"judge_model": judge_model.name, "base_url": judge_model.base_url, "api": judge_model.api,
             "template": template, "judge_generation": judge_generation}
    return hashlib.blake2b(canonical_json(setup).encode(), digest_size=8).hexdigest(), setup


def judge_calls(store: Any, run_id: str, calls: list[Call], *, judge_model: Any, template: str | None,
                judge_generation: Any = None, concurrency: int = 4, max_cost_usd: float | None = None) -> dict[Key, dict]:
    """Judge every call (resuming from the store); key -> {verdict, error, cost_usd, cached, sent}.

    ``verdict`` is positional (``"first"``, ``"second"``, ``"tie"``) or None with ``error``.
    """
    from evalnb.aio import run_sync
    from evalnb.runner.run_plan import _judge_generation, as_model

    judge = as_model(judge_model, "judge_model")
    gen = _judge_generation(judge_generation)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= 64:
        raise ValueError(f"concurrency must be an integer from 1 to 64, got {concurrency!r}")
    if max_cost_usd is not None:
        if isinstance(max_cost_usd, bool) or not isinstance(max_cost_usd, (int, float)) or not max_cost_usd >= 0:
            raise ValueError(f"max_cost_usd must be a number >= 0, got {max_cost_usd!r}")
        if judge.price is not None and "max_output_tokens" not in gen:
            raise ValueError(f"max_cost_usd={max_cost_usd:g}: the judge {judge.label!r} has a price but "
                             "judge_generation sets no max_output_tokens, so a judge call's cost has no upper bound; "
                             "set judge_generation={'max_output_tokens': N}")
    return run_sync(_judge_all(store, run_id, calls, judge, template, gen, concurrency, max_cost_usd))


async def _judge_all(store: Any, run_id: str, calls: list[Call], judge: Any, template: str | None,
                     gen: dict[str, Any], concurrency: int, max_cost_usd: float | None) -> dict[Key, dict]:
    from evalnb.providers import ModelClient
    from evalnb.providers.http_clients import ClientPool
    from evalnb.results.pairwise_judge import render, template_for
    from evalnb.runner.bridge import GraderBridge
    from evalnb.runner.budget import Budget

    digest, setup = judge_digest(judge, template, gen)
    store.save_pairwise_judge(run_id, digest, judge.name, setup)
    stored = {(c["task_id"], c["sample_index"], c["epoch"], c["first"], c["second"]): c
              for c in store.pairwise_calls(run_id, digest)}
    pool = ClientPool(max_connections=concurrency)
    bridge = GraderBridge(judge_model=judge, embedding_model=None, judge_generation=gen, store=store, writer=store,
                          client_factory=lambda model, **options: ModelClient(model, pool=pool, **options),
                          budget=Budget(max_cost_usd) if max_cost_usd is not None else None)
    slots = asyncio.Semaphore(concurrency)
    out: dict[Key, dict] = {}

    async def one(call: Call) -> None:
        text = render(template_for(template, call.target), prompt=call.prompt, output_a=call.output_first,
                      output_b=call.output_second, target=call.target)
        _model, body, key = prepared = bridge.prepare("responses", {"input": text})
        earlier = stored.get(call.key)
        if earlier is not None and earlier["request_key"] == key:
            out[call.key] = {"verdict": earlier["verdict"], "error": earlier["error"], "cost_usd": 0.0,
                             "cached": True, "sent": False}
            return
        async with slots:
            try:
                reply, record = await bridge.send("responses", *prepared)
            except BudgetExhausted as exc:
                out[call.key] = _failed(f"not judged: {exc}")
                return
            except Exception as exc:  # noqa: BLE001 - one failed call fails its row, not the pass
                out[call.key] = _failed(f"judge call failed: {type(exc).__name__}: {exc}")
                return
        row = _row(call, key, reply, record)
        store.write_pairwise_calls(run_id, digest, [row])
        out[call.key] = {"verdict": row["verdict"], "error": row["error"], "cost_usd": row["cost_usd"],
                         "cached": row["cached"], "sent": not row["cached"]}

    try:
        await asyncio.gather(*(one(c) for c in calls))
    finally:
        await pool.aclose()
    return out


def _failed(error: str) -> dict[str, Any]:
    return {"verdict": None, "error": error, "cost_usd": None, "cached": False, "sent": False}


def _row(call: Call, key: str, reply: dict, record: dict) -> dict[str, Any]:
    from evalnb.providers.parse import responses_output_text
    from evalnb.results.pairwise_judge import parse_verdict

    text = responses_output_text(reply) if isinstance(reply, dict) else ""
    verdict = parse_verdict(text)
    error = None if verdict else f"no [[A]], [[B]] or [[C]] in the judge's reply: {text[:200]!r}"
    return {"task_id": call.task_id, "sample_index": call.sample_index, "epoch": call.epoch, "first": call.first,
            "second": call.second, "verdict": verdict, "error": error, "request_key": key, "output_text": text,
            "usage": record.get("usage"), "latency_s": record.get("latency_s"), "cost_usd": record.get("cost_usd"),
            "cached": bool(record.get("cached"))}
