"""The Python a task runs in the sandbox, and the metrics its grader reports (SPEC §5, §7, §8).

A preprocessor and a grader each take exactly one of ``source`` (inline Python) or
``file_id`` (an uploaded ``.py`` file). ``grader.model_access`` is filled in at validation
(``mka1`` for ``model_backed``, else ``none``); ``grader.execution`` stays unset when not
given, because for ``model_backed`` it depends on whether the code defines ``grade``.

``grader: {builtin: token_f1}`` (an evalnb extension) names a built-in grader
(`evalnb.graders`) instead: it is expanded on load into that grader's ``source``, ``contract``,
``model_access`` and ``metric_id`` (fields given beside it win, as with
``evalnb.graders.spec(name, **fields)``), so the canonical manifest and its version are those
of the pasted source and a gateway reads it unchanged.
"""

from __future__ import annotations

import ast
import re
from typing import Annotated, Any, Literal

from pydantic import Field
from pydantic_core import InitErrorDetails

from evalnb import graders

from evalnb.suite._validation import Identifier, ManifestModel, NonEmptyStr, problem

__all__ = [
    "MIN_TIMEOUT",
    "MAX_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "MAX_MODEL_CALLS",
    "DEFAULT_MODEL_CALLS",
    "PreprocessSpec",
    "MetricSpec",
    "GraderSpec",
]

MIN_TIMEOUT, MAX_TIMEOUT, DEFAULT_TIMEOUT = 1, 600, 120
MAX_MODEL_CALLS, DEFAULT_MODEL_CALLS = 500, 64

Timeout = Annotated[int, Field(ge=MIN_TIMEOUT, le=MAX_TIMEOUT)]
BUILTIN_GRADERS: tuple[str, ...] = tuple(graders.names())
BuiltinGrader = Literal[BUILTIN_GRADERS]  # type: ignore[valid-type]


def _exactly_one_code(data: dict[str, Any], what: str) -> list[InitErrorDetails]:
    given = [key for key in ("source", "file_id") if data.get(key) is not None]
    if len(given) == 1:
        return []
    found = "neither" if not given else "both"
    return [
        problem(
            (),
            "one_of",
            f"{what} needs exactly one of source (inline Python) or file_id (an uploaded .py "
            f"file); found {found}",
        )
    ]


# --- preprocessors (SPEC §5) -----------------------------------------------------------------


class PreprocessSpec(ManifestModel):
    """Python that normalises rows before rendering; runs in the sandbox."""

    type: Literal["python"] = "python"
    contract: Literal["row", "batch"] = "row"
    source: NonEmptyStr | None = None
    file_id: NonEmptyStr | None = None
    timeout_seconds: Timeout = DEFAULT_TIMEOUT

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        return _exactly_one_code(data, "a preprocessor")


# --- metrics and graders (SPEC §7, §8) -------------------------------------------------------


class MetricSpec(ManifestModel):
    """A score key the grader produces and how it is aggregated over samples."""

    id: Identifier
    aggregation: Literal["mean", "none"] = "mean"
    higher_is_better: bool = True
    description: str | None = None


class GraderSpec(ManifestModel):
    """Python that scores samples; runs in the sandbox, optionally calling models via ``ctx``."""

    type: Literal["python"] = "python"
    contract: Literal["sample", "batch", "model_backed"] = "sample"
    execution: Literal["per_sample", "aggregate"] | None = None  # None: derived, see effective_execution
    model_access: Literal["mka1", "none"] | None = None  # filled from contract at validation
    metric_id: Identifier = "score"
    source: NonEmptyStr | None = None
    file_id: NonEmptyStr | None = None
    timeout_seconds: Timeout = DEFAULT_TIMEOUT
    max_model_calls: Annotated[int, Field(ge=0, le=MAX_MODEL_CALLS)] = DEFAULT_MODEL_CALLS
    builtin: BuiltinGrader | None = Field(
        default=None, exclude=True,
        description="a built-in grader by name (evalnb.graders.names()), expanded on load into its source, "
                    "contract and metric_id; fields given beside it win; an evalnb extension",
    )

    @classmethod
    def _fill_defaults(cls, data: dict[str, Any]) -> dict[str, Any]:
        data = _expand_builtin(data)
        contract = data.get("contract", "sample")
        if data.get("model_access") is None and contract in ("sample", "batch", "model_backed"):
            return {**data, "model_access": "mka1" if contract == "model_backed" else "none"}
        return data

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        name = data.get("builtin")
        if name is None:
            return _exactly_one_code(data, "a grader")
        code = [key for key in ("source", "file_id") if data.get(key) is not None]
        if code:
            given = " and ".join(code)
            return [problem(("builtin",), "one_of", f"builtin names the grader's code, and so does {given}; give one")]
        if name in BUILTIN_GRADERS:  # left unexpanded: a field beside it does not fit (an unknown name is a field error)
            return [problem(("builtin",), "builtin", _builtin_refusal(name, data))]
        return []

    @property
    def effective_model_access(self) -> Literal["mka1", "none"]:
        """``mka1`` turns on ``ctx.responses_create`` / ``ctx.embeddings_create``."""
        if self.model_access is not None:
            return self.model_access
        return "mka1" if self.contract == "model_backed" else "none"

    @property
    def effective_execution(self) -> Literal["per_sample", "aggregate"] | None:
        """How the grader runs; None only for a ``model_backed`` ``file_id`` grader (code unseen)."""
        return self.execution_for(self.source)

    def execution_for(self, code: str | None) -> Literal["per_sample", "aggregate"] | None:
        """The execution mode given the grader's code (needed only for ``model_backed``)."""
        if self.execution is not None:
            return self.execution
        if self.contract == "sample":
            return "per_sample"
        if self.contract == "batch":
            return "aggregate"
        if code is None:
            return None
        return "per_sample" if _defines(code, "grade") else "aggregate"


def _overrides(data: dict[str, Any]) -> dict[str, Any]:
    return {key: data[key] for key in graders.OVERRIDABLE if key in data and key not in ("source", "file_id")}


def _expand_builtin(data: dict[str, Any]) -> dict[str, Any]:
    """``{builtin: name, ...}`` as the full grader spec, when it expands cleanly (else unchanged:
    `GraderSpec._problems` or the field's own check says why)."""
    name = data.get("builtin")
    if name not in BUILTIN_GRADERS or any(data.get(key) is not None for key in ("source", "file_id")):
        return data
    try:
        expanded = graders.spec(name, **_overrides(data))
    except ValueError:
        return data
    return {**{k: v for k, v in data.items() if k != "builtin"}, **expanded}


def _builtin_refusal(name: str, data: dict[str, Any]) -> str:
    try:
        graders.spec(name, **_overrides(data))
    except ValueError as exc:
        return str(exc).replace(f"spec({name!r}): ", f"builtin {name!r}: ", 1).replace(
            f"edit a copy of source({name!r}) and pass it as source=",
            f"put an edited copy of evalnb.graders.source({name!r}) in source instead of builtin")
    return f"builtin {name!r} cannot be expanded"


def _defines(code: str, name: str) -> bool:
    """Whether Python ``code`` defines ``name`` at module level (regex fallback on syntax errors)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return re.search(rf"^(?:async\s+)?def\s+{name}\s*\(", code, re.MULTILINE) is not None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.asname or alias.name for alias in node.names]
        else:
            continue
        if name in names:
            return True
    return False
