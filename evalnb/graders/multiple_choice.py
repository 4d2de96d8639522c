"""Multiple-choice accuracy: 1.0 when the chosen option is the correct one, else 0.0.

Both ``sample["extracted_output"]`` and ``item["target"]`` are resolved to a choice index, in
this order:
1. the text of a choice (case-insensitive, surrounding whitespace ignored), so choices like
   ``["1", "2", "3"]`` are read as texts, not positions;
2. a letter ``A``-``Z`` (any case) alone or written ``(B)``, ``B.``, ``B)``, ``B:``, also
   when followed by the choice text as in ``B. Paris`` (but ``B Paris`` is free text): A is 0;
3. an integer index, counted from ``INDEX_BASE`` (0 as in MMLU's ``answer``; set 1 for
   1-based datasets such as Belebele's ``correct_answer_num``).
Choices come from ``item["choices"]`` (the task's), else the row's ``choices`` (a list, a JSON
array string, or a dict with a ``text`` list as in ARC). Without choices, letters and indices
still compare with each other and texts compare case-insensitively.

An answer that resolves to nothing (``None``, a letter past the last choice, free text) scores
0.0. A target that resolves to nothing raises ValueError: that is a dataset bug.
Manifest: ``{"type": "python", "contract": "sample", "metric_id": "accuracy", "source": ...}``.
"""

import json
import re

INDEX_BASE = 0

_LETTER = re.compile(r"^\(?([A-Za-z])(?:[).:\]]|\s*$)")


def _choices(item):
    value = item.get("choices")
    if value is None:
        value = (item.get("row") or {}).get("choices")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, dict):
        value = value.get("text")
    if isinstance(value, (list, tuple)) and value:
        return [str(v) for v in value]
    return None


def resolve(answer, choices):
    """The choice index an answer names, or None; without choices a normalised text key."""
    if answer is None:
        return None
    if isinstance(answer, bool):
        return None
    if isinstance(answer, int):
        index = answer - INDEX_BASE
        return index if choices is None or 0 <= index < len(choices) else None
    text = str(answer).strip()
    if not text:
        return None
    if choices is not None:
        folded = [c.strip().casefold() for c in choices]
        if text.casefold() in folded:
            return folded.index(text.casefold())
    letter = _LETTER.match(text)
    if letter:
        index = ord(letter.group(1).upper()) - ord("A")
        return index if choices is None or index < len(choices) else None
    if re.fullmatch(r"[-+]?\d+", text):
        return resolve(int(text), choices)
    return None if choices is not None else ("text", text.casefold())


def grade(sample, item):
    choices = _choices(item)
    target = item.get("target")
    gold = resolve(target, choices)
    if gold is None:
        raise ValueError(
            f"multiple_choice: target {target!r} is not a choice text, letter or index"
            + (f" of {len(choices)} choices" if choices else "")
        )
    predicted = resolve(sample.get("extracted_output"), choices)
    return 1.0 if predicted is not None and predicted == gold else 0.0
