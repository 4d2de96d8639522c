"""Pure helpers for identity and secrecy: canonical JSON, cache keys, run signatures, redaction.

Everything here is a pure function so the runner, the store and the tests agree on what
"the same request" and "the same run" mean without touching SQLite.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Callable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "[redacted]"

# Generation fields that change how we call, never what comes back: a new timeout or retry
# budget must not invalidate the output cache or start a new run.
EXECUTION_ONLY_FIELDS = frozenset({"timeout_seconds", "max_retries", "max_empty_retries"})

# Fields of a model description that are safe to persist; everything else (api_key,
# headers, ...) is dropped on the way in.
MODEL_FIELDS = ("name", "base_url", "api", "label")

_SECRET_KEY_NAMES = frozenset(
    {
        "api_key", "apikey", "x_api_key", "authorization", "proxy_authorization", "password",
        "passwd", "secret", "client_secret", "access_token", "refresh_token", "auth_token",
        "bearer", "hf_token", "token", "cookie", "set_cookie", "private_key",
    }
)
_SECRET_KEY_SUFFIXES = ("_api_key", "_apikey", "_secret", "_password", "_access_token", "_auth_token")


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no spaces: equal data gives equal text (and equal hashes)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_generation(generation: Mapping[str, Any] | None) -> dict[str, Any]:
    """Generation settings as they affect outputs: None values dropped, keys sorted."""
    if generation is None:
        return {}
    if not isinstance(generation, Mapping):
        raise TypeError(f"generation must be a dict, got {type(generation).__name__}")
    return {k: generation[k] for k in sorted(generation) if generation[k] is not None}


def normalize_endpoint(endpoint: str | None) -> str:
    """`http://h/v1/` and `http://h/v1` are the same endpoint; credentials never count."""
    return redact_url(endpoint).rstrip("/") if endpoint else ""


def request_key(model_name: str, endpoint: str | None, api: str, prompt: str, generation: Mapping[str, Any] | None) -> str:
    """The output-cache key of one model call: sha256 of the canonical JSON of what decides it.

    Execution-only settings (timeouts, retry budgets) are left out, so changing them reuses
    cached outputs; `None` generation values count as unset.
    """
    gen = {k: v for k, v in canonical_generation(generation).items() if k not in EXECUTION_ONLY_FIELDS}
    payload = {
        "v": 1,
        "model": model_name,
        "endpoint": normalize_endpoint(endpoint),
        "api": api,
        "prompt": prompt,
        "generation": gen,
    }
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def request_key_function(
    model_name: str, endpoint: str | None, api: str, generation: Mapping[str, Any] | None
) -> Callable[[str], str]:
    """`request_key` with everything but the prompt fixed: the same keys, made faster.

    A run computes one key per (model, item); the canonical JSON around the prompt is the same
    each time, so it is serialised and hashed once and only the prompt is added per call.
    """
    sentinel = "\u0000evalnb-prompt\u0000"
    text = canonical_json({
        "v": 1, "model": model_name, "endpoint": normalize_endpoint(endpoint), "api": api,
        "prompt": sentinel,
        "generation": {k: v for k, v in canonical_generation(generation).items() if k not in EXECUTION_ONLY_FIELDS},
    })
    prefix, suffix = text.split(canonical_json(sentinel))
    head = hashlib.sha256(prefix.encode("utf-8"))
    tail = suffix.encode("utf-8")
    dumps = json.JSONEncoder(ensure_ascii=False).encode

    def key(prompt: str) -> str:
        h = head.copy()
        h.update(dumps(prompt).encode("utf-8") + tail)
        return h.hexdigest()

    return key


def run_signature(
    suite_version: str,
    models: list[dict[str, Any]],
    generation: Mapping[str, Any] | None,
    task_ids: Iterable[str] | None,
    max_samples: int | None,
    judge_model: str | None = None,
    embedding_model: str | None = None,
) -> str:
    """What makes two runs "the same run": a died run with this signature can be continued.

    `models` are sanitized model dicts (see `sanitize_models`); their order does not matter,
    nor does the order of `task_ids`. Concurrency and execution-only settings do not count.
    """
    gen = {k: v for k, v in canonical_generation(generation).items() if k not in EXECUTION_ONLY_FIELDS}
    payload = {
        "suite_version": suite_version,
        "models": sorted((canonical_json(m) for m in models)),
        "generation": gen,
        "task_ids": sorted(task_ids) if task_ids is not None else None,
        "max_samples": max_samples,
        "judge_model": judge_model,
        "embedding_model": embedding_model,
    }
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def is_secret_key(name: str) -> bool:
    """True for dict keys that name credentials (api_key, Authorization, *_secret, ...)."""
    norm = name.strip().lower().replace("-", "_")
    return norm in _SECRET_KEY_NAMES or norm.endswith(_SECRET_KEY_SUFFIXES)


def redact_url(url: str) -> str:
    """Drop `user:password@` and credential-looking query parameters from a URL."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc.rsplit("@", 1)[-1] if "@" in parts.netloc else parts.netloc
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_secret_key(k) or k.lower() == "key" for k, _ in pairs):
            query = urlencode([(k, REDACTED if is_secret_key(k) or k.lower() == "key" else v) for k, v in pairs])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact(obj: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of `obj` (JSON-like) with credential-named keys and known secret strings masked.

    Values under keys such as `api_key` or `Authorization` become "[redacted]", and any
    occurrence of a string in `secrets` (the actual keys in use) inside any string is replaced.
    """
    known = sorted({s for s in secrets if isinstance(s, str) and len(s) >= 4}, key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(s) for s in known)) if known else None
    return _redact(obj, pattern)


def _redact(obj: Any, pattern: re.Pattern[str] | None) -> Any:
    if isinstance(obj, str):
        return pattern.sub(REDACTED, obj) if pattern is not None else obj
    if isinstance(obj, Mapping):
        return {
            k: (REDACTED if isinstance(k, str) and is_secret_key(k) and v is not None else _redact(v, pattern))
            for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return [_redact(v, pattern) for v in obj]
    return obj


def model_secrets(model: Any) -> list[str]:
    """The credential strings a Model-like object carries (its api_key and auth headers).

    `evalnb.Model.secrets()` also resolves a key read from the environment.
    """
    found: list[str] = []
    secrets_method = getattr(model, "secrets", None)
    if callable(secrets_method) and not isinstance(model, Mapping):
        found.extend(s for s in secrets_method() if isinstance(s, str))
    get = model.get if isinstance(model, Mapping) else lambda k, d=None: getattr(model, k, d)
    for name in ("api_key", "key", "token"):
        value = get(name, None)
        if isinstance(value, str) and value:
            found.append(value)
    headers = get("headers", None)
    if isinstance(headers, Mapping):
        for k, v in headers.items():
            if isinstance(v, str) and is_secret_key(str(k)):
                found.append(v)
                if v.lower().startswith("bearer "):
                    found.append(v[7:])
    return found


def sanitize_models(models: Iterable[Any]) -> list[dict[str, Any]]:
    """Persistable model descriptions: only name/base_url/api/label, never keys or headers.

    Accepts `evalnb.Model` objects or dicts. The label defaults to the name and must be unique,
    because samples are keyed by it.
    """
    out: list[dict[str, Any]] = []
    for i, model in enumerate(models):
        get = model.get if isinstance(model, Mapping) else lambda k, d=None, m=model: getattr(m, k, d)
        name = get("name", None)
        if not isinstance(name, str) or not name:
            raise ValueError(f"models[{i}]: a model needs a non-empty string name")
        base_url = get("base_url", None)
        entry = {
            "name": name,
            "base_url": redact_url(str(base_url)) if base_url else None,
            "api": get("api", None) or "responses",
            "label": get("label", None) or name,
        }
        out.append(entry)
    if not out:
        raise ValueError("a run needs at least one model")
    labels = [m["label"] for m in out]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ValueError(f"model labels must be unique within a run; repeated: {', '.join(dupes)}")
    return out
