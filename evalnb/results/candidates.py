"""Candidates: what a name such as ``"gpt-4.1"``, ``"defined"`` or ``"gpt-4.1 · defined"`` denotes in a run's samples.

Pairwise judging (`RunResult.pairwise`, `win_rate`, `rank`) compares *candidates*. A model label
(the samples' ``model`` column) names one. A run with prompt variants has a ``variant`` column
too: a variant name then names every sample made with that variant (one candidate when the run
has one model), and ``"model · variant"`` (`variant_views.candidate_label`) names one (model,
variant) pair, as `RunResult.candidates` lists them. A name that is both a model label and a
variant name is ambiguous and refused. This module is the one place that knows it: wire new
kinds of candidate here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

from evalnb.results.variant_views import candidate_label

__all__ = ["candidate_names", "candidate_samples", "names_of"]

VARIANT = "variant"


def _variants(samples: pd.DataFrame) -> list[str]:
    if VARIANT not in samples.columns:
        return []
    return [str(v) for v in dict.fromkeys(samples[VARIANT].dropna()) if str(v) != ""]


def names_of(models: list[str], variants: list[str]) -> list[str]:
    """Every candidate name of a run: its model labels (run order), its variant names, then each
    "model · variant" (models first)."""
    named = [*models, *(v for v in variants if v not in models)]
    return named + [candidate_label(m, v) for m in models for v in variants]


def candidate_names(samples: pd.DataFrame, models: list[str]) -> list[str]:
    """Every name that denotes a candidate in ``samples`` (`names_of` with the variants found)."""
    return names_of(models, _variants(samples))


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
    pairs = {candidate_label(m, v): (m, v) for m in models for v in variants}
    if name in models:
        rows = samples[samples["model"] == name]
    elif name in variants:
        rows = samples[samples[VARIANT] == name]
    elif name in pairs:
        model, variant = pairs[name]
        rows = samples[(samples["model"] == model) & (samples[VARIANT] == variant)]
    else:
        known = ", ".join(repr(n) for n in [*models, *variants, *pairs]) or "none"
        raise ValueError(f"{where}={name!r} is not a candidate of this run; its candidates: {known}")
    if rows.duplicated(["task_id", "sample_index", "epoch"]).any():
        several = ", ".join(repr(str(m)) for m in dict.fromkeys(rows["model"]))
        raise ValueError(f"{where}={name!r} denotes several answers per item (models {several}): "
                         "name one candidate (e.g. 'model · variant')")
    return rows
