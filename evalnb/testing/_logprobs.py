"""``/v1/completions`` with ``echo`` and ``logprobs``, as vLLM answers it, for LocalModelServer.

Prompts are text (tokenized by `_tokenizer.tokenize`) or token ids as ``/tokenize`` gave them
(a list of ints, or a list of such lists for a batch), taken as given, as vLLM takes them.
Log-probabilities are a known function of the text: ``token_logprob(before, token)`` (the
text before the token, the token), so a text prompt and the same text as its token ids score
identically. The default is a deterministic hash of the two in [-10.05, -0.05]; a test
passes its own function, or a dict ``{token: logprob}`` whose misses fall back to the
default. ``top_logprobs`` holds the token and the server's "greedy" alternative
(`GREEDY_TOKEN` at `GREEDY_LOGPROB`), so a token is greedy exactly when its log-probability is
at least `GREEDY_LOGPROB` (or it is that token).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from evalnb.testing._tokenizer import Vocabulary, tokenize

__all__ = ["GREEDY_LOGPROB", "GREEDY_TOKEN", "logprobs_reply", "prompt_texts", "tokenize"]

TokenLogprob = Callable[[str, str], float]
Pieces = list[tuple[str, int]]
GREEDY_TOKEN, GREEDY_LOGPROB = " the", -0.7


def is_token_ids(prompt: Any) -> bool:
    """A prompt given as token ids: a non-empty list of ints, or of such lists."""
    if not isinstance(prompt, list) or not prompt:
        return False
    first = prompt[0][0] if isinstance(prompt[0], list) and prompt[0] else prompt[0]
    return isinstance(first, int) and not isinstance(first, bool)


def prompt_texts(prompt: Any, vocab: Vocabulary) -> list[tuple[str, Pieces]]:
    """Each prompt's text and ``(token, offset)`` pieces; an unknown id raises `UnknownTokenId`."""
    if isinstance(prompt, str):
        prompts: list[Any] = [prompt]
    elif isinstance(prompt, list) and prompt and isinstance(prompt[0], int) and not isinstance(prompt[0], bool):
        prompts = [prompt]  # one prompt as token ids
    else:
        prompts = prompt if isinstance(prompt, list) else [""]
    out = []
    for one in prompts:
        if isinstance(one, list):
            pieces = vocab.pieces(one)
            out.append(("".join(token for token, _ in pieces), pieces))
        else:
            text = one if isinstance(one, str) else ""
            out.append((text, vocab.tokenize(text)))
    return out


def default_token_logprob(before: str, token: str) -> float:
    """A deterministic stand-in for a model: a hash of the recent context and the token."""
    digest = hashlib.blake2b(f"{before[-64:]}\x00{token}".encode(), digest_size=4).digest()
    return -round(0.05 + int.from_bytes(digest, "little") % 10001 / 1000, 3)


def logprob_function(script: Mapping[str, float] | TokenLogprob | None) -> TokenLogprob:
    """The server's ``token_logprobs`` option as a function ``(before, token) -> logprob``."""
    if script is None:
        return default_token_logprob
    if callable(script):
        return script
    table = dict(script)
    return lambda before, token: float(table[token]) if token in table else default_token_logprob(before, token)


def logprobs_reply(body: dict, answer: str, n: int, logprob: TokenLogprob, vocab: Vocabulary, *,
                   echo_supported: bool = True) -> dict:
    """A ``text_completion`` with one choice per prompt (text or token ids, one or a list).

    ``echo`` puts the prompt's tokens first (the first has no log-probability); up to
    ``max_tokens`` tokens of ``answer`` follow. ``logprobs`` (an int) asks for the lists;
    a server that cannot echo them (``echo_supported=False``, like llama.cpp's server) leaves
    the prompt out and sends ``logprobs: null``.
    """
    prompts = prompt_texts(body.get("prompt"), vocab)
    echo = bool(body.get("echo")) and echo_supported
    want = body.get("logprobs")
    top_n = want if isinstance(want, int) and not isinstance(want, bool) else None
    max_tokens = body.get("max_tokens")
    generated = vocab.tokenize(answer)
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool):
        generated = generated[:max(max_tokens, 0)]
    gen_text = "".join(tok for tok, _ in generated)
    choices, prompt_tokens = [], 0
    for index, (prompt, pieces) in enumerate(prompts):
        prompt_tokens += len(pieces)
        text = (prompt if echo else "") + gen_text
        choice: dict[str, Any] = {"index": index, "text": text, "logprobs": None,
                                  "finish_reason": "length", "stop_reason": None}
        if top_n is not None and echo_supported:
            choice["logprobs"] = _logprobs(prompt, pieces, gen_text, echo, top_n, logprob, vocab)
        choices.append(choice)
    completion = len(generated) * len(prompts)
    return {"id": f"cmpl-{n:08d}", "object": "text_completion", "created": int(time.time()),
            "model": body.get("model", ""), "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                      "total_tokens": prompt_tokens + completion}}


def _logprobs(prompt: str, prompt_pieces: Pieces, gen_text: str, echo: bool, top_n: int,
              logprob: TokenLogprob, vocab: Vocabulary) -> dict:
    # the prompt and the generated text are tokenized apart (a generated token never merges
    # with the prompt's last one), as a real server generates token by token
    pieces = list(prompt_pieces) if echo else []
    pieces += [(token, offset + len(prompt) if echo else offset) for token, offset in vocab.tokenize(gen_text)]
    text = (prompt if echo else "") + gen_text
    base = "" if echo else prompt  # without echo the generated tokens still follow the prompt
    tokens, offsets, lps, tops = [], [], [], []
    for position, (token, offset) in enumerate(pieces):
        tokens.append(token)
        offsets.append(offset)
        if echo and position == 0:
            lps.append(None)
            tops.append(None)
            continue
        lp = float(logprob(base + text[:offset], token))
        lps.append(lp)
        top = {token: lp}
        if top_n > 0 and token != GREEDY_TOKEN:
            top[GREEDY_TOKEN] = GREEDY_LOGPROB
        tops.append(top)
    return {"tokens": tokens, "text_offset": offsets, "token_logprobs": lps, "top_logprobs": tops}
