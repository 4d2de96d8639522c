"""Output extraction: turns raw model text into ``extracted_output`` (SPEC §6 + Decisions).

One small factory per ``type`` builds a plain ``text -> str | None`` callable (the
lm-evaluation-harness filter idea); ``_FACTORIES`` is the dispatch table. The factory checks
the spec, so a bad spec raises ValueError while no model text can make extraction raise.

Choices where the specification is silent:

- A missing or null ``type`` (or a ``None`` spec) means ``none``; any other unknown value,
  "" included, is a ValueError.
- ``None`` text gives ``None`` for every type; a non-string text is read as ``str(text)``.
- ``none`` returns the cleaned text, "" when nothing is left (never ``None`` for a string).
- Cleaning (``clean_output``), in order: trailing end-of-text tokens (``<|endoftext|>``,
  ``<|im_end|>``, ``<|eot_id|>``, ``</s>``, repeated and/or whitespace-separated) are cut;
  every closed ``<think>…</think>`` / ``<reasoning>…</reasoning>`` block is removed (tags are
  case-insensitive); text up to the last closing tag left without an opening tag is removed (chat
  templates that put ``<think>`` in the prompt); an opening tag left unclosed *at the start*
  removes the rest (the model ran out of tokens while thinking), one unclosed mid-text is kept;
  then a code fence wrapping the whole output (a ```` ```lang ```` line, the body, a closing
  ```` ``` ````, no other fence inside) is unwrapped; surrounding whitespace is stripped.
  Quotes and markdown emphasis are kept.
- Every type reads only the first 100,000 characters of the text (``MAX_INPUT_CHARS``), as if
  the text ended there, and does work linear in them (``number`` included), so one runaway
  output (a repetition loop at max tokens, a megabyte of ``####``) costs milliseconds, not
  seconds, on the runner's event loop.
- ``regex`` / ``regex_last`` search the *raw* text (the pattern's author sees exactly what the
  model produced): ``$`` matches at the cut and a match cannot cross it. ``regex_last`` looks at the first 10,000 matches
  and returns the last of them. A search running over 0.25 s of CPU time counts as no match
  in `extract_output` (for ``regex_last`` the whole search); an extractor made with
  ``strict=True`` (the runner's) raises `ExtractionTimeout` instead, so the sample records
  why. Searches release the GIL (the ``regex`` module's ``concurrent``), so a thread can run
  them beside an event loop (`scoring.off_loop`). The group is returned as matched, "" included; a group
  that did not take part gives ``None``. ``group`` may be an int, a name, or a digit string.
- ``take_first``, ``label_set`` and ``number`` read the *cleaned* text, so a reasoning block
  cannot supply the label or the number.
- ``label_set``: a label matches where it is not preceded or followed by a word character;
  ties at one position go to the longer label, then to the earlier label in ``labels``.
  Labels must be a non-empty list of non-empty strings.
- ``number``: see ``_extract_number``; numbers are read as ASCII digits.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import regex

__all__ = ["ExtractionTimeout", "clean_output", "compile_pattern", "extract_output", "make_extractor",
           "may_run_long"]

MAX_PATTERN_CHARS = 1_000
MAX_INPUT_CHARS = 100_000
MAX_MATCHES = 10_000
REGEX_TIMEOUT_S = 0.25

Extractor = Callable[[str], "str | None"]
BOUNDED_TYPES = ("regex", "regex_last", "label_set")  # the types whose search has a time bound


class ExtractionTimeout(Exception):
    """A strict extractor's search ran over its time bound (not the same as "no match")."""

_FLAG_NAMES = {"i": "IGNORECASE", "m": "MULTILINE", "s": "DOTALL", "x": "VERBOSE"}


