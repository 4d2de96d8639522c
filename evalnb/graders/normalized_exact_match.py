"""Normalized exact match (SQuAD-style): 1.0 when the answer equals any gold answer after
normalisation, else 0.0.

Normalisation: lowercase; delete punctuation (ASCII ``string.punctuation`` as in the SQuAD
script, plus every Unicode punctuation character so curly quotes and CJK marks go too); remove
the English articles a/an/the as whole words; collapse whitespace.

Gold answers, first found wins:
1. the row field(s) named in ``ANSWER_FIELDS`` (default ``answers``): a list of strings, a JSON
   array in a string (CSV rows), a dict with ``text``/``aliases``/``value`` (SQuAD, TriviaQA),
   or a single value. A present but empty list means "no answer" (SQuAD v2): gold is "".
2. ``item["target"]``; a target whose text is a JSON array of strings (a template rendering a
   list) is read as that list.
A ``None`` extracted output (extraction found nothing) scores 0.0.

Adapt: edit ``ANSWER_FIELDS`` for your dataset's field, ``ARTICLES`` for other languages.
Manifest: ``{"type": "python", "contract": "sample", "metric_id": "normalized_exact_match",
"source": ...}``.
"""

import json
import re
import string
import unicodedata

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
    """The acceptable answers for this item (see the module docstring for the order)."""
    for field in ANSWER_FIELDS:
        answers = _answer_list(item.get(field))
        if answers is not None:
            answers = [a for a in answers if normalize(a)]
            return answers or [""]
    target = item.get("target")
    if target is None:
        raise ValueError("normalized_exact_match: the item has neither answers nor a target")
    return _json_string_list(target) or [str(target)]


def grade(sample, item):
    predicted = sample.get("extracted_output")
    if predicted is None:
        return 0.0
    predicted = normalize(predicted)
    return 1.0 if any(predicted == normalize(gold) for gold in gold_answers(item)) else 0.0
