"""A sentiment task whose stand-in model reads the prompt: a definition of "neutral" fixes its answers.

The server answers ``neutral`` for a factual review only when the prompt contains
``DEFINITION`` (the sentence a prompt variant adds); otherwise it calls it ``positive``. So a
variant's change shows in its scores, and which items it fixes is known in advance.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DEFINITION = "Neutral means the review only states facts."
PLAIN = "Classify the sentiment of this review as positive, negative or neutral.\nReview: {{text}}\nSentiment:"
DEFINED = ("Classify the sentiment of this review as positive, negative or neutral.\n" + DEFINITION
           + "\nReview: {{text}}\nSentiment:")
N_ROWS = 30


def sentiment_rows(n: int = N_ROWS) -> list[dict[str, Any]]:
    kinds = [("loved it, great", "positive"), ("ships in a box of 3", "neutral"), ("broke at once, awful", "negative")]
    return [{"text": f"item {i}: {kinds[i % 3][0]}", "label": kinds[i % 3][1]} for i in range(n)]


def sentiment_manifest(folder: Path, n: int = N_ROWS) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reviews.jsonl").write_text("".join(json.dumps(r) + "\n" for r in sentiment_rows(n)), encoding="utf-8")
    return {"tasks": [{
        "id": "reviews", "type": "classification", "dataset": {"path": "reviews.jsonl"},
        "prompt_template": PLAIN, "target_template": "{{label}}", "grader": {"builtin": "exact_match"},
    }]}


def reads_prompt(body: dict) -> str:
    """LocalModelServer responder: "weak" misreads every 5th review; facts are neutral only if defined."""
    if isinstance(body.get("input"), str):  # Responses API (instructions are the system text)
        prompt = f"{body.get('instructions') or ''}\n{body['input']}"
    else:  # chat: the system message too
        prompt = "\n".join(str(m.get("content")) for m in body["messages"])
    review = prompt.split("Review:")[-1]
    if "great" in review:
        return "positive"
    if "awful" in review:
        return "negative" if body.get("model") != "weak" or "item 5:" not in review else "positive"
    return "neutral" if DEFINITION in prompt else "positive"
