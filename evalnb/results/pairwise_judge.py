"""What a pairwise judge is asked and how its reply is read: the template, the verdict, the swap.

MT-Bench's pairwise judge: one prompt shows the question and two answers (A shown first, B
second) and asks for a short comparison ending in ``[[A]]``, ``[[B]]`` or ``[[C]]`` (a tie).
The reply's *last* such mark is the verdict; a reply with none is an error, never a guess.
With both orders judged (``swap``), a verdict that follows the position instead of the answer
(A first, then A again when the answers changed places) becomes a tie, and the pair is
``consistent=False``: MT-Bench's "inconsistent → tie" rule.

Pure functions: no calls, no store.
"""

from __future__ import annotations

import re

__all__ = ["DEFAULT_TEMPLATE", "DEFAULT_TEMPLATE_WITH_REFERENCE", "check_template", "combine", "in_candidate_terms",
           "parse_verdict",
           "render", "template_for"]

_INSTRUCTIONS = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by two AI assistants "
    "to the user question displayed below. You should choose the assistant that follows the user's instructions "
    "and answers the user's question better. Your evaluation should consider factors such as the helpfulness, "
    "relevance, accuracy, depth, creativity, and level of detail of their responses.{reference} Begin your "
    "evaluation by comparing the two responses and provide a short explanation. Avoid any position biases and "
    "ensure that the order in which the responses were presented does not influence your decision. Do not allow "
    "the length of the responses to influence your evaluation. Do not favor certain names of the assistants. Be "
    "as objective as possible. After providing your explanation, output your final verdict by strictly following "
    'this format: "[[A]]" if assistant A is better, "[[B]]" if assistant B is better, and "[[C]]" for a tie.'
)
_ANSWERS = (
    "[The Start of Assistant A's Answer]\n{{output_a}}\n[The End of Assistant A's Answer]\n\n"
    "[The Start of Assistant B's Answer]\n{{output_b}}\n[The End of Assistant B's Answer]"
)
DEFAULT_TEMPLATE = _INSTRUCTIONS.format(reference="") + "\n\n[User Question]\n{{prompt}}\n\n" + _ANSWERS
DEFAULT_TEMPLATE_WITH_REFERENCE = (
    _INSTRUCTIONS.format(reference=" A reference answer is given: use it to check the responses' correctness.")
    + "\n\n[User Question]\n{{prompt}}\n\n[The Start of Reference Answer]\n{{target}}\n"
      "[The End of Reference Answer]\n\n" + _ANSWERS
)

FIELDS = ("prompt", "output_a", "output_b", "target")
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_MARK = re.compile(r"\[\[([ABC])\]\]")
_VERDICT = {"A": "first", "B": "second", "C": "tie"}


def check_template(template: str) -> str:
    """``template`` if it is usable: a string with ``{{output_a}}`` and ``{{output_b}}`` and no other
    placeholder than ``{{prompt}}`` and ``{{target}}``; else a ValueError saying what is wrong."""
    if not isinstance(template, str):
        raise TypeError(f"template must be a string with {{{{output_a}}}} and {{{{output_b}}}}, "
                        f"got {type(template).__name__}")
    found = set(_PLACEHOLDER.findall(template))
    unknown = sorted(found - set(FIELDS))
    if unknown:
        raise ValueError(f"template has unknown placeholder(s) {', '.join('{{' + u + '}}' for u in unknown)}; "
                         f"it may use {', '.join('{{' + f + '}}' for f in FIELDS)}")
    missing = [f for f in ("output_a", "output_b") if f not in found]
    if missing:
        raise ValueError(f"template lacks {' and '.join('{{' + m + '}}' for m in missing)}: the judge must see "
                         "both outputs (output_a is the one shown first)")
    return template


def template_for(template: str | None, target: str | None) -> str:
    """The template an item is judged with: the caller's, else the default (with the reference
    section when the item has a non-empty target)."""
    if template is not None:
        return template
    return DEFAULT_TEMPLATE_WITH_REFERENCE if isinstance(target, str) and target.strip() else DEFAULT_TEMPLATE


def render(template: str, *, prompt: str, output_a: str, output_b: str, target: str | None = None) -> str:
    """``template`` with its placeholders filled in one pass (an output that contains
    ``{{output_b}}`` stays as written)."""
    values = {"prompt": prompt or "", "output_a": output_a, "output_b": output_b, "target": target or ""}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def parse_verdict(text: str | None) -> str | None:
    """``"first"``, ``"second"`` or ``"tie"`` from the reply's last ``[[A]]``/``[[B]]``/``[[C]]``; None when it has none."""
    if not isinstance(text, str):
        return None
    marks = _MARK.findall(text)
    return _VERDICT[marks[-1]] if marks else None


def combine(ab: str | None, ba: str | None, *, swap: bool) -> tuple[str | None, bool | None]:
    """(verdict, consistent) of one pair from its verdicts in candidate terms (``"a"``, ``"b"``, ``"tie"``).

    ``ab``: with ``a`` shown first; ``ba``: with ``b`` shown first. Without ``swap`` the verdict
    is ``ab`` and consistency unknown (None). With it, the same verdict both ways stands; any
    other pair of verdicts (a flip, or a win one way and a tie the other) is a tie, not consistent.
    A missing verdict (an error) leaves the pair without one: (None, None).
    """
    if not swap:
        return ab, None
    if ab is None or ba is None:
        return None, None
    return (ab, True) if ab == ba else ("tie", False)


def in_candidate_terms(verdict: str | None, *, a_first: bool) -> str | None:
    """A positional verdict (first / second / tie) as ``"a"``, ``"b"`` or ``"tie"``."""
    if verdict is None or verdict == "tie":
        return verdict
    return "a" if (verdict == "first") == a_first else "b"
