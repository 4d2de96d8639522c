"""Reading replies: the answer text, normalised usage and response id of either API.

Pure functions over decoded JSON. A 200 reply that is not the expected shape raises
`BadReply` (the client retries it like a server error: proxies truncate, servers hiccup).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


class BadReply(Exception):
    """A successful HTTP status whose body is not a usable reply."""


@dataclass(frozen=True)
class Reply:
    text: str
    usage: dict[str, int] | None
    response_id: str | None


def decode_json(raw: bytes) -> Any:
    """JSON from a reply body, or `BadReply` naming what was found instead."""
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        snippet = raw[:80].decode("utf-8", "replace")
        raise BadReply(f"reply is not valid JSON: {snippet!r}") from None


def responses_output_text(body: dict[str, Any]) -> str:
    """``output_text`` if the server sent it, else the output_text parts of the message items."""
    if isinstance(body.get("output_text"), str):
        return body["output_text"]
    parts = []
    for item in body.get("output") or []:
        if not isinstance(item, dict) or item.get("type", "message") != "message":
            continue
        for part in item.get("content") or []:
            if isinstance(part, dict) and part.get("type") == "output_text":
                text = part.get("text")
                if isinstance(text, str):
                    parts.append(text)
    return "".join(parts)


def parse_responses(body: Any) -> Reply:
    """A Responses API object -> `Reply` (reasoning and tool-call items are not text)."""
    if not isinstance(body, dict) or ("output" not in body and "output_text" not in body):
        raise BadReply(f"reply is not a Responses object: {_brief(body)}")
    if body.get("status") == "failed":
        raise BadReply(f"response failed: {error_message(body) or 'no error message'}")
    return Reply(responses_output_text(body), normalise_usage(body.get("usage")), _id(body))


def parse_chat(body: Any) -> Reply:
    """A chat.completion object -> `Reply` (the first choice; ``reasoning_content`` ignored)."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BadReply(f"reply has no choices: {_brief(body)}")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise BadReply("reply's first choice has no message")
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    text = content if isinstance(content, str) else ""
    return Reply(text, normalise_usage(body.get("usage")), _id(body))


def parse_completions(body: Any) -> Reply:
    """A text_completion object -> `Reply` (the first choice's text)."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BadReply(f"reply has no choices: {_brief(body)}")
    text = choices[0].get("text")
    return Reply(text if isinstance(text, str) else "", normalise_usage(body.get("usage")), _id(body))


def normalise_usage(usage: Any) -> dict[str, int] | None:
    """Either API's usage -> ``{input_tokens, output_tokens, total_tokens}`` (None if absent).

    ``cached_input_tokens`` is added when the reply says how many input tokens the provider
    served from its prompt cache (Responses ``input_tokens_details.cached_tokens``, chat
    ``prompt_tokens_details.cached_tokens``): they are part of ``input_tokens`` and may be
    billed at their own price (`evalnb.providers.pricing`).
    """
    if not isinstance(usage, dict):
        return None
    inp = usage.get("input_tokens", usage.get("prompt_tokens"))
    out = usage.get("output_tokens", usage.get("completion_tokens"))
    total = usage.get("total_tokens")
    if not isinstance(inp, int) and not isinstance(out, int) and not isinstance(total, int):
        return None
    inp = inp if isinstance(inp, int) else 0
    out = out if isinstance(out, int) else 0
    total = total if isinstance(total, int) else inp + out
    found = {"input_tokens": inp, "output_tokens": out, "total_tokens": total}
    details = usage.get("input_tokens_details", usage.get("prompt_tokens_details"))
    cached = details.get("cached_tokens") if isinstance(details, dict) else usage.get("cached_input_tokens")
    if isinstance(cached, int) and not isinstance(cached, bool):
        found["cached_input_tokens"] = cached
    return found


def error_message(body: Any) -> str | None:
    """The server's own words from an OpenAI-style ``{"error": {"message": ...}}`` body."""
    if isinstance(body, (bytes, str)):
        try:
            body = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
            return text.strip()[:500] or None
    if not isinstance(body, dict):
        return None
    err = body.get("error")
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])[:500]
    if isinstance(err, str) and err:
        return err[:500]
    for key in ("message", "detail"):
        if isinstance(body.get(key), str) and body[key]:
            return body[key][:500]
    return None


def _id(body: dict[str, Any]) -> str | None:
    rid = body.get("id")
    return rid if isinstance(rid, str) else None


def _brief(body: Any) -> str:
    text = json.dumps(body)[:80] if not isinstance(body, (bytes, str)) else repr(body)[:80]
    return text
