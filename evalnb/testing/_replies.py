"""The reply bodies LocalModelServer sends, shaped like OpenAI's (and like bench/mock_openai.py).

Pure functions: request JSON in, prompt or reply JSON out. Kept apart from the HTTP code so the
shapes can be read (and checked against the API reference) in one place.
"""

from __future__ import annotations

import hashlib
import math
import struct
import time
from typing import Any

DEFAULT_EMBEDDING_DIM = 32


def text_of(content: Any) -> str:
    """Text of a message `content`: a string, or a list of parts with a ``text`` each."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def _last_user_text(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    dicts = [m for m in messages if isinstance(m, dict)]
    for m in reversed(dicts):
        if m.get("role") == "user":
            return text_of(m.get("content"))
    return text_of(dicts[-1].get("content")) if dicts else ""


def prompt_of(path: str, body: Any) -> str:
    """The prompt a request asks about: what responders and fault matchers look at.

    Responses: ``input`` (a string, or the last user message of a list); chat: the last user
    message; completions: ``prompt``; embeddings: the input texts joined by newlines.
    """
    if not isinstance(body, dict):
        return ""
    if path == "/v1/responses":
        inp = body.get("input")
        return inp if isinstance(inp, str) else _last_user_text(inp)
    if path == "/v1/chat/completions":
        return _last_user_text(body.get("messages"))
    if path == "/v1/completions":
        p = body.get("prompt")
        if isinstance(p, list):
            p = p[0] if p else ""
        return p if isinstance(p, str) else ""
    if path == "/v1/embeddings":
        return "\n".join(embedding_inputs(body))
    return ""


def embedding_inputs(body: dict) -> list[str]:
    """The texts of an embeddings request (`input` is a string or a list of strings)."""
    inp = body.get("input")
    if isinstance(inp, str):
        return [inp]
    if isinstance(inp, list):
        return [x if isinstance(x, str) else str(x) for x in inp]
    return []


def _tokens(text: str) -> int:
    return len(text.split())


def responses_reply(body: dict, text: str, prompt: str, n: int) -> dict:
    """A completed Responses API object whose only output is one assistant message."""
    i, o = _tokens(prompt), _tokens(text)
    return {
        "id": f"resp_{n:08d}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": body.get("model", ""),
        "output": [
            {
                "type": "message",
                "id": f"msg_{n:08d}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "output_text": text,
        "error": None,
        "incomplete_details": None,
        "usage": {"input_tokens": i, "output_tokens": o, "total_tokens": i + o},
    }


def chat_reply(body: dict, text: str, prompt: str, n: int) -> dict:
    """A `chat.completion` object with one choice."""
    p, c = _tokens(prompt), _tokens(text)
    return {
        "id": f"chatcmpl-{n:08d}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c},
    }


def chat_stream(body: dict, text: str, n: int) -> bytes:
    """The same answer as server-sent events (`stream: true`): one delta, a stop, [DONE]."""
    import json

    base = {"id": f"chatcmpl-{n:08d}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": body.get("model", "")}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text},
                              "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()


def completions_reply(body: dict, text: str, prompt: str, n: int) -> dict:
    """A legacy `text_completion` object with one choice."""
    p, c = _tokens(prompt), _tokens(text)
    return {
        "id": f"cmpl-{n:08d}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
        "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c},
    }


def embeddings_reply(body: dict, vectors: list[list[float]], texts: list[str]) -> dict:
    """An embeddings `list` object (SPEC §12)."""
    tokens = sum(_tokens(t) for t in texts)
    return {
        "object": "list",
        "data": [{"object": "embedding", "embedding": list(v), "index": i}
                 for i, v in enumerate(vectors)],
        "model": body.get("model", ""),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def hash_embedding(text: str, dim: int = DEFAULT_EMBEDDING_DIM) -> list[float]:
    """A deterministic unit vector derived from the text's hash: equal texts, equal vectors.

    Not semantic at all: it only lets code that handles embeddings run end to end.
    """
    raw = b""
    counter = 0
    while len(raw) < 4 * dim:
        raw += hashlib.blake2b(text.encode() + counter.to_bytes(4, "little"), digest_size=64).digest()
        counter += 1
    ints = struct.unpack(f"<{dim}I", raw[: 4 * dim])
    vec = [x / 2**31 - 1.0 for x in ints]
    norm = math.sqrt(sum(x * x for x in vec)) or 1.0
    return [x / norm for x in vec]


def usage_for(path: str, numbers: dict) -> dict:
    """Set usage numbers in the shape `path`'s API reports them.

    ``numbers``: ``input_tokens``, ``output_tokens`` and optionally ``cached_input_tokens``
    (reported inside the input count, as OpenAI does). Responses: ``input_tokens``,
    ``output_tokens``, ``input_tokens_details.cached_tokens``; chat and completions:
    ``prompt_tokens``, ``completion_tokens``, ``prompt_tokens_details.cached_tokens``;
    embeddings: ``prompt_tokens`` only.
    """
    inp = int(numbers.get("input_tokens", 0))
    out = int(numbers.get("output_tokens", 0))
    cached = numbers.get("cached_input_tokens")
    if path == "/v1/embeddings":
        return {"prompt_tokens": inp, "total_tokens": inp}
    if path == "/v1/responses":
        usage: dict[str, Any] = {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}
        if cached is not None:
            usage["input_tokens_details"] = {"cached_tokens": int(cached)}
        return usage
    usage = {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": int(cached)}
    return usage


def models_reply(model: str) -> dict:
    """`GET /v1/models`: one model, the server's name."""
    return {"object": "list",
            "data": [{"id": model, "object": "model", "created": 0, "owned_by": "evalnb"}]}


def error_reply(status: int, message: str, kind: str | None = None) -> dict:
    """An OpenAI-style error object."""
    if kind is None:
        kind = "rate_limit_error" if status == 429 else (
            "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}
