"""The machinery under every manifest model: a strict base class and readable errors.

``ManifestModel`` makes a model strict, frozen and closed to unknown keys, and makes one pass
report *every* problem. Errors leave here as one ``ManifestError`` whose entries read
``tasks[0].grader.timeout_seconds: must be at most 600 (found 601)``: pydantic's messages are
rewritten as "rule (found value)", unknown keys get a did-you-mean, and a tagged union's tag
is dropped from locations. The schema modules (``evalnb.suite.manifest`` and its ``manifest_*``
parts, ``evalnb.suite.generation``) declare fields and rules; this module only reports.
"""

from __future__ import annotations

import difflib
import json
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError, WrapValidator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from evalnb.errors import ManifestError

__all__ = [
    "ManifestModel",
    "NonEmptyStr",
    "Identifier",
    "matching",
    "union_message",
    "problem",
    "custom_error",
    "duplicates",
    "raw_field",
    "is_int",
    "manifest_error",
    "whole_manifest_error",
    "loc_text",
    "show_value",
]

_MARK = "_evalnb"  # context key marking errors already in final form
_PATTERN_WORDS: dict[str, str] = {}  # regex -> the rule in words, filled by `matching`


# --- the base model: strict, frozen, no unknown keys, every problem at once -----------------


class ManifestModel(BaseModel):
    """Base of every manifest model.

    Its wrap validator fills contextual defaults, runs the cross-field rules even when some
    fields are invalid (so one pass reports everything), rewrites pydantic's messages into
    "rule (found value)" form with unknown-key suggestions, and folds input aliases.
    """

    # defer_build: schemas are built on first use, so `import evalnb` stays light.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False, defer_build=True)

    # Fields holding a tagged union -> its tags, which are left out of error locations
    # (``dataset.file_id``, not ``dataset.file.file_id``).
    _tagged_unions: ClassVar[dict[str, frozenset[str]]] = {}

    @classmethod
    def _fill_defaults(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Defaults that depend on other fields (returns a copy when it changes anything)."""
        return data

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        """Cross-field rules, checked on the raw input so they are reported with field errors."""
        return []

    @classmethod
    def _fold_aliases(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Rewrite accepted aliases to their canonical field once the input is known valid."""
        return data

    @classmethod
    def _unknown_field(cls, key: str) -> str:
        known = list(cls.model_fields)
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        if close:
            return f"unknown field; did you mean {close[0]}?"
        return f"unknown field; expected one of: {', '.join(known)}"

    @model_validator(mode="wrap")
    @classmethod
    def _validate_everything(cls, data: Any, handler: Any) -> Any:
        if not isinstance(data, dict):
            return handler(data)
        data = cls._fill_defaults(data)
        problems = cls._problems(data)
        try:
            model = handler(data)
        except ValidationError as exc:
            raise _as_validation_error(cls, _cleaned(exc, cls) + problems) from None
        if problems:
            raise _as_validation_error(cls, problems)
        folded = cls._fold_aliases(data)
        return model if folded is data else handler(folded)


# --- shared field types ----------------------------------------------------------------------


def matching(pattern: str, rule: str) -> StringConstraints:
    """A regex constraint whose error reads ``<rule> (found value)`` instead of the regex."""
    _PATTERN_WORDS[pattern] = rule
    return StringConstraints(pattern=pattern)


def union_message(expected: str) -> WrapValidator:
    """Collapse a union's per-branch errors into one "must be <expected>" message."""

    def validate(value: Any, handler: Any) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise custom_error("type_error", f"must be {expected} (found {show_value(value)})") from None

    return WrapValidator(validate)


NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]
Identifier = Annotated[str, matching(r"^[A-Za-z0-9_.\-]+$", "may contain only letters, digits, '_', '.' and '-'")]


# --- building rule errors --------------------------------------------------------------------


def custom_error(kind: str, msg: str) -> PydanticCustomError:
    """An error whose message is already final (raise it from a validator)."""
    return PydanticCustomError(kind, msg, {_MARK: 1})


def problem(loc: tuple[Any, ...], kind: str, msg: str, value: Any = None) -> InitErrorDetails:
    """A cross-field rule's finding at ``loc`` (relative to the model that checks it)."""
    return InitErrorDetails(type=custom_error(kind, msg), loc=loc, input=value)


def duplicates(ids: list[Any], where: tuple[str, ...], noun: str) -> list[InitErrorDetails]:
    """One problem per repeated id, pointing at the first use."""
    first: dict[str, int] = {}
    problems = []
    for i, ident in enumerate(ids):
        if not isinstance(ident, str):
            continue
        if ident in first:
            msg = f"duplicate {noun} {ident!r} (first used at {loc_text(where + (first[ident],))})"
            problems.append(problem(where + (i, "id"), "duplicate", msg, ident))
        else:
            first[ident] = i
    return problems


