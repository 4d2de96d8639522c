"""Candidates whose better answer is known per item, and judges that read them, for pairwise tests.

Each candidate answers item n with ``answer <n> quality <q>``, q = `quality(model, n)`; the fair
judge reads both answers from the test's `TEMPLATE` and prefers the higher quality (a tie when
equal), so the verdict of every pair is known before the judge is asked. The biased judge answers
``[[A]]`` whatever it reads. Used in-process and by the crash test's child process.
"""

from __future__ import annotations

import re
from typing import Any

from helpers.runner_kit import item_number

TEMPLATE = "Question: {{prompt}}\nFIRST: {{output_a}}\nSECOND: {{output_b}}\nWhich is better?"
UNPARSEABLE_ITEM = 2  # the fair judge's reply names no verdict for this item (in the "sloppy" mode)
_SEEN = re.compile(r"FIRST: answer \d+ quality (-?\d+)\nSECOND: answer \d+ quality (-?\d+)")


def quality(model: str, n: int) -> int:
    """How good ``model``'s answer to item n is: strong > mid > weak overall, with upsets; worst always last."""
    if model == "strong":
        return 0 if n % 4 == 3 else 3
    if model == "mid":
        return 4 if n % 5 == 0 else 2
    if model == "weak":
        return 5 if n % 6 == 1 else (3 if n % 7 == 2 else 1)
    return -1  # "worst"


def candidate(body: dict) -> str:
    n = item_number(body.get("input") if isinstance(body.get("input"), str) else "")
    return f"answer {n} quality {quality(str(body.get('model')), n or 0)}"


def better(a: str, b: str, n: int) -> str:
    """The verdict a fair judge gives (a, b) on item n: "a", "b" or "tie"."""
    qa, qb = quality(a, n), quality(b, n)
    return "a" if qa > qb else "b" if qb > qa else "tie"


def fair_judge(body: dict) -> str:
    text = body.get("input") if isinstance(body.get("input"), str) else ""
    found = _SEEN.search(text)
    if found is None:
        return "I cannot read the answers."
    first, second = int(found.group(1)), int(found.group(2))
    mark = "A" if first > second else "B" if second > first else "C"
    return f"Comparing [[A]] and [[B]] carefully. Final verdict: [[{mark}]]"


def sloppy_judge(body: dict) -> str:
    """The fair judge, except that item `UNPARSEABLE_ITEM` gets a reply without a verdict."""
    if item_number(body.get("input") or "") == UNPARSEABLE_ITEM:
        return "Both answers have merit; I will not choose. [[D]]"
    return fair_judge(body)


def biased_judge(body: dict) -> Any:
    return "The first one reads better. [[A]]"
