"""A run with prompt variants, read back: slots split into ``task_id`` + ``variant``, variants paired.

The runner ran each (task, variant) as a task of its own, a *slot* ``"<task>@<variant>"``
(`evalnb.suite.variants`); the result computes on slots, so every per-(task, model) statistic is
per variant for free. What a reader sees has the task's own id and a ``variant`` column, and
``paired(variant_a, variant_b)`` pairs two variants of each model item by item with the very
statistics `comparison.paired` gives two models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from evalnb.suite.variants import candidate_label, split_slot

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RunVariants", "candidate_label"]


class RunVariants:
    """The variants of one stored run (empty for a run without)."""

    def __init__(self, run: Mapping[str, Any]) -> None:
        record = (run.get("summary") or {}).get("variants") or {}
        self.names: list[str] = list(record.get("names") or [])
        self.overrides: dict[str, Any] = dict(record.get("overrides") or {})
        self.base_version: str | None = record.get("base_version")

    def __bool__(self) -> bool:
        return bool(self.names)

    def split(self, frame: pd.DataFrame) -> pd.DataFrame:
        """`frame` with slot ids split: ``task_id`` the task's own, a ``variant`` column after ``model``."""
        if not self or "task_id" not in frame.columns:
            return frame
        pairs = [split_slot(t) for t in frame["task_id"]]
        out = frame.copy()
        out["task_id"] = [t for t, _ in pairs]
        at = list(out.columns).index("model") + 1 if "model" in out.columns else 1
        out.insert(at, "variant", [v for _, v in pairs])
        return out

    def against(self, baseline: pd.DataFrame, theirs: RunVariants, title: str) -> pd.DataFrame:
        """A baseline run's scores (slot ids) as `diff` pairs them with this run's.

        Both with variants, or both without: as they are (same-named variants pair). This run
        with variants, the baseline without: its one prompt stands against every variant (its
        rows repeated under each variant's slot). The baseline with variants, this run without:
        which variant to compare with is not for us to guess, so a ValueError says what to do.
        """
        import pandas as pd

        from evalnb.suite.variants import slot_id

        if bool(self) == bool(theirs):
            return baseline
        if theirs:
            raise ValueError(f"the baseline {title} has prompt variants ({', '.join(theirs.names)}) and this run has "
                             "none: diff the other way round (baseline.diff(this run) pairs each of its variants "
                             "with this run's prompt), or compare variants within one run with paired()")
        return pd.concat([baseline.assign(task_id=[slot_id(t, name) for t in baseline["task_id"]])
                          for name in self.names], ignore_index=True)

    def candidates(self, frame: pd.DataFrame) -> pd.DataFrame:
        """`frame` (slot ids, or split already) with ``model`` naming the candidate ("m · variant") and the task's own id."""
        if not self:
            return frame
        split = frame.copy() if "variant" in frame.columns else self.split(frame)
        split["model"] = [candidate_label(m, v) for m, v in zip(split["model"], split.pop("variant"))]
        return split

    def check_names(self, names: list[str], models: list[str]) -> str:
        """``"variant"`` if every name is a variant, ``"model"`` if every one is a model; else a clear ValueError."""
        if not self:
            return "model"  # comparison.paired names an unknown model itself
        both = [n for n in names if n in self.names and n in models]
        if both:
            raise ValueError(f"{both[0]!r} is both a model label and a variant name in this run; rename one to compare")
        if self and all(n in self.names for n in names):
            return "variant"
        if all(n in models for n in names):
            return "model"
        unknown = [n for n in names if n not in self.names and n not in models]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is neither a model ({models}) nor a variant ({self.names}) of this run")
        raise ValueError(f"compare two models or two variants, not a model with a variant: {names}")

    def by_model(self, scores: pd.DataFrame, models: list[str], compare: Any, names: list[str]) -> pd.DataFrame:
        """`compare(frame, names)` on each model's scores with ``model`` replaced by the variant; a ``model`` column first."""
        import pandas as pd

        split = self.split(scores)
        tables = []
        for model in models:
            mine = split[(split["model"] == model) & split["variant"].isin(names)]
            if mine.empty:
                continue
            table = compare(mine.drop(columns="model").rename(columns={"variant": "model"})[list(scores.columns)], names)
            table = table.rename(columns={"model_a": "variant_a", "model_b": "variant_b"})
            table.insert(0, "model", model)
            tables.append(table)
        if not tables:
            raise ValueError(f"variants {names} have no scored items in this run")
        return pd.concat(tables, ignore_index=True)

    def by_variant(self, scores: pd.DataFrame, compare: Any, names: list[str]) -> pd.DataFrame:
        """`compare(frame, names)` of models within each variant; a ``variant`` column after the models."""
        import pandas as pd

        split = self.split(scores)
        tables = []
        for variant in self.names:
            mine = split[split["variant"] == variant].drop(columns="variant")
            if mine.empty:
                continue
            table = compare(mine, names)
            table.insert(2, "variant", variant)
            tables.append(table)
        return pd.concat(tables, ignore_index=True)
