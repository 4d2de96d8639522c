"""What a call costs: model prices, the cost of a reply's usage, and a tokenizer-free estimate.

Pure functions. Prices are USD per 1M tokens, as providers list them:
``{"input": 0.4, "output": 1.6, "cached_input": 0.1}`` (``cached_input`` optional: cached input
tokens are then billed at the input price). Usage is `parse.normalise_usage`'s dict, where
``cached_input_tokens`` is the part of ``input_tokens`` the provider served from its prompt
cache (both APIs report it inside the input count).

Batch APIs bill at their own prices: ``batch_input`` and ``batch_output`` (USD per 1M tokens,
both or neither) or ``batch_discount`` (a factor in (0, 1], e.g. 0.5: every live price times
it). `batch_price` turns a price into the one a batched call pays; a price without either is
charged in full for batched calls too (evalnb does not guess a provider's discount).

The estimate (`estimate_tokens`) is ``ceil(characters / 4)``: OpenAI's rule of thumb for
English under its BPE tokenizers. It needs no tokenizer (none ships offline), and it is only
an estimate: see `CHARS_PER_TOKEN`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

PRICE_KEYS = ("input", "output", "cached_input", "batch_input", "batch_output", "batch_discount")
PER_TOKENS = 1_000_000
# Characters per token of the estimate. Measured against OpenAI's cl100k_base on evalnb's
# examples (benchmarks/token_estimate.py): real / estimated tokens 0.95 for the quickstart
# prompts, 1.01 for English passages, 0.93 for JSON rows, 1.04 for Python source; single
# texts 0.76-1.35. Not measured here (no such data ships): Chinese or Japanese text usually
# runs at 1-2 characters per token, so there the estimate can be low by 2x or more.
CHARS_PER_TOKEN = 4


def check_price(price: Any, where: str = "price") -> dict[str, float] | None:
    """A validated price dict (floats, USD per 1M tokens), or None for no price.

    ``input`` and ``output`` are required, ``cached_input`` optional; each a finite number >= 0.
    Batch prices: ``batch_input`` with ``batch_output``, or ``batch_discount`` in (0, 1].
    """
    if price is None:
        return None
    if not isinstance(price, Mapping):
        raise ValueError(f"{where} must be a dict like {{'input': 0.4, 'output': 1.6}} "
                         f"(USD per 1M tokens), got {type(price).__name__}")
    unknown = sorted(str(k) for k in price if k not in PRICE_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(PRICE_KEYS)} "
                         "(USD per 1M tokens)")
    missing = [k for k in ("input", "output") if k not in price]
    if missing:
        raise ValueError(f"{where}: missing {' and '.join(missing)} (USD per 1M tokens; "
                         "'cached_input' is optional)")
    out: dict[str, float] = {}
    for key in PRICE_KEYS:
        if key not in price:
            continue
        value = price[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"{where}[{key!r}] must be a finite number >= 0 (USD per 1M tokens), got {value!r}")
        out[key] = float(value)
    batch = [k for k in ("batch_input", "batch_output") if k in out]
    if len(batch) == 1:
        other = "batch_output" if batch[0] == "batch_input" else "batch_input"
        raise ValueError(f"{where}: {batch[0]!r} needs {other!r} too (USD per 1M tokens), or give "
                         "'batch_discount' (e.g. 0.5) instead")
    if "batch_discount" in out:
        if batch:
            raise ValueError(f"{where}: give either 'batch_input'/'batch_output' or 'batch_discount', not both")
        if not 0 < out["batch_discount"] <= 1:
            raise ValueError(f"{where}['batch_discount'] must be a factor in (0, 1] (0.5: half price), "
                             f"got {out['batch_discount']!r}")
    return out


def batch_price(price: Mapping[str, float] | None) -> dict[str, float] | None:
    """The price a batched call pays: the batch keys applied, as a plain input/output price.

    ``batch_discount`` scales input, output and cached input; ``batch_input``/``batch_output``
    replace input and output (cached input then costs at most ``batch_input``). No batch key:
    the live price.
    """
    if price is None:
        return None
    live = {k: price[k] for k in ("input", "output", "cached_input") if k in price}
    if "batch_discount" in price:
        return {k: v * price["batch_discount"] for k, v in live.items()}
    if "batch_input" in price:
        out = {"input": price["batch_input"], "output": price["batch_output"]}
        if "cached_input" in price:
            out["cached_input"] = min(price["cached_input"], price["batch_input"])
        return out
    return live


def has_batch_price(price: Mapping[str, float] | None) -> bool:
    """Does `price` say what a batched call costs (batch keys or a discount)?"""
    return price is not None and ("batch_discount" in price or "batch_input" in price)


def call_cost(usage: Mapping[str, Any] | None, price: Mapping[str, float] | None) -> float | None:
    """USD for one reply's usage at ``price``; None when the model has no price.

    A reply without usage costs 0 at any price: the server did not say, and a budget must not
    stall on it (the run's token counts show such calls as missing).
    """
    if price is None:
        return None
    if not usage:
        return 0.0
    inp = _count(usage.get("input_tokens"))
    out = _count(usage.get("output_tokens"))
    cached = min(_count(usage.get("cached_input_tokens")), inp)
    cached_price = price.get("cached_input", price["input"])
    return ((inp - cached) * price["input"] + cached * cached_price + out * price["output"]) / PER_TOKENS


def worst_case_cost(input_tokens: int, max_output_tokens: int | None, price: Mapping[str, float] | None) -> float:
    """The most one call could cost: its input at the input price plus every allowed output token.

    0 for a model without a price (such calls count as free). ``max_output_tokens`` None means
    the call has no output (embeddings).
    """
    if price is None:
        return 0.0
    return (input_tokens * price["input"] + (max_output_tokens or 0) * price["output"]) / PER_TOKENS


def estimate_tokens(text: str | None) -> int:
    """``ceil(len(text) / CHARS_PER_TOKEN)``: a tokenizer-free estimate of a text's tokens."""
    if not text:
        return 0
    return -(-len(text) // CHARS_PER_TOKEN)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
