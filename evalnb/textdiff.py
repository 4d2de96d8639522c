"""Word-level differences between two texts (templates, rendered prompts), as marked-up text.

Every comparison view shows what changed in a prompt the same way: deleted words as
``<del>[-old words-]</del>``, inserted words as ``<ins>[+new words+]</ins>``. The brackets make the
change readable without colour (a printout, a screen reader, plain-text mail); the tags and
their inline styles make it stand out where HTML is drawn. Whitespace is kept as written, and
all text is HTML-escaped here: callers pass user text as it is.
"""

from __future__ import annotations

import difflib
import html
import re

__all__ = ["DEL_STYLE", "INS_STYLE", "word_diff", "word_diff_html", "word_diff_text"]

INS_STYLE = "background:#dcfce7;color:#14532d;text-decoration:underline"
DEL_STYLE = "background:#fee2e2;color:#7f1d1d;text-decoration:line-through"
_TOKENS = re.compile(r"\s+|[^\s]+")
MAX_TOKENS = 20_000  # longer texts are compared line by line (difflib is quadratic in the worst case)


def word_diff(old: str, new: str) -> list[tuple[str, str]]:
    """``[(op, text)]`` with op ``"="``, ``"-"`` (only in `old`) or ``"+"`` (only in `new`), in reading order."""
    old, new = old or "", new or ""
    a, b = _TOKENS.findall(old), _TOKENS.findall(new)
    if len(a) + len(b) > MAX_TOKENS:
        a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    out: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(("=", "".join(a[i1:i2])))
            continue
        if op in ("delete", "replace"):
            out.append(("-", "".join(a[i1:i2])))
        if op in ("insert", "replace"):
            out.append(("+", "".join(b[j1:j2])))
    return out


def _split_space(text: str) -> tuple[str, str, str]:
    """(leading space, words, trailing space): markers go around the words, not the spaces."""
    core = text.strip()
    if not core:
        return text, "", ""
    start = text.index(core)
    return text[:start], core, text[start + len(core):]


def word_diff_html(old: str, new: str) -> str:
    """`new` as HTML, with the words `old` had instead struck through and the new ones underlined."""
    parts = []
    for op, text in word_diff(old, new):
        if op == "=":
            parts.append(html.escape(text))
            continue
        lead, core, trail = _split_space(text)
        if not core:
            parts.append(html.escape(text) if op == "+" else "")
            continue
        tag, style, mark = ("ins", INS_STYLE, "+") if op == "+" else ("del", DEL_STYLE, "-")
        parts.append(f"{html.escape(lead)}<{tag} style='{style}'>[{mark}{html.escape(core)}{mark}]</{tag}>"
                     f"{html.escape(trail)}")
    return "".join(parts)


def word_diff_text(old: str, new: str) -> str:
    """The same difference as plain text: ``[-old-]`` and ``[+new+]`` in place."""
    parts = []
    for op, text in word_diff(old, new):
        if op == "=":
            parts.append(text)
            continue
        lead, core, trail = _split_space(text)
        parts.append(f"{lead}[{op}{core}{op}]{trail}" if core else (text if op == "+" else ""))
    return "".join(parts)