class _LazyPattern:
    """A module-level pattern compiled on first use.

    `import regex` plus these patterns cost ~15 ms, paid by every run that loads this module,
    while the common case (``none`` extraction of plain text) never needs them.
    """

    __slots__ = ("_source", "_flags", "_compiled")

    def __init__(self, source: str, *flags: str) -> None:
        self._source, self._flags, self._compiled = source, flags, None

    def __getattr__(self, name: str) -> Any:  # only for names the slots do not have
        compiled = self._compiled
        if compiled is None:
            import regex

            bits = 0
            for flag in self._flags:
                bits |= getattr(regex, flag)
            compiled = self._compiled = regex.compile(self._source, bits)
        return getattr(compiled, name)


def compile_pattern(pattern: str, flags: str = "") -> regex.Pattern:
    """Compile a manifest regex (cached); ValueError says what is wrong with it.

    ``flags`` is any combination of the lowercase letters ``i``, ``m``, ``s``, ``x`` (repeats
    allowed, ``None`` means none); other letters, uppercase included, are rejected.
    """
    if not isinstance(pattern, str):
        raise ValueError(f"pattern must be a string, got {type(pattern).__name__}")
    if flags is None:
        flags = ""
    if not isinstance(flags, str):
        raise ValueError(f"flags must be a string, got {type(flags).__name__}")
    return _compile(pattern, flags)


@functools.lru_cache(maxsize=512)
def _compile(pattern: str, flags: str) -> regex.Pattern:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"pattern is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}")
    import regex

    bits = 0
    for letter in flags:
        if letter not in _FLAG_NAMES:
            raise ValueError(f"unknown regex flag {letter!r}; use any of 'i', 'm', 's', 'x'")
        bits |= getattr(regex, _FLAG_NAMES[letter])
    try:
        return regex.compile(pattern, bits)
    except (regex.error, OverflowError, RecursionError, ValueError) as exc:
        raise ValueError(f"invalid regex {pattern!r}: {exc}") from None


def extract_output(text: str | None, spec: Any) -> str | None:
    """Apply an ``output_extraction`` spec (dict, model or None) to one model output."""
    return make_extractor(spec)(text)


def may_run_long(spec: Any) -> bool:
    """Whether ``spec``'s search can take long enough to need its time bound (regex-based types)."""
    return _param(spec, "type") in BOUNDED_TYPES


def make_extractor(spec: Any, *, timeout: float = REGEX_TIMEOUT_S,
                   strict: bool = False) -> Callable[[str | None], str | None]:
    """Check ``spec`` once and return the extractor; the runner builds one per task.

    ``timeout``: seconds of CPU time a search may take; past it the extractor returns None,
    or raises `ExtractionTimeout` when ``strict``.
    """
    kind = _param(spec, "type")
    kind = "none" if kind is None else kind
    factory = _FACTORIES.get(kind) if isinstance(kind, str) else None
    if factory is None:
        known = ", ".join(sorted(_FACTORIES))
        raise ValueError(f"unknown output_extraction type {kind!r}; expected one of {known}")
    if kind in BOUNDED_TYPES:
        extractor = factory(spec, _Bound(kind, _param(spec, "pattern"), timeout, strict))
    else:
        extractor = factory(spec)

    def run(text: str | None) -> str | None:
        if text is None:
            return None
        if not isinstance(text, str):
            text = str(text)
        return extractor(text[:MAX_INPUT_CHARS])

    return run


class _Bound:
    """A bounded type's time limit, and what running over it gives (None, or the error)."""

    __slots__ = ("kind", "pattern", "timeout", "strict")

    def __init__(self, kind: str, pattern: Any, timeout: float, strict: bool) -> None:
        self.kind, self.pattern, self.timeout, self.strict = kind, pattern, timeout, strict

    def timed_out(self) -> None:
        """Past the bound: None (the caller returns it), or `ExtractionTimeout` when strict."""
        if self.strict:
            what = f"the pattern {self.pattern!r}" if self.pattern is not None else "the labels"
            raise ExtractionTimeout(f"output_extraction {self.kind} timed out: the search for {what} ran over "
                                    f"{self.timeout:g} s of CPU time (a catastrophic-backtracking reply?)")


