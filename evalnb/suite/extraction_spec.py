"""``output_extraction``: how raw model text becomes ``extracted_output`` (SPEC §6).

Each type takes only its own parameters. Defaults are filled in so equal meaning gives an
equal canonical form: ``take_first.lines`` 1, ``label_set.case_sensitive`` false, regex
``flags`` ``""`` (letters sorted, repeats dropped) and ``group`` 1 when the pattern has a
group, else 0. A regex is compiled here, so a bad pattern or group is a manifest error.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field
from pydantic_core import InitErrorDetails

from evalnb.suite._validation import ManifestModel, NonEmptyStr, is_int, matching, problem, union_message

__all__ = ["OutputExtraction", "EXTRACTION_PARAMS"]

EXTRACTION_PARAMS: dict[str, tuple[str, ...]] = {
    "none": (),
    "take_first": ("lines",),
    "regex": ("pattern", "group", "flags"),
    "regex_last": ("pattern", "group", "flags"),
    "label_set": ("labels", "case_sensitive"),
    "number": (),
}
_FLAGS_PATTERN = r"^[imsx]*$"

Flags = Annotated[str, matching(_FLAGS_PATTERN, "may contain only the flag letters i, m, s and x")]
Group = Annotated[Annotated[int, Field(ge=0)] | str, union_message("a group number (>= 0) or a group name")]


class OutputExtraction(ManifestModel):
    """How raw model text becomes ``extracted_output``; each type takes only its own params."""

    type: Literal["none", "take_first", "regex", "regex_last", "label_set", "number"] = "none"
    lines: Annotated[int, Field(ge=1)] | None = None
    pattern: NonEmptyStr | None = None
    group: Group | None = None
    flags: Flags | None = None
    labels: Annotated[list[NonEmptyStr], Field(min_length=1)] | None = None
    case_sensitive: bool | None = None

    @classmethod
    def _fill_defaults(cls, data: dict[str, Any]) -> dict[str, Any]:
        kind = data.get("type", "none")
        fill: dict[str, Any] = {}
        if kind == "take_first" and data.get("lines") is None:
            fill["lines"] = 1
        elif kind == "label_set" and data.get("case_sensitive") is None:
            fill["case_sensitive"] = False
        elif kind in ("regex", "regex_last"):
            flags = data.get("flags")
            if flags is None:
                fill["flags"] = flags = ""
            elif isinstance(flags, str) and re.fullmatch(_FLAGS_PATTERN, flags):
                fill["flags"] = flags = "".join(sorted(set(flags)))
            compiled = _try_compile(data.get("pattern"), flags)
            if data.get("group") is None and compiled is not None:
                fill["group"] = 1 if compiled.groups else 0
        return {**data, **fill} if fill else data

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        kind = data.get("type", "none")
        if not isinstance(kind, str) or kind not in EXTRACTION_PARAMS:
            return []  # the type error itself is reported by the field
        allowed = EXTRACTION_PARAMS[kind]
        takes = f"it takes {', '.join(allowed)}" if allowed else "it takes no parameters"
        problems = [
            problem((key,), "not_a_parameter", f"not a parameter of type {kind!r} ({takes})")
            for key in ("lines", "pattern", "group", "flags", "labels", "case_sensitive")
            if data.get(key) is not None and key not in allowed
        ]
        for key in ("pattern", "labels"):
            if key in allowed and data.get(key) is None:
                problems.append(problem((key,), "missing", f"required for type {kind!r}"))
        if kind in ("regex", "regex_last"):
            problems += _pattern_problems(data.get("pattern"), data.get("flags"), data.get("group"))
        return problems


def _try_compile(pattern: Any, flags: Any) -> Any:
    if not isinstance(pattern, str) or not isinstance(flags, str):
        return None
    try:
        return _compile(pattern, flags)
    except ValueError:
        return None


def _compile(pattern: str, flags: str) -> Any:
    from evalnb.scoring.extraction import compile_pattern  # lazy: pulls in the `regex` module

    return compile_pattern(pattern, flags)


def _pattern_problems(pattern: Any, flags: Any, group: Any) -> list[InitErrorDetails]:
    if not isinstance(pattern, str) or not pattern:
        return []  # a missing or non-string pattern is reported elsewhere
    if not isinstance(flags, str) or not re.fullmatch(_FLAGS_PATTERN, flags):
        flags = ""  # bad flags are reported by their field; still check the pattern
    try:
        compiled = _compile(pattern, flags)
    except ValueError as exc:
        return [problem(("pattern",), "invalid_pattern", str(exc))]
    if isinstance(group, str) and group.isascii() and group.isdigit():
        group = int(group)
    if is_int(group) and group > compiled.groups:
        msg = f"group {group} does not exist; the pattern has {compiled.groups} group(s)"
        return [problem(("group",), "no_such_group", msg)]
    if isinstance(group, str) and group not in compiled.groupindex:
        return [problem(("group",), "no_such_group", f"the pattern has no group named {group!r}")]
    return []
