"""Run-level generation settings (SPEC §9): what candidate-model calls are sent with.

``Generation.from_value`` accepts ``None``, a dict or a ``Generation`` and raises a
``ManifestError`` located at ``generation.<field>``. lm-eval aliases are folded into the
Responses-style names (``max_gen_toks`` -> ``max_output_tokens``, ``until`` -> ``stop``); giving an
alias and its canonical field with different values is an error. ``canonical()`` is the form runs
store and cache keys use: only the fields that were set, aliases rewritten, ``stop`` always a
list, and ``extra_body`` with unsafe keys already stripped (they are dropped at validation, so a
key such as ``api_key`` never reaches the store).

Ranges where the specification gives none follow the OpenAI API: ``temperature`` 0-2, ``top_p``
and ``min_p`` 0-1, penalties -2..2, ``max_output_tokens`` >= 1; ``top_k`` >= -1 (``-1`` is
"off" on vLLM); ``repetition_penalty`` > 0.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError
from pydantic_core import InitErrorDetails

from evalnb.suite._validation import ManifestModel, manifest_error, problem, show_value, union_message
from evalnb.errors import ManifestError

__all__ = [
    "Generation",
    "ALIASES",
    "OPENAI_COMPATIBLE_FIELDS",
    "PASSTHROUGH_FIELDS",
    "EXECUTION_FIELDS",
    "UNSAFE_EXTRA_BODY_KEYS",
    "safe_extra_body",
]

ALIASES = {"max_gen_toks": "max_output_tokens", "until": "stop"}

# Sent to every upstream, OpenAI included (Responses-style names).
OPENAI_COMPATIBLE_FIELDS = frozenset(
    {
        "instructions",
        "temperature",
        "top_p",
        "max_output_tokens",
        "stop",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_tool_calls",
        "reasoning",
        "text",
        "truncation",
        "service_tier",
        "presence_penalty",
        "frequency_penalty",
    }
)
# Sent only to OpenAI-compatible servers that are not OpenAI itself.
PASSTHROUGH_FIELDS = frozenset(
    {
        "top_k",
        "min_p",
        "repetition_penalty",
        "do_sample",
        "extra_body",
        "chat_template_kwargs",
        "prefill_think",
        "use_cache",
    }
)
# Used by the runner itself, never sent to a model.
EXECUTION_FIELDS = frozenset({"timeout_seconds", "max_retries", "max_empty_retries"})

# Keys extra_body may never set: the request's identity and streaming, and anything that
# authenticates. Compared case-insensitively with '-' read as '_'.
UNSAFE_EXTRA_BODY_KEYS = frozenset(
    {
        "model",
        "input",
        "messages",
        "prompt",
        "stream",
        "stream_options",
        "api_key",
        "apikey",
        "x_api_key",
        "api_base",
        "base_url",
        "authorization",
        "auth",
        "headers",
        "extra_headers",
        "cookie",
        "cookies",
        "token",
        "access_token",
        "bearer",
        "credentials",
        "organization",
        "project",
    }
)
_UNSAFE_PARTS = ("api_key", "apikey", "secret", "password", "authorization", "credential")


def _unsafe(key: Any) -> bool:
    name = str(key).lower().replace("-", "_")
    return name in UNSAFE_EXTRA_BODY_KEYS or any(part in name for part in _UNSAFE_PARTS)


def safe_extra_body(extra: dict[str, Any] | None) -> dict[str, Any]:
    """``extra_body`` without keys that could override the request or carry credentials."""
    return {key: value for key, value in (extra or {}).items() if not _unsafe(key)}


def _warn_dropped(extra: Any) -> None:
    """Say which ``extra_body`` keys are dropped (not a word used to be said): once per call."""
    import warnings

    if not isinstance(extra, dict):
        return
    dropped = [str(key) for key in extra if _unsafe(key)]
    if not dropped:
        return
    why = []
    if any(str(k).lower() in ("stream", "stream_options") for k in dropped):
        why.append("evalnb reads each reply whole and never streams")
    if any(str(k).lower() not in ("stream", "stream_options") for k in dropped):
        why.append("extra_body may not change the request's model or prompt, nor carry credentials "
                   "(keys come from Model(api_key_env=...))")
    warnings.warn(f"generation.extra_body: {', '.join(map(repr, dropped))} ignored, not sent: {'; '.join(why)}",
                  UserWarning, stacklevel=3)


Stop = Annotated[str | list[str], union_message("a string or a list of strings")]


class Generation(ManifestModel):
    """Settings for candidate-model calls; every field is optional."""

    # Responses-style fields (OPENAI_COMPATIBLE_FIELDS)
    instructions: str | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    max_gen_toks: Annotated[int, Field(ge=1)] | None = Field(default=None, exclude=True, repr=False)
    stop: Stop | None = None
    until: Stop | None = Field(default=None, exclude=True, repr=False)
    tools: list[dict[str, Any]] | None = None
    tool_choice: Annotated[str | dict[str, Any], union_message("a string or an object")] | None = None
    parallel_tool_calls: bool | None = None
    max_tool_calls: Annotated[int, Field(ge=1)] | None = None
    reasoning: dict[str, Any] | None = None
    text: dict[str, Any] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    service_tier: str | None = None
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None

    # Provider pass-through (PASSTHROUGH_FIELDS)
    top_k: Annotated[int, Field(ge=-1)] | None = None
    min_p: Annotated[float, Field(ge=0, le=1)] | None = None
    repetition_penalty: Annotated[float, Field(gt=0)] | None = None
    do_sample: bool | None = None
    extra_body: dict[str, Any] | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    prefill_think: Annotated[bool | str, union_message("true, false or a string")] | None = None
    use_cache: bool | None = None

    # Execution controls (EXECUTION_FIELDS)
    timeout_seconds: Annotated[int, Field(ge=1, le=3600)] = 120
    max_retries: Annotated[int, Field(ge=0, le=10)] = 2
    max_empty_retries: Annotated[int, Field(ge=0, le=10)] = 0

    @classmethod
    def from_value(cls, value: Generation | dict[str, Any] | None) -> Generation:
        """Read run settings from None (all defaults), a dict or a Generation."""
        if value is None:
            return cls()
        if isinstance(value, Generation):
            return value
        if not isinstance(value, dict):
            msg = f"must be an object (found {show_value(value)})"
            raise ManifestError([{"loc": "generation", "msg": msg, "type": "model_type"}])
        try:
            generation = cls.model_validate(value)
        except ValidationError as exc:
            raise manifest_error(exc, prefix="generation") from None
        _warn_dropped(value.get("extra_body"))
        return generation

    def canonical(self) -> dict[str, Any]:
        """The settings as stored and hashed: set fields only, canonical names, no None."""
        return self.model_dump(mode="json", exclude_unset=True, exclude_none=True)

    @classmethod
    def _fill_defaults(cls, data: dict[str, Any]) -> dict[str, Any]:
        fill: dict[str, Any] = {}
        for key in ("stop", "until"):
            if isinstance(data.get(key), str):
                fill[key] = [data[key]]
        extra = data.get("extra_body")
        if isinstance(extra, dict) and any(_unsafe(key) for key in extra):
            fill["extra_body"] = safe_extra_body(extra)
        return {**data, **fill} if fill else data

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        problems = []
        for alias, field in ALIASES.items():
            given, canonical = data.get(alias), data.get(field)
            if given is not None and canonical is not None and given != canonical:
                msg = (
                    f"alias of {field}, which is also given with a different value "
                    f"({show_value(given)} vs {show_value(canonical)}); give one of them"
                )
                problems.append(problem((alias,), "conflict", msg, given))
        return problems

    @classmethod
    def _fold_aliases(cls, data: dict[str, Any]) -> dict[str, Any]:
        if not ALIASES.keys() & data.keys():
            return data
        data = dict(data)
        for alias, field in ALIASES.items():
            value = data.pop(alias, None)
            if value is not None and data.get(field) is None:
                data[field] = value
        return data