def _param(spec: Any, name: str) -> Any:
    if spec is None:
        return None
    if isinstance(spec, dict):
        return spec.get(name)
    return getattr(spec, name, None)


# --- none ---------------------------------------------------------------------------------

_END_TOKENS = ("<|endoftext|>", "<|im_end|>", "<|eot_id|>", "</s>")
_TAG_NAMES = ("think", "reasoning")
_THINK_TAG = _LazyPattern(r"<(/?)(think|reasoning)>", "IGNORECASE")
_LEADING_OPEN = _LazyPattern(r"\A\s*<(?:think|reasoning)>", "IGNORECASE")
_FENCE = _LazyPattern(r"\A```[^\n`]*\n(.*?)\n?```\Z", "DOTALL")


def clean_output(text: Any) -> str:
    """The ``none`` cleaning: model noise and surrounding whitespace removed (None -> "")."""
    if text is None:
        return ""
    if not isinstance(text, str):
        text = str(text)
    if "<" not in text and "`" not in text:
        return text.strip()  # the common case: nothing to remove but whitespace
    text = _strip_end_tokens(text)
    if "<" in text:
        text = _strip_reasoning(text)
    text = text.strip()
    if text.startswith("```"):
        fenced = _FENCE.match(text)
        if fenced and "```" not in fenced.group(1):
            text = fenced.group(1).strip()
    return text


def _strip_end_tokens(text: str) -> str:
    end = len(text)
    while True:
        while end and text[end - 1].isspace():
            end -= 1
        token = next((t for t in _END_TOKENS if text.endswith(t, 0, end)), None)
        if token is None:
            return text[:end]
        end -= len(token)


def _strip_reasoning(text: str) -> str:
    """Drop reasoning blocks in one linear pass over the tags (rules in the module docstring)."""
    tags = [(m.start(), m.end(), bool(m[1]), m[2].lower()) for m in _THINK_TAG.finditer(text)]
    if not tags:
        return text
    closes = {name: [t[0] for t in tags if t[2] and t[3] == name] for name in _TAG_NAMES}
    close_end = {t[0]: t[1] for t in tags if t[2]}
    kept: list[tuple[int, int]] = []  # spans that survive the removal of closed blocks
    position = 0
    cut = 0  # text before this goes: the end of the last closing tag left without an opener
    for start, end, closing, name in tags:
        if start < position:
            continue  # inside a block already removed
        if closing:
            cut = end
            continue
        later = bisect.bisect_left(closes[name], end)
        if later < len(closes[name]):
            kept.append((position, start))
            position = close_end[closes[name][later]]
    kept.append((position, len(text)))
    result = "".join(text[max(a, cut) : b] for a, b in kept if b > cut)
    return "" if _LEADING_OPEN.match(result) else result


def _make_none(spec: Any) -> Extractor:
    return clean_output


# --- take_first ---------------------------------------------------------------------------


def _make_take_first(spec: Any) -> Extractor:
    lines = _param(spec, "lines")
    lines = 1 if lines is None else lines
    if isinstance(lines, bool) or not isinstance(lines, int) or lines < 1:
        raise ValueError(f"take_first: lines must be an integer >= 1, got {lines!r}")

    def take_first(text: str) -> str | None:
        kept: list[str] = []
        for line in clean_output(text).splitlines():
            line = line.strip()
            if line:
                kept.append(line)
                if len(kept) == lines:
                    break
        return "\n".join(kept) if kept else None

    return take_first


# --- regex / regex_last -------------------------------------------------------------------


