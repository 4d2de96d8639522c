"""Request bodies for the Responses and Chat Completions APIs, from canonical generation settings.

Pure functions: ``(model name, prompt, canonical generation dict, is_openai) -> JSON body``.

What goes where (SPEC §9 and the Decisions):

- Responses API: ``instructions, temperature, top_p, max_output_tokens, tools, tool_choice,
  parallel_tool_calls, max_tool_calls, reasoning, text, truncation, service_tier`` as they are.
  ``stop``, ``presence_penalty`` and ``frequency_penalty`` are not part of OpenAI's Responses
  API (it rejects them), so they are sent only to other servers (vLLM, gateways).
- Chat Completions: ``instructions`` becomes a system message; ``max_output_tokens`` becomes
  ``max_completion_tokens`` for OpenAI (``max_tokens`` is deprecated there) and ``max_tokens``
  elsewhere (what vLLM, llama.cpp, Ollama read); Responses-style ``tools``/``tool_choice`` are
  converted to the chat shape, ``reasoning.effort`` to ``reasoning_effort``, ``text.format`` to
  ``response_format`` and ``text.verbosity`` to ``verbosity``. ``max_tool_calls`` and
  ``truncation`` have no chat equivalent and are not sent.
- Pass-through (``top_k, min_p, repetition_penalty, do_sample, chat_template_kwargs,
  prefill_think, use_cache``, then ``extra_body``) goes only to servers that are not OpenAI.
  ``extra_body`` may override ordinary fields but never the request's identity (``model``,
  ``input``, ``messages``, ``stream``...) or anything that authenticates.
- Completions (``POST /completions``, plain text): the prompt as it is, ``max_output_tokens``
  as ``max_tokens``, and ``temperature``, ``top_p``, ``stop``, the penalties and pass-through
  fields as for chat; ``instructions`` (no place for it in a plain prompt) and tool settings
  are not sent.
- Execution controls (``timeout_seconds``, ``max_retries``, ``max_empty_retries``) are never sent.
"""

from __future__ import annotations

from typing import Any

RESPONSES_FIELDS = (
    "instructions", "temperature", "top_p", "max_output_tokens", "tools", "tool_choice",
    "parallel_tool_calls", "max_tool_calls", "reasoning", "text", "truncation", "service_tier",
)
RESPONSES_NOT_OPENAI = ("stop", "presence_penalty", "frequency_penalty")
CHAT_SAME_NAME = (
    "temperature", "top_p", "stop", "presence_penalty", "frequency_penalty",
    "parallel_tool_calls", "service_tier",
)
CHAT_NOT_SENT = ("max_tool_calls", "truncation")
PASSTHROUGH_FIELDS = (
    "top_k", "min_p", "repetition_penalty", "do_sample", "chat_template_kwargs", "prefill_think",
    "use_cache",
)
EXECUTION_FIELDS = frozenset({"timeout_seconds", "max_retries", "max_empty_retries"})
# Never set from extra_body, whatever safe_extra_body allows (defence in depth).
IDENTITY_KEYS = frozenset({"model", "input", "messages", "prompt", "stream", "stream_options"})
_ALIASES = {"max_gen_toks": "max_output_tokens", "until": "stop"}


def canonical(gen: Any) -> dict[str, Any]:
    """Accept lm-eval aliases and drop unset (None) values, so builders see one spelling.

    `gen` is a canonical generation dict (``Generation.canonical()``) or a ``Generation``.
    """
    if hasattr(gen, "canonical"):
        gen = gen.canonical()
    out: dict[str, Any] = {}
    for key, value in (gen or {}).items():
        if value is None:
            continue
        out.setdefault(_ALIASES.get(key, key), value)
    return out


def build_responses_request(
    model_name: str, prompt: str, gen: dict[str, Any] | None, *, is_openai: bool
) -> dict[str, Any]:
    """A ``POST /responses`` body asking `model_name` about `prompt`."""
    g = canonical(gen)
    body: dict[str, Any] = {"model": model_name, "input": prompt}
    for key in RESPONSES_FIELDS:
        if key in g:
            body[key] = g[key]
    if not is_openai:
        for key in RESPONSES_NOT_OPENAI:
            if key in g:
                body[key] = g[key]
        _add_passthrough(body, g)
    return body


