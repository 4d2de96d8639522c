"""Numeric match within a tolerance: 1.0 when the answer's number is close to the target's,
else 0.0.

Numbers are read from ``sample["extracted_output"]`` and ``item["target"]``. A text that is
one number is read whole: sign, thousands commas (``1,234``), decimals, exponents (``1e-3``),
fractions (``1/4``, ``-3/8``, LaTeX ``\\frac{1}{4}``), with ``$ € £ %`` and a trailing period
ignored (``50%`` reads as 50, not 0.5). Any other text is searched like the ``number``
extraction: the first number after the last ``####`` / ``\\boxed{`` / "answer is" marker, else
the last number (so a GSM8K solution works as a target). Mixed numbers (``3 1/2``) are not
understood.

Closeness uses exact rational arithmetic (no overflow):
``|a - b| <= max(REL_TOL * max(|a|, |b|), ABS_TOL, item["tolerance"])``; ``item["tolerance"]``
is an optional absolute tolerance per row (a number or numeric string).
A ``None`` or number-free answer scores 0.0; a target without a number raises ValueError (a
data bug should fail the sample loudly, not score it 0).

Adapt: edit ``REL_TOL``/``ABS_TOL``; rename ``TOLERANCE_FIELD`` to your dataset's column.
Manifest: ``{"type": "python", "contract": "sample", "metric_id": "numeric_match", ...}``.
"""

import re
from fractions import Fraction

REL_TOL = 1e-6
ABS_TOL = 1e-9
TOLERANCE_FIELD = "tolerance"

_NUMBER = re.compile(
    r"(?<![\w.])-?(?:(?:\d{1,3}(?:,\d{3})+(?!,?\d)|\d+)(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
    r"(?:\s*/\s*\d+(?:\.\d+)?)?"
)
_MARKER = re.compile(r"####|\\boxed\{|\banswer is\b", re.IGNORECASE)
_FRAC = re.compile(r"\\[dt]?frac\{\s*(-?[\d.,]+)\s*\}\{\s*([\d.,]+)\s*\}")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?!,?\d)")


def _to_fraction(token):
    """A number token as an exact Fraction, or None."""
    token = token.strip().rstrip(".")
    token = _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), token)
    top, _, bottom = token.partition("/")
    try:
        value = Fraction(top.strip())
        if bottom:
            denominator = Fraction(bottom.strip())
            if denominator == 0:
                return None
            value /= denominator
    except (ValueError, ZeroDivisionError):
        return None
    return value


def parse_number(text):
    """The number a text states (see the module docstring), or None."""
    if text is None:
        return None
    text = str(text).replace("\u2212", "-").replace("{,}", ",")
    text = _FRAC.sub(r"\1/\2", text)
    whole = text.strip().strip("$€£%").strip()
    if whole.startswith("-$"):
        whole = "-" + whole[2:]
    if _NUMBER.fullmatch(whole.rstrip(".")):
        return _to_fraction(whole)
    for marker in reversed(list(_MARKER.finditer(text))):
        found = _NUMBER.search(text, marker.end())
        if found is not None:
            return _to_fraction(found.group(0))
    last = None
    for last in _NUMBER.finditer(text):
        pass
    return None if last is None else _to_fraction(last.group(0))


def _tolerance(item):
    value = item.get(TOLERANCE_FIELD)
    if value is None or value == "":
        return Fraction(0)
    parsed = parse_number(value)
    if parsed is None or parsed < 0:
        raise ValueError(f"numeric_tolerance: {TOLERANCE_FIELD}={value!r} is not a number >= 0")
    return parsed


def is_close(a, b, tolerance=Fraction(0)):
    """True when two Fractions differ by no more than the relative/absolute tolerance."""
    allowed = max(Fraction(REL_TOL) * max(abs(a), abs(b)), Fraction(ABS_TOL), tolerance)
    return abs(a - b) <= allowed


def grade(sample, item):
    target = item.get("target")
    gold = parse_number(target)
    if gold is None:
        raise ValueError(f"numeric_tolerance: target {target!r} contains no number")
    predicted = parse_number(sample.get("extracted_output"))
    if predicted is None:
        return 0.0
    return 1.0 if is_close(predicted, gold, _tolerance(item)) else 0.0
