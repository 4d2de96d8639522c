"""Token F1 (SQuAD): harmonic mean of token precision and recall between the answer and the
best-matching gold answer, in [0, 1].

Both sides are normalised as in ``normalized_exact_match.py`` (lowercase, no punctuation, no
a/an/the, collapsed whitespace) and split on whitespace; overlap counts repeated tokens once
per occurrence. When either side has no tokens, F1 is 1.0 if both are empty, else 0.0 (SQuAD
v2's rule for unanswerable questions). Gold answers come from ``ANSWER_FIELDS`` (default
``answers``), else ``item["target"]`` (a JSON array of strings counts as several answers); the
score is the maximum over them. A ``None`` extracted output scores 0.0.

Adapt: edit ``ANSWER_FIELDS``/``ARTICLES`` like in ``normalized_exact_match.py``; replace
``tokens`` for languages that do not separate words with spaces.
Manifest: ``{"type": "python", "contract": "sample", "metric_id": "f1", "source": ...}``.
"""

import json
import re
import string
import unicodedata
from collections import Counter

ANSWER_FIELDS = ("answers",)
ARTICLES = ("a", "an", "the")

_ASCII_PUNCT = frozenset(string.punctuation)


def normalize(text):
    """Lowercase, drop punctuation and articles, collapse whitespace."""
    text = str(text).lower()
    text = "".join(
        ch for ch in text if ch not in _ASCII_PUNCT and not unicodedata.category(ch).startswith("P")
    )
    if ARTICLES:
        text = re.sub(r"\b(" + "|".join(map(re.escape, ARTICLES)) + r")\b", " ", text)
    return " ".join(text.split())


def tokens(text):
    return normalize(text).split()


def f1(predicted, gold):
    """SQuAD token F1 between two strings."""
    pred_tokens, gold_tokens = tokens(predicted), tokens(gold)
    if not pred_tokens or not gold_tokens:
        return 1.0 if pred_tokens == gold_tokens else 0.0
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _answer_list(value):
    if value is None:
        return None
    if isinstance(value, dict):
        for key in ("text", "aliases", "value"):
            if key in value:
                return _answer_list(value[key])
        return None
    if isinstance(value, str):
        if value.strip().startswith("["):
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = None
            if isinstance(parsed, list):
                return _answer_list(parsed)
        return [value]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if v is not None]
    return [str(value)]


def _json_string_list(text):
    if not isinstance(text, str) or not text.strip().startswith("["):
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    if isinstance(parsed, list) and parsed and all(isinstance(v, str) for v in parsed):
        return parsed
    return None


def gold_answers(item):
    """The acceptable answers: ANSWER_FIELDS first, then the target."""
    for field in ANSWER_FIELDS:
        answers = _answer_list(item.get(field))
        if answers is not None:
            answers = [a for a in answers if normalize(a)]
            return answers or [""]
    target = item.get("target")
    if target is None:
        raise ValueError("token_f1: the item has neither answers nor a target")
    return _json_string_list(target) or [str(target)]


def grade(sample, item):
    predicted = sample.get("extracted_output")
    if predicted is None:
        return 0.0
    return max(f1(predicted, gold) for gold in gold_answers(item))