def _regex_setup(spec: Any, kind: str) -> tuple[regex.Pattern, int | str]:
    pattern = _param(spec, "pattern")
    if not isinstance(pattern, str):
        raise ValueError(f"{kind}: pattern is required and must be a string")
    compiled = compile_pattern(pattern, _param(spec, "flags") or "")
    group = _param(spec, "group")
    if group is None:
        group = 1 if compiled.groups else 0
    elif isinstance(group, str) and group.isascii() and group.isdigit():
        group = int(group)
    if isinstance(group, bool) or not isinstance(group, (int, str)):
        raise ValueError(f"{kind}: group must be an integer or a group name, got {group!r}")
    if isinstance(group, int) and not 0 <= group <= compiled.groups:
        raise ValueError(f"{kind}: group {group} does not exist; the pattern has {compiled.groups}")
    if isinstance(group, str) and group not in compiled.groupindex:
        raise ValueError(f"{kind}: the pattern has no group named {group!r}")
    return compiled, group


def _make_regex(spec: Any, bound: _Bound | None = None) -> Extractor:
    compiled, group = _regex_setup(spec, "regex")
    bound = bound or _Bound("regex", _param(spec, "pattern"), REGEX_TIMEOUT_S, False)
    timeout = bound.timeout

    def first_match(text: str) -> str | None:
        try:
            match = compiled.search(text[:MAX_INPUT_CHARS], timeout=timeout, concurrent=True)
        except TimeoutError:
            return bound.timed_out()
        return None if match is None else match.group(group)

    return first_match


def _make_regex_last(spec: Any, bound: _Bound | None = None) -> Extractor:
    compiled, group = _regex_setup(spec, "regex_last")
    bound = bound or _Bound("regex_last", _param(spec, "pattern"), REGEX_TIMEOUT_S, False)
    timeout = bound.timeout

    def last_match(text: str) -> str | None:
        last = None
        try:
            for count, match in enumerate(
                compiled.finditer(text[:MAX_INPUT_CHARS], timeout=timeout, concurrent=True), 1
            ):
                last = match
                if count == MAX_MATCHES:
                    break
        except TimeoutError:
            return bound.timed_out()
        return None if last is None else last.group(group)

    return last_match


# --- label_set ----------------------------------------------------------------------------


def _make_label_set(spec: Any, bound: _Bound | None = None) -> Extractor:
    labels = _param(spec, "labels")
    if not isinstance(labels, (list, tuple)) or not labels:
        raise ValueError("label_set: labels must be a non-empty list of strings")
    if not all(isinstance(label, str) and label for label in labels):
        raise ValueError("label_set: every label must be a non-empty string")
    case_sensitive = _param(spec, "case_sensitive")
    case_sensitive = False if case_sensitive is None else case_sensitive
    if not isinstance(case_sensitive, bool):
        raise ValueError(f"label_set: case_sensitive must be true or false, got {case_sensitive!r}")
    ordered, pattern = _label_pattern(tuple(labels), case_sensitive)
    bound = bound or _Bound("label_set", None, REGEX_TIMEOUT_S, False)
    timeout = bound.timeout

    def label_set(text: str) -> str | None:
        try:
            match = pattern.search(clean_output(text), timeout=timeout, concurrent=True)
        except TimeoutError:
            return bound.timed_out()
        return None if match is None else ordered[match.lastindex - 1]

    return label_set


@functools.lru_cache(maxsize=256)
def _label_pattern(labels: tuple[str, ...], case_sensitive: bool) -> tuple[tuple[str, ...], Any]:
    """One alternation, longest label first (stable), each label in its own group."""
    import regex

    ordered = tuple(sorted(labels, key=len, reverse=True))
    body = "|".join(f"({regex.escape(label)})" for label in ordered)
    flags = 0 if case_sensitive else regex.IGNORECASE
    return ordered, regex.compile(rf"(?<!\w)(?:{body})(?!\w)", flags)


# --- number -------------------------------------------------------------------------------

