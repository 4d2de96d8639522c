"""Embedding similarity: cosine similarity between the answer and the target, in [-1, 1].

One call ``ctx.embeddings_create(model="auto", input=[answer, target])`` (the run's embedding
model) embeds both texts; the reply is the Embeddings list JSON
``{"object": "list", "data": [{"embedding": [...], "index": 0}, ...]}``, matched by ``index``.
Base64-encoded embeddings (little-endian float32) are decoded too.

The answer is ``sample["extracted_output"]``; ``None`` or blank scores 0.0 without a model
call (no answer is no similarity). A zero vector or a reply without two embeddings raises
ValueError. Note that cosine values depend on the embedding model: compare models with the
same embedding model only.

Adapt: set ``USE_RAW_OUTPUT = True`` to embed ``output_text`` instead. Needs
``contract: "model_backed"``; one model call per sample.
"""

import base64
import math
import struct

USE_RAW_OUTPUT = False


def _vector(entry):
    embedding = entry.get("embedding") if isinstance(entry, dict) else None
    if isinstance(embedding, str):
        raw = base64.b64decode(embedding)
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    if isinstance(embedding, list) and embedding:
        return [float(x) for x in embedding]
    raise ValueError(f"embedding_similarity: no embedding in reply entry {str(entry)[:120]}")


def embeddings(reply, count):
    """The ``count`` vectors of an Embeddings reply, ordered by their ``index``."""
    data = reply.get("data") if isinstance(reply, dict) else None
    if not isinstance(data, list) or len(data) != count:
        got = str(reply)[:200]
        raise ValueError(f"embedding_similarity: expected {count} embeddings, got {got}")
    ordered = sorted(data, key=lambda e: e.get("index", 0) if isinstance(e, dict) else 0)
    return [_vector(entry) for entry in ordered]


def cosine(u, v):
    if len(u) != len(v):
        raise ValueError(f"embedding_similarity: vectors differ in length ({len(u)} vs {len(v)})")
    norm = math.sqrt(math.fsum(x * x for x in u)) * math.sqrt(math.fsum(y * y for y in v))
    if norm == 0.0:
        raise ValueError("embedding_similarity: an embedding is the zero vector")
    return max(-1.0, min(1.0, math.fsum(x * y for x, y in zip(u, v)) / norm))


def grade(sample, item, ctx):
    answer = sample.get("output_text" if USE_RAW_OUTPUT else "extracted_output")
    if answer is None or not str(answer).strip():
        return {"scores": {"cosine": 0.0}}
    target = item.get("target")
    if target is None or not str(target).strip():
        raise ValueError("embedding_similarity: the item has an empty target")
    reply = ctx.embeddings_create(model="auto", input=[str(answer), str(target)])
    u, v = embeddings(reply, 2)
    return {"scores": {"cosine": cosine(u, v)}}
