"""Do a task's grader and its ``metrics`` use the same names? Found before a run, said during one.

A score is aggregated only under a declared metric id; one stored under any other name sits in
an undeclared column and the table shows ``n=0``. `problems` finds what can be seen in the
manifest (an explicit ``grader.metric_id`` not among ``metrics``; ``{"scores": {...}}`` literals
in the grader's source with undeclared keys) for ``Suite.validate()``; `undeclared_message` words
the run's warning when a grader returns names that are not declared.
"""

from __future__ import annotations

import ast
import difflib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evalnb.suite.manifest import Task

__all__ = ["closest", "counts_nothing", "declared_ids", "problems", "undeclared_message"]


def declared_ids(task: "Task") -> list[str]:
    """The metric ids a task aggregates: its ``metrics``, else the grader's ``metric_id``."""
    return [m.id for m in task.effective_metrics]


def problems(task: "Task") -> list[tuple[str, str]]:
    """``(field, message)`` for each name mismatch visible in the manifest; [] when they line up.

    Only a task that declares ``metrics`` can disagree with itself; a ``metric_id`` at its
    default is not reported (a grader returning ``{"scores": ...}`` never uses it).
    """
    if not task.metrics:
        return []
    declared = declared_ids(task)
    grader = task.grader
    out: list[tuple[str, str]] = []
    if _names_metric_id(grader) and grader.metric_id not in declared:
        out.append(("grader", f"metric_id {grader.metric_id!r} is not among metrics ({_listed(declared)}); "
                              f"scores stored under it are not counted{_did_you_mean(grader.metric_id, declared)}"))
    for name, line in _literal_score_names(grader.source or ""):
        if name not in declared:
            out.append(("grader", f"the grader returns the score {name!r} (line {line}), which is not among metrics "
                                  f"({_listed(declared)}){_did_you_mean(name, declared)}"))
    return out


def counts_nothing(task: "Task") -> bool:
    """Whether no score the manifest shows the grader storing is a declared metric: the task's
    metrics would all read n=0 (a ``metric_id`` typo, ``{"scores": {"acc": ...}}`` for
    ``accuracy``). A grader that returns its declared score and extra ones (diagnostics kept on
    the samples, SPEC §7) counts something; a run only warns about the extras."""
    if not task.metrics:
        return False
    declared = set(declared_ids(task))
    literal = {name for name, _ in _literal_score_names(task.grader.source or "")}
    if literal:
        return not literal & declared
    return _names_metric_id(task.grader) and task.grader.metric_id not in declared


def _names_metric_id(grader) -> bool:
    """Whether the grader names a ``metric_id`` other than the field's default.

    Judged by value, not by pydantic's ``model_fields_set``: ``to_dict()`` writes every default
    out, so ``from_dict(to_dict(s))`` would read the default back as set and refuse a suite that
    ran before its round trip (an lm-eval import written to YAML). A check must be a function of
    the manifest's content. The cost: an explicit ``metric_id: score`` beside other metrics is
    left to the run's warning about undeclared scores."""
    default = type(grader).model_fields["metric_id"].default
    return grader.metric_id != default


def undeclared_message(task_id: str, names: list[str], declared: list[str]) -> str:
    """The run's warning: a grader returned score names that the task does not declare."""
    shown = ", ".join(repr(n) for n in names)
    hints = "".join(f"; {n!r}: did you mean {m!r}?" for n in names if (m := closest(n, declared)))
    return (f"task {task_id!r}: the grader returned score(s) {shown} that are not among the task's metrics "
            f"({_listed(declared)}); they are stored but not counted in result.metrics{hints}")


def _listed(declared: list[str]) -> str:
    return ", ".join(declared) or "none"


def closest(name: str, declared: list[str]) -> str | None:
    """The declared id ``name`` was most likely meant to be (difflib, or a prefix: acc -> accuracy)."""
    close = difflib.get_close_matches(name, declared, n=1, cutoff=0.6)
    if close:
        return close[0]
    lower = name.lower()
    prefixed = [d for d in declared if d.lower().startswith(lower) or lower.startswith(d.lower())]
    return prefixed[0] if len(prefixed) == 1 else None


def _did_you_mean(name: str, declared: list[str]) -> str:
    close = closest(name, declared)
    return f"; did you mean {close!r}?" if close else ""


def _literal_score_names(source: str) -> list[tuple[str, int]]:
    """The string keys of every ``{"scores": {...}}`` dict literal in ``source``, with their lines;
    none when some ``"scores"`` value is not a literal dict (names only known at run time)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []  # the grader check reports code that does not parse
    seen: dict[str, int] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values):
            if not (isinstance(key, ast.Constant) and key.value == "scores"):
                continue
            if not isinstance(value, ast.Dict):
                # scores built at run time (``{"scores": scores}``): which names this grader returns
                # cannot be read from its source, so its literals prove nothing (a shared grader's
                # branch for another kind of task); the run's warning still names any stray score
                return []
            for inner in value.keys:
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                    seen.setdefault(inner.value, inner.lineno)
    return sorted(seen.items(), key=lambda kv: kv[1])