_FRAC = _LazyPattern(r"\\[dt]?frac\s*\{\s*(-?[0-9]+)\s*\}\s*\{\s*([0-9]+)\s*\}")
_MARKER = _LazyPattern(r"(?=[#\\a])(?:####|\\boxed\s*\{|\banswer\s+is\b)", "IGNORECASE")
# The leading lookahead changes no match (every number starts with "-", "." or a digit); it
# lets the search skip other positions at once, ~100x faster on text without numbers.
_NUMBER = _LazyPattern(
    r"""
    (?=[-.0-9])
    (?P<neg>(?<![\w)\]}])-)?
    (?:
        (?<![0-9.,/])(?P<frac>[0-9]+/[0-9]+)(?![0-9]|[.,/][0-9])
      | (?P<dec>
            (?: (?<![0-9])[0-9]{1,3}(?:,[0-9]{3})+(?![0-9]) | [0-9]+ ) (?:\.[0-9]+)?
          | (?<![0-9])\.[0-9]+
        )
        (?P<exp>[eE][-+]?[0-9]+)?
    )
    """,
    "VERBOSE",
)


def _make_number(spec: Any) -> Extractor:
    return _extract_number


def _extract_number(text: str) -> str | None:
    """The final answer as a canonical number string, or None.

    ``\\frac{a}{b}`` (also ``\\dfrac``/``\\tfrac``) reads as ``a/b`` and LaTeX ``{,}`` as ``,``.
    Markers are ``####``, ``\\boxed{`` and ``answer is`` (any case, whole words): the answer is
    the first number after the last marker that has a number after it; markers followed by no
    number are ignored, and without a usable marker the last number in the text is used.
    ``-`` is a sign unless it follows a word character or a closing bracket (``10-3``). Commas
    are thousands separators only in groups of three (``1,234,567``); ``1,2`` is two numbers.
    ``.5`` -> ``0.5``, ``3.50`` -> ``3.5``, ``2.0`` -> ``2``, ``-0`` -> ``0``, ``1e3`` ->
    ``1000`` (an exponent beyond +-100 stays in E notation); fractions keep their form with
    leading zeros dropped (``2/4`` stays ``2/4``).
    """
    text = _FRAC.sub(r"\1/\2", clean_output(text).replace("{,}", ",").replace("\u2212", "-"))
    numbers = list(_NUMBER.finditer(text))
    if not numbers:
        return None
    # One pass each over markers and numbers: the number searched for after a marker is the
    # first of `numbers` starting at or after its end (no number can span a marker), so the
    # answer is found by bisection instead of a scan of the rest of the text per marker.
    last_start = numbers[-1].start()
    for marker in reversed(list(_MARKER.finditer(text))):
        if marker.end() <= last_start:
            starts = [m.start() for m in numbers]
            return _canonical(numbers[bisect.bisect_left(starts, marker.end())])
    return _canonical(numbers[-1])


def _canonical(match: Any) -> str | None:
    negative = match.group("neg") is not None
    if match.group("frac"):
        top, bottom = match.group("frac").split("/")
        top, bottom = top.lstrip("0") or "0", bottom.lstrip("0") or "0"
        sign = "-" if negative and top != "0" else ""
        return f"{sign}{top}/{bottom}"
    literal = match.group("dec").replace(",", "") + (match.group("exp") or "")
    try:
        value = Decimal(literal)
        if value.is_zero():
            return "0"
        digits = len(value.as_tuple().digits)
        context = Context(prec=digits + 1, Emax=MAX_EMAX, Emin=MIN_EMIN)
        value = value.normalize(context)
        exponent = value.as_tuple().exponent
        shown = format(value, "f") if abs(int(exponent)) <= 100 else str(value)
    except (InvalidOperation, ArithmeticError, ValueError):
        return None
    return f"-{shown}" if negative else shown


_FACTORIES: dict[str, Callable[[Any], Extractor]] = {
    "none": _make_none,
    "take_first": _make_take_first,
    "regex": _make_regex,
    "regex_last": _make_regex_last,
    "label_set": _make_label_set,
    "number": _make_number,
}
