"""A log-likelihood task's one call per item, shared by the local executor (`RunContext`), Ray
workers (`executors.ray_worker`) and provider batches (`executors.batch`, through `RunContext.request`):
every continuation of the item scored in one ``/completions`` call.

The reply is kept as the output text, JSON ``{"loglikelihoods": [...], "is_greedy": [...]}``
(one entry per continuation; a rolling task scores its target from an empty prompt), so the
store, the output cache and the grader all see the numbers.
"""

from __future__ import annotations

import json
import time
from typing import Any


def continuation_pairs(spec: Any, prompt: str, target: str | None,
                       continuations: tuple[str, ...] | list[str] | None,
                       contexts: tuple[str, ...] | list[str] | None = None) -> list[tuple[str, str]]:
    """The ``(context, continuation)`` pairs one item asks about: the prompt and each
    continuation, or (a multiple-input item: winogrande) the prompt and each of its contexts
    with its one continuation."""
    if spec.type == "loglikelihood_rolling":
        return [("", target or "")]
    if contexts is not None:
        return [(prompt + context, c) for context in contexts for c in (continuations or ())[:1]]
    return [(prompt, c) for c in continuations or ()]


async def score_continuations(client: Any, pairs: list[tuple[str, str]]) -> Any:
    """`client.loglikelihoods(pairs)` as a `Completion` whose text is the JSON above."""
    from evalnb.providers.client import Completion

    started = time.perf_counter()
    scored = await client.loglikelihoods(pairs)
    return Completion(text=reply_text(scored), usage=None, response_id=None, latency_s=time.perf_counter() - started)


def reply_text(scored: list[Any]) -> str:
    """The output text kept for an item: each continuation's summed log-probability and greediness."""
    return json.dumps({"loglikelihoods": [s.logprob for s in scored], "is_greedy": [s.is_greedy for s in scored]})
