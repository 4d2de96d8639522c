"""Candidates: what a name such as ``"gpt-4.1"`` or ``"v2: neutral"`` denotes in a run's samples.

Pairwise judging (`RunResult.pairwise`, `win_rate`, `rank`) compares *candidates*. Today a
candidate is a model label (the samples' ``model`` column). A run with prompt variants has a
``variant`` column too; a non-empty variant name then also names a candidate (every sample
made with that variant). A name that is both a model label and a variant name is ambiguous and
refused. This module is the one place that knows it: wire new kinds of candidate here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["candidate_names", "candidate_samples"]

VARIANT = "variant"


def _variants(samples: pd.DataFrame) -> list[str]:
    if VARIANT not in samples.columns:
        return []
    return [str(v) for v in dict.fromkeys(samples[VARIANT].dropna()) if str(v) != ""]


def candidate_names(samples: pd.DataFrame, models: list[str]) -> list[str]:
    """Every name that denotes a candidate: the model labels (run order), then the variant names."""
    return [*models, *(v for v in _variants(samples) if v not in models)]


def candidate_samples(samples: pd.DataFrame, name: str, *, where: str = "candidate") -> pd.DataFrame:
    """The rows of ``samples`` that ``name`` denotes: its model's, or (runs with variants) its variant's.

    One row per (task_id, sample_index, epoch) is what a candidate is; a name that matches
    several (a variant run with two models) is a ValueError saying so, as is an unknown name
    (with the names there are) and a name that is a model label and a variant name at once.
    ``where`` names the argument in errors (``"a"``, ``"b"``, ``"models"``).
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"{where} must be a candidate name (a model label or variant name), got {name!r}")
    models = [str(m) for m in dict.fromkeys(samples["model"])]
    variants = _variants(samples)
    if name in models and name in variants:
        raise ValueError(f"{where}={name!r} is both a model label and a variant name in this run: "
                         "rename one so the candidate is clear")
    if name in models:
        rows = samples[samples["model"] == name]
    elif name in variants:
        rows = samples[samples[VARIANT] == name]
    else:
        known = ", ".join(repr(n) for n in [*models, *variants]) or "none"
        raise ValueError(f"{where}={name!r} is not a candidate of this run; its candidates: {known}")
    if rows.duplicated(["task_id", "sample_index", "epoch"]).any():
        several = ", ".join(repr(str(m)) for m in dict.fromkeys(rows["model"]))
        raise ValueError(f"{where}={name!r} denotes several answers per item (models {several}): "
                         "name one candidate")
    return rows
