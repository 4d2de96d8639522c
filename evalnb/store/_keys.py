"""Pure helpers for identity: canonical JSON, cache keys, run signatures, persistable models.

Everything here is a pure function so the runner, the store and the tests agree on what
"the same request" and "the same run" mean without touching SQLite.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, Callable

from evalnb.redaction import redact_url

# Generation fields that change how we call, never what comes back: a new timeout or retry
# budget must not invalidate the output cache or start a new run.
EXECUTION_ONLY_FIELDS = frozenset({"timeout_seconds", "max_retries", "max_empty_retries"})

# Fields of a model description that are safe to persist; everything else (api_key,
# headers, ...) is dropped on the way in.
MODEL_FIELDS = ("name", "base_url", "api", "label")

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
    *,
    epochs: int = 1,
    judge_generation: Mapping[str, Any] | None = None,
) -> str:
    """What makes two runs "the same run": a died run with this signature can be continued.

    `models` are sanitized model dicts (see `sanitize_models`); their order does not matter,
    nor does the order of `task_ids`. Concurrency, budgets, prices and execution-only settings
    do not count. `epochs` counts only when it is not 1 and `judge_generation` only when set
    (it changes what judges answer, hence scores), so runs made before they existed keep their
    signature (and stay resumable and reusable).
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
    if epochs != 1:
        payload["epochs"] = epochs
    judge_gen = {k: v for k, v in canonical_generation(judge_generation).items() if k not in EXECUTION_ONLY_FIELDS}
    if judge_gen:
        payload["judge_generation"] = judge_gen
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def epoch_request_key(key: str, epoch: int) -> str:
    """The output-cache key of ask number ``epoch`` of a request whose first ask has ``key``.

    Epoch 0 is the request itself (so caches from before epochs existed stay valid); every
    later epoch gets a key of its own, so the store never answers epoch 1 with epoch 0's
    output, and epochs 0..K-1 keep their keys when K is raised (only the new ones are sent).
    """
    if epoch == 0:
        return key
    return hashlib.sha256(f"{key}|epoch={epoch}".encode("ascii")).hexdigest()


def bridge_request_key(kind: str, model_name: str, endpoint: str | None, api: str, body: Mapping[str, Any]) -> str:
    """The cache key of a grader's model call (``ctx.responses_create`` / ``ctx.embeddings_create``).

    It depends on exactly what is sent: the call kind, the judge model, its endpoint and API,
    and the whole request body (the judge_generation defaults merged in). Not on the run, the
    sample or the epoch: a judge asked the same question about the same answer is asked the
    same request, and two epochs whose candidate answers differ send different bodies anyway.
    A grader that asks the same thing again within one grading wants a new answer: the
    bridge then adds the repeat number (`repeat_request_key`). Prefixed so it never equals a
    candidate request's key.
    """
    payload = {"v": 1, "bridge": kind, "model": model_name, "endpoint": normalize_endpoint(endpoint), "api": api,
               "body": dict(body)}
    return "bridge-" + hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def repeat_request_key(key: str, repeat: int) -> str:
    """The key of the ``repeat``-th identical ask within one grading (0: the ask itself)."""
    if repeat == 0:
        return key
    return "bridge-" + hashlib.sha256(f"{key}|repeat={repeat}".encode("ascii")).hexdigest()


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