def raw_field(obj: Any, key: str) -> Any:
    """A field of raw input that may be a dict or an already-built model (None otherwise)."""
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None) if isinstance(obj, BaseModel) else None


def is_int(value: Any) -> bool:
    """An int that is not a bool (strict types: ``True`` is not ``1``)."""
    return isinstance(value, int) and not isinstance(value, bool)


# --- pydantic errors -> ManifestError --------------------------------------------------------


def manifest_error(exc: ValidationError, prefix: str = "") -> ManifestError:
    """Turn a pydantic ValidationError from a manifest model into a ManifestError."""
    errors = []
    for loc, kind, msg in (_clean_one(err, None) for err in exc.errors()):
        errors.append({"loc": loc_text(((prefix,) if prefix else ()) + loc), "msg": msg, "type": kind})
    return ManifestError(errors)


def whole_manifest_error(msg: str, kind: str) -> ManifestError:
    """A problem with the manifest as a whole (not an object, unreadable file)."""
    return ManifestError([{"loc": "", "msg": msg, "type": kind}])


def _as_validation_error(model: type[BaseModel], problems: list[InitErrorDetails]) -> ValidationError:
    return ValidationError.from_exception_data(model.__name__, problems)


def _cleaned(exc: ValidationError, owner: type[ManifestModel]) -> list[InitErrorDetails]:
    out = []
    for err in exc.errors():
        loc, kind, msg = _clean_one(err, owner)
        out.append(InitErrorDetails(type=custom_error(kind, msg), loc=loc, input=err.get("input")))
    return out


def _clean_one(err: Any, owner: type[ManifestModel] | None) -> tuple[tuple[Any, ...], str, str]:
    """One pydantic error as (location without union tags, type, readable message)."""
    loc = tuple(err["loc"])
    if owner is not None and len(loc) > 1 and loc[1] in owner._tagged_unions.get(loc[0], ()):
        loc = loc[:1] + loc[2:]
    kind, ctx = err["type"], err.get("ctx") or {}
    if _MARK in ctx:
        return loc, kind, err["msg"]
    if kind == "extra_forbidden" and owner is not None and len(loc) == 1:
        return loc, "unknown_field", owner._unknown_field(str(loc[0]))
    if kind == "extra_forbidden":
        return loc, "unknown_field", "unknown field"
    return loc, kind, _describe(err, key=bool(loc) and loc[-1] == "[key]")


_TYPE_WORDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "a list",
    "invalid_key": "a string key",
}
_BOUND_WORDS = {
    "greater_than_equal": "at least",
    "less_than_equal": "at most",
    "greater_than": "greater than",
    "less_than": "less than",
}


def _describe(err: Any, *, key: bool = False) -> str:
    """The rule that failed, in words, and the value found."""
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    subject = "key " if key else ""
    if kind == "missing":
        return "required field is missing"
    if kind == "string_too_long":
        return f"{subject}must be at most {ctx['max_length']} characters (found {len(value)})"
    if kind == "string_too_short":
        if ctx.get("min_length") == 1:
            return f"{subject}must not be empty"
        return f"{subject}must be at least {ctx['min_length']} characters (found {len(value)})"
    if kind == "too_long":
        return f"must have at most {ctx['max_length']} items (found {ctx.get('actual_length')})"
    if kind == "too_short":
        return f"must have at least {ctx['min_length']} item(s) (found {ctx.get('actual_length')})"
    if kind in _TYPE_WORDS:
        rule = f"must be {_TYPE_WORDS[kind]}"
    elif kind in _BOUND_WORDS:
        rule = f"must be {_BOUND_WORDS[kind]} {next(iter(ctx.values()))}"
    elif kind == "literal_error":
        expected = str(ctx.get("expected", ""))
        rule = f"must be one of {expected}" if " or " in expected else f"must be {expected}"
    elif kind == "string_pattern_mismatch":
        pattern = ctx.get("pattern")
        rule = subject + _PATTERN_WORDS.get(pattern, f"must match {pattern}")
    elif kind == "finite_number":
        rule = "must be a finite number"
    elif kind == "value_error":
        return str(ctx.get("error", "invalid value"))
    else:
        rule = err["msg"]
    return f"{rule} (found {show_value(value)})"


def loc_text(loc: tuple[Any, ...]) -> str:
    """``("tasks", 0, "grader")`` as ``tasks[0].grader``."""
    text = ""
    for part in loc:
        if part == "[key]":
            continue
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def show_value(value: Any, limit: int = 80) -> str:
    """A short JSON-ish rendering of a found value for messages."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
