"""Responses requests for chat-only servers: the grader bridge speaks Responses everywhere.

Graders call ``ctx.responses_create(...)`` with a Responses body; when the judge model is
served by Chat Completions only (Ollama, llama.cpp...), these two pure functions translate
the request there and the reply back, so a grader never needs to know.
"""

from __future__ import annotations

from typing import Any

from evalnb.providers.build import RESPONSES_FIELDS, RESPONSES_NOT_OPENAI, build_chat_request
from evalnb.providers.parse import parse_chat


def responses_to_chat(request: dict[str, Any], model_name: str, *, is_openai: bool) -> dict[str, Any]:
    """A Responses request body -> the equivalent chat.completions body."""
    gen = {k: request[k] for k in (*RESPONSES_FIELDS, *RESPONSES_NOT_OPENAI) if k in request}
    inp = request.get("input", "")
    body = build_chat_request(model_name, inp if isinstance(inp, str) else "", gen, is_openai=is_openai)
    if not isinstance(inp, str):
        system = body["messages"][:-1]  # from instructions
        body["messages"] = system + [_chat_message(m) for m in inp if isinstance(m, dict)]
    return body


def _chat_message(item: dict[str, Any]) -> dict[str, Any]:
    role = item.get("role", "user")
    content = item.get("content", "")
    if isinstance(content, list):
        content = "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return {"role": "system" if role == "developer" else role, "content": content}


def chat_to_responses(reply: dict[str, Any]) -> dict[str, Any]:
    """A chat.completion reply -> a minimal Responses object (with ``output_text``)."""
    parsed = parse_chat(reply)
    usage = parsed.usage or {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    return {
        "id": parsed.response_id,
        "object": "response",
        "status": "completed",
        "model": reply.get("model"),
        "output": [{
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": parsed.text, "annotations": []}],
        }],
        "output_text": parsed.text,
        "usage": usage,
    }
