"""Prompt and target templates: ``{{field}}`` placeholders filled from a dataset row.

SPEC §4.1 and the Templates decisions. The only syntax is a placeholder, ``{{ path }}``:

- ``path`` is one or more segments of ``[A-Za-z0-9_-]`` joined by single dots; spaces, tabs
  and newlines may surround it inside the braces. Anything else that looks like a placeholder
  (``{{}}``, ``{{ a b }}``, ``{{a..b}}``, an unclosed ``{{x``) is copied as literal text.
- In ``{{{x}}}`` the innermost ``{{x}}`` is the placeholder; the outer braces are literal.
- Segments index dicts by key (a digit segment such as ``0`` is tried as a string key, then as
  an int key) and lists/tuples by non-negative position (``{{answers.0}}``). A path that does
  not resolve renders as "".
- ``{{row}}`` is the whole row as JSON. ``{{choices}}`` is the task's choices as JSON and
  ``{{choice_list}}`` those choices joined by "\\n"; both read the row instead only when the
  task has no choices (``choices is None``; an empty list counts as defined). A dotted path
  that starts with ``choices`` indexes the task's choices the same way (``{{choices.0}}``).
- Values: str as is; bool as ``true``/``false``; other numbers with ``str()``; None as "";
  dicts/lists/tuples as ``json.dumps(v, ensure_ascii=False)`` with the default separators
  (``", "`` and ``": "``), key order kept, non-JSON values via ``str()``; anything else with
  ``str()`` (numpy scalars/arrays are converted with ``.tolist()`` first).

Templates are tokenised once and cached, so rendering 100k rows costs a few dict lookups each.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from evalnb.errors import TemplateError

__all__ = ["field_value", "fields_in_no_row", "missing_field_check", "missing_fields", "render_template", "render_spans",
           "template_fields"]

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)\s*\}\}")
_MISSING = object()

# A token is either a literal string or a (path, segments) tuple for a placeholder.
_Token = str | tuple[str, tuple[str, ...]]


def render_template(template: str, row: dict, choices: list[str] | None = None) -> str:
    """Render ``template`` against ``row`` (and the task's ``choices``); never fails on data."""
    tokens = _tokens(template)
    _check_choices(choices)
    parts: list[str] = []
    plain = type(row) is dict
    for token in tokens:
        if token.__class__ is str:
            parts.append(token)
            continue
        segments = token[1]
        # the common case first: {{field}} naming a text value of a plain dict row (a run
        # renders every row twice, so this is most of a big task's planning time)
        if plain and len(segments) == 1 and segments[0] not in _SPECIAL:
            value = row.get(segments[0], _MISSING)
            if value.__class__ is str:
                parts.append(value)
                continue
        value = _lookup(segments, row, choices)
        if value is not _MISSING:
            parts.append(_to_text(value))
    return "".join(parts)


_SPECIAL = frozenset({"row", "choices", "choice_list"})  # names `_lookup` treats apart


def render_spans(
    template: str, row: dict, choices: list[str] | None = None
) -> list[tuple[str, str | None, bool]]:
    """The rendered output as segments ``(text, field_path or None, found)`` for highlighting.

    Literal text has ``field_path=None`` and ``found=True``. A placeholder whose path does not
    resolve gives ``("", path, False)``; a path that resolves to null gives ``("", path, True)``.
    ``"".join(text for text, _, _ in spans) == render_template(template, row, choices)``.
    """
    tokens = _tokens(template)
    _check_choices(choices)
    spans: list[tuple[str, str | None, bool]] = []
    for token in tokens:
        if isinstance(token, str):
            spans.append((token, None, True))
        else:
            value = _lookup(token[1], row, choices)
            found = value is not _MISSING
            spans.append((_to_text(value) if found else "", token[0], found))
    return spans


def template_fields(template: str) -> list[str]:
    """The placeholder paths ``template`` uses, in order of first use, without duplicates."""
    seen: dict[str, None] = {}
    for token in _tokens(template):
        if not isinstance(token, str):
            seen.setdefault(token[0], None)
    return list(seen)


def missing_fields(template: str, row: Any, choices: list[str] | None = None) -> list[str]:
    """The placeholder paths of ``template`` that do not resolve in ``row`` (each renders as "")."""
    return [path for path, segments in _placeholders(template) if _lookup(segments, row, choices) is _MISSING]


_SPECIAL = frozenset({"row", "choices", "choice_list"})


def missing_field_check(templates: list[str], choices: list[str] | None = None) -> Callable[[Any], bool]:
    """``row -> whether any of templates names a field the row lacks`` (it renders as "").

    Worked out once per task: with plain top-level fields (the usual case) each row costs one
    C-level subset test of its keys, so the run records the flag for every item it renders.
    """
    paths = [p for t in templates for p in template_fields(t)]
    if not paths:
        return lambda row: False
    if all("." not in p and p not in _SPECIAL for p in paths):
        names = frozenset(paths)
        return lambda row: not row.keys() >= names if type(row) is dict else (
            isinstance(row, Mapping) and not row.keys() >= names)
    return lambda row: isinstance(row, Mapping) and any(missing_fields(t, row, choices) for t in templates)


def field_value(row: Any, path: str) -> Any:
    """The value at dotted ``path`` in ``row`` as a template would look it up (``link``,
    ``meta.source``, ``choices.0``); raises KeyError naming the first segment that is missing."""
    value = row
    for segment in path.split("."):
        value = _step(value, segment)
        if value is _MISSING:
            raise KeyError(segment)
    return value


def fields_in_no_row(template: str, rows: list[Any], choices: list[str] | None = None) -> list[str]:
    """The placeholder paths of ``template`` that resolve in none of ``rows`` (a misspelt field).

    A path found in at least one row is fine: a value missing from some rows renders as ""
    (SPEC). With no rows at all nothing can be said, so the answer is ``[]``.
    """
    if not rows:
        return []
    return [
        path for path, segments in _placeholders(template)
        if all(_lookup(segments, row, choices) is _MISSING for row in rows)
    ]


@functools.lru_cache(maxsize=2048)
def _placeholders(template: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(path, segments) of each distinct placeholder, in order of first use."""
    seen: dict[str, tuple[str, ...]] = {}
    for token in _tokens(template):
        if not isinstance(token, str):
            seen.setdefault(token[0], token[1])
    return tuple(seen.items())


def _tokens(template: Any) -> tuple[_Token, ...]:
    if not isinstance(template, str):
        raise TemplateError(f"a template must be a string, got {type(template).__name__}")
    return _tokenize(template)


@functools.lru_cache(maxsize=2048)
def _tokenize(template: str) -> tuple[_Token, ...]:
    tokens: list[_Token] = []
    last = 0
    for match in _PLACEHOLDER.finditer(template):
        if match.start() > last:
            tokens.append(template[last : match.start()])
        path = match.group(1)
        tokens.append((path, tuple(path.split("."))))
        last = match.end()
    if last < len(template):
        tokens.append(template[last:])
    return tuple(tokens)


def _check_choices(choices: Any) -> None:
    if choices is not None and not isinstance(choices, (list, tuple)):
        raise TemplateError(f"choices must be a list or None, got {type(choices).__name__}")


def _lookup(segments: tuple[str, ...], row: Any, choices: list[str] | None) -> Any:
    """Resolve a placeholder path; ``_MISSING`` when it does not resolve."""
    head = segments[0]
    if len(segments) == 1:
        if head == "row":
            return row
        if head == "choice_list" and choices is not None:
            return "\n".join(_to_text(c) for c in choices)
    if head == "choices" and choices is not None:
        value: Any = list(choices)
    else:
        value = _step(row, head)
    for segment in segments[1:]:
        if value is _MISSING:
            break
        value = _step(value, segment)
    return value


def _step(container: Any, segment: str) -> Any:
    if isinstance(container, Mapping):
        if segment in container:
            return container[segment]
        if segment.isdigit() and int(segment) in container:
            return container[int(segment)]
        return _MISSING
    if isinstance(container, (list, tuple)):
        if segment.isdigit() and segment.isascii():
            index = int(segment)
            if index < len(container):
                return container[index]
        return _MISSING
    if hasattr(container, "tolist") and not isinstance(container, (str, bytes)):
        try:
            return _step(container.tolist(), segment)
        except Exception:  # a foreign object with an odd tolist(): treat as not indexable
            return _MISSING
    return _MISSING


def _to_text(value: Any) -> str:
    """How one resolved value appears in the rendered text."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (dict, list, tuple)):
        try:
            return json.dumps(value, ensure_ascii=False, default=_json_default)
        except (TypeError, ValueError, RecursionError):  # odd keys or a cycle
            return str(value)
    if hasattr(value, "tolist") and not isinstance(value, (bytes, bytearray)):
        try:
            converted = value.tolist()
        except Exception:
            return str(value)
        if converted is not value and not hasattr(converted, "tolist"):
            return _to_text(converted)
    return str(value)


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        try:
            return value.tolist()
        except Exception:
            pass
    return str(value)
