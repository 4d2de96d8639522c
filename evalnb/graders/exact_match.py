"""Exact match: 1.0 when the extracted answer equals the target, else 0.0.

Scores ``sample["extracted_output"]`` against ``item["target"]`` as strings. Surrounding
whitespace is ignored on both sides (a trailing newline in a target template should not fail
every sample); everything else must match exactly. A ``None`` extracted output (the output
extraction found no answer) scores 0.0: falling back to the raw text would reward outputs that
ignored the requested format.

Adapt: set ``IGNORE_CASE = True`` for case-insensitive matching, or ``STRIP = False`` to
compare byte for byte. Use ``normalized_exact_match.py`` for SQuAD-style normalisation.
Manifest: ``{"type": "python", "contract": "sample", "metric_id": "exact_match", "source": ...}``.
"""

STRIP = True
IGNORE_CASE = False


def _prepare(text):
    text = str(text)
    if STRIP:
        text = text.strip()
    if IGNORE_CASE:
        text = text.casefold()
    return text


def grade(sample, item):
    predicted = sample.get("extracted_output")
    if predicted is None:
        return 0.0
    target = item.get("target")
    if target is None:
        target = sample.get("target")
    if target is None:
        raise ValueError("exact_match: the item has no target to compare with")
    return 1.0 if _prepare(predicted) == _prepare(target) else 0.0
