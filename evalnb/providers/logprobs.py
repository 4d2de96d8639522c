"""Log-likelihoods over ``POST /completions``: the request, and reading them from the echo.

lm-eval's ``local-completions`` scores a continuation the same way: the context and the
continuation go as one prompt with ``echo: true`` and ``logprobs``, and the log-probabilities
the server gives the prompt's own tokens are read back. No tokenizer is needed here: the
continuation's tokens are found by ``text_offset``: every echoed token that ends after the
context (or starts at its end: a byte-level tokenizer's zero-width partial character) and starts
before the end of the prompt (so a token straddling the boundary counts as the continuation's;
the prompt's first token has no log-probability and is skipped). Only echoed prompt tokens count: ``max_tokens`` is 1 (some servers
refuse 0) and the generated token, past the prompt's end, is left out. ``is_greedy`` is true
when each counted token is the top entry of its ``top_logprobs``. All the pairs of one call go
as one list prompt; choice ``i`` of the reply answers prompt ``i``.

Contexts are split as lm-eval's ``_encode_pair`` splits them: whitespace at the end of the
context is moved into the continuation (a BPE tokenizer joins it to the next word, so the
context's text does not end on a token boundary). An empty context is conditioned on the
tokenizer's prefix token, as lm-eval's API models do (`with_prefix`; the client reads the
token from the server's ``/tokenizer_info``).

A reply without the echoed log-probabilities (llama.cpp's ``llama-server``, OpenAI's models)
raises `ProviderError` (not retried): scores at chance level would be worse than no scores.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from evalnb.errors import ProviderError

__all__ = ["Loglikelihood", "loglikelihood_request", "parse_loglikelihoods", "with_prefix"]

NO_ECHO = ("cannot score by log-likelihood: the server did not echo the prompt's log-probabilities "
           "(POST /completions with echo and logprobs). vLLM serves them; llama.cpp's llama-server and "
           "OpenAI's chat models do not")


class Loglikelihood(NamedTuple):
    """One continuation's summed log-probability and whether each of its tokens was the top one."""

    logprob: float
    is_greedy: bool


def loglikelihood_request(model_name: str, requests: list[tuple[str, str]]) -> dict[str, Any]:
    """The body that asks for every ``context + continuation``'s echoed log-probabilities."""
    return {"model": model_name, "prompt": [context + continuation for context, continuation in requests],
            "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 1}


def with_prefix(requests: list[tuple[str, str]], prefix: str) -> list[tuple[str, str]]:
    """Empty contexts conditioned on ``prefix`` (the BOS/EOS token's text), as lm-eval's
    ``loglikelihood`` does; a continuation that starts with that token keeps it as its context."""
    out = []
    for context, continuation in requests:
        if context == "" and prefix:
            cut = len(prefix) if continuation.startswith(prefix) else 0
            context, continuation = prefix, continuation[cut:]
        out.append((context, continuation))
    return out


def parse_loglikelihoods(body: Any, requests: list[tuple[str, str]], label: str = "model") -> list[Loglikelihood]:
    """One `Loglikelihood` per request, from a ``text_completion`` reply."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or len(choices) != len(requests):
        found = len(choices) if isinstance(choices, list) else 0
        raise ProviderError(f"{label}: asked for {len(requests)} log-likelihoods in one call, the reply has "
                            f"{found} choices", status=200, retryable=False)
    by_index = {c.get("index", i) if isinstance(c, dict) else i: c for i, c in enumerate(choices)}
    return [_one(by_index.get(i), context, continuation, label) for i, (context, continuation) in enumerate(requests)]


def _one(choice: Any, context: str, continuation: str, label: str) -> Loglikelihood:
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    text = choice.get("text") if isinstance(choice, dict) else None
    if not isinstance(logprobs, dict) or not isinstance(text, str):
        raise ProviderError(f"{label}: {NO_ECHO}", status=200, retryable=False)
    tokens, offsets = logprobs.get("tokens"), logprobs.get("text_offset")
    lps, tops = logprobs.get("token_logprobs"), logprobs.get("top_logprobs")
    full = context + continuation
    if (not isinstance(tokens, list) or not isinstance(offsets, list) or not isinstance(lps, list)
            or len(tokens) != len(offsets) or len(lps) != len(offsets) or not text.startswith(full)):
        raise ProviderError(f"{label}: {NO_ECHO}", status=200, retryable=False)
    start, end = len(context.rstrip()) or len(context), len(full)  # trailing whitespace: the continuation's
    total, greedy, counted = 0.0, True, 0
    for j, offset in enumerate(offsets):
        token_end = offsets[j + 1] if j + 1 < len(offsets) else len(text)
        # a token at or after the context's end, or straddling it; a zero-width token at the
        # context's end is the first byte(s) of the continuation's first character (vLLM echoes
        # the bytes of a multi-byte character as "" tokens, then the character)
        if not (offset < end and (offset >= start or token_end > start)):
            continue
        lp = lps[j]
        if lp is None and offset == 0:
            continue  # the prompt's first token is never predicted (a rolling continuation from "")
        if not isinstance(lp, (int, float)) or isinstance(lp, bool):
            raise ProviderError(f"{label}: {NO_ECHO} (token {j} of the continuation has none)", status=200,
                                retryable=False)
        total += float(lp)
        counted += 1
        top = tops[j] if isinstance(tops, list) and j < len(tops) else None
        if not isinstance(top, dict) or not top or max(top, key=top.get) != tokens[j]:
            greedy = False
    if counted == 0 and continuation:
        raise ProviderError(f"{label}: {NO_ECHO} (no echoed token covers the continuation)", status=200,
                            retryable=False)
    return Loglikelihood(total, greedy)
