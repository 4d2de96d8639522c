"""Built-in graders: plain, stdlib-only Python sources to reference in a manifest or copy.

Each ``evalnb/graders/<name>.py`` is an ordinary grader (SPEC §8) that imports nothing from
evalnb, because graders run in a sandbox worker where only the standard library is certain.
``spec("token_f1")`` gives a ready manifest grader; ``source("token_f1")`` the code to edit; a
manifest may also say ``grader: {builtin: token_f1}`` (expanded on load, see
`evalnb.suite.python_spec`).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

__all__ = ["names", "source", "spec"]

# name -> (contract, metric_id). The metric id is the score key the grader produces, so the
# default metric a task gets when it declares no ``metrics`` has values to aggregate.
_CATALOG: dict[str, tuple[str, str]] = {
    "exact_match": ("sample", "exact_match"),
    "normalized_exact_match": ("sample", "normalized_exact_match"),
    "token_f1": ("sample", "f1"),
    "numeric_tolerance": ("sample", "numeric_match"),
    "multiple_choice": ("sample", "accuracy"),
    "llm_judge": ("model_backed", "judge_score"),
    "embedding_similarity": ("model_backed", "cosine"),
    "macro_f1": ("batch", "macro_f1"),
}
# These return dicts that name their metric in the source; the others return a bare number,
# stored under whatever ``metric_id`` says.
_NAMED_IN_SOURCE = frozenset({"llm_judge", "embedding_similarity", "macro_f1"})
OVERRIDABLE = (
    "contract",
    "execution",
    "model_access",
    "metric_id",
    "source",
    "file_id",
    "timeout_seconds",
    "max_model_calls",
)


def names() -> list[str]:
    """The built-in grader names, sorted."""
    return sorted(_CATALOG)


def _check_name(name: str) -> str:
    key = name[:-3] if isinstance(name, str) and name.endswith(".py") else name
    if key not in _CATALOG:
        raise ValueError(f"unknown built-in grader {name!r}; choose one of: {', '.join(names())}")
    return key


def source(name: str) -> str:
    """The Python source text of a built-in grader (``"token_f1"`` or ``"token_f1.py"``)."""
    key = _check_name(name)
    return resources.files(__name__).joinpath(f"{key}.py").read_text(encoding="utf-8")


def spec(name: str, **overrides: Any) -> dict[str, Any]:
    """A manifest ``grader`` dict for a built-in grader, with any declaration field overridden.

    ``file_id=...`` replaces the inline source. Renaming the metric of a grader that names it
    in its source (llm_judge, embedding_similarity, macro_f1) needs an edited ``source`` too.
    """
    key = _check_name(name)
    unknown = sorted(set(overrides) - set(OVERRIDABLE))
    if unknown:
        raise ValueError(
            f"spec({key!r}): unknown grader field(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(OVERRIDABLE)}"
        )
    if "source" in overrides and "file_id" in overrides:
        raise ValueError(f"spec({key!r}): give source or file_id, not both")
    contract, metric_id = _CATALOG[key]
    own_code = "source" in overrides or "file_id" in overrides
    renamed = overrides.get("metric_id", metric_id) != metric_id
    if key in _NAMED_IN_SOURCE and renamed and not own_code:
        raise ValueError(
            f"spec({key!r}): this grader's source returns the score {metric_id!r}; to rename "
            f"it, edit a copy of source({key!r}) and pass it as source="
        )
    result: dict[str, Any] = {"type": "python", "contract": contract}
    if contract == "model_backed":
        result["model_access"] = "mka1"
    result["metric_id"] = metric_id
    if "file_id" not in overrides:
        result["source"] = source(key)
    result.update(overrides)
    return result