def build_chat_request(
    model_name: str, prompt: str, gen: dict[str, Any] | None, *, is_openai: bool
) -> dict[str, Any]:
    """A ``POST /chat/completions`` body: optional system message, then the user prompt."""
    g = canonical(gen)
    messages = []
    if g.get("instructions"):
        messages.append({"role": "system", "content": g["instructions"]})
    messages.append({"role": "user", "content": prompt})
    body: dict[str, Any] = {"model": model_name, "messages": messages}
    for key in CHAT_SAME_NAME:
        if key in g:
            body[key] = g[key]
    if "max_output_tokens" in g:
        body["max_completion_tokens" if is_openai else "max_tokens"] = g["max_output_tokens"]
    if "tools" in g:
        body["tools"] = [_chat_tool(t) for t in g["tools"]]
    if "tool_choice" in g:
        body["tool_choice"] = _chat_tool_choice(g["tool_choice"])
    reasoning = g.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("effort") is not None:
        body["reasoning_effort"] = reasoning["effort"]
    text = g.get("text")
    if isinstance(text, dict):
        if isinstance(text.get("format"), dict):
            body["response_format"] = _response_format(text["format"])
        if text.get("verbosity") is not None:
            body["verbosity"] = text["verbosity"]
    if not is_openai:
        _add_passthrough(body, g)
    return body


COMPLETIONS_SAME_NAME = ("temperature", "top_p", "stop", "presence_penalty", "frequency_penalty")
COMPLETIONS_NOT_SENT = ("instructions", "tools", "tool_choice", "parallel_tool_calls", "max_tool_calls",
                        "reasoning", "text", "truncation", "service_tier")


def build_completions_request(
    model_name: str, prompt: str, gen: dict[str, Any] | None, *, is_openai: bool
) -> dict[str, Any]:
    """A ``POST /completions`` body: the prompt as plain text (no chat template)."""
    g = canonical(gen)
    body: dict[str, Any] = {"model": model_name, "prompt": prompt}
    for key in COMPLETIONS_SAME_NAME:
        if key in g:
            body[key] = g[key]
    if "max_output_tokens" in g:
        body["max_tokens"] = g["max_output_tokens"]
    if not is_openai:
        _add_passthrough(body, g)
    return body


def unsent_fields(gen: dict[str, Any] | None, *, api: str, is_openai: bool) -> list[str]:
    """Set generation fields this endpoint will not receive (so the runner can warn once)."""
    g = canonical(gen)
    skipped: set[str] = set()
    if is_openai:
        skipped.update(PASSTHROUGH_FIELDS, {"extra_body"})
        if api == "responses":
            skipped.update(RESPONSES_NOT_OPENAI)
    if api == "chat":
        skipped.update(CHAT_NOT_SENT)
    if api == "completions":
        skipped.update(COMPLETIONS_NOT_SENT)
    return sorted(k for k in g if k in skipped)


def _add_passthrough(body: dict[str, Any], g: dict[str, Any]) -> None:
    for key in PASSTHROUGH_FIELDS:
        if key in g:
            body[key] = g[key]
    extra = g.get("extra_body")
    if isinstance(extra, dict):
        from evalnb.suite.generation import safe_extra_body  # lazy: pulls in pydantic and the manifest

        for key, value in safe_extra_body(extra).items():
            if str(key).lower() not in IDENTITY_KEYS:
                body[key] = value


def _chat_tool(tool: Any) -> Any:
    """Responses function tool ``{type, name, parameters}`` -> chat ``{type, function: {...}}``."""
    if isinstance(tool, dict) and tool.get("type") == "function" and "function" not in tool:
        fn = {k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool}
        return {"type": "function", "function": fn}
    return tool


def _chat_tool_choice(choice: Any) -> Any:
    if isinstance(choice, dict) and choice.get("type") == "function" and "function" not in choice:
        return {"type": "function", "function": {"name": choice.get("name")}}
    return choice


def _response_format(fmt: dict[str, Any]) -> dict[str, Any]:
    """Responses ``text.format`` -> chat ``response_format``."""
    if fmt.get("type") == "json_schema" and "json_schema" not in fmt:
        keys = ("name", "schema", "strict", "description")
        return {"type": "json_schema", "json_schema": {k: fmt[k] for k in keys if k in fmt}}
    return fmt
