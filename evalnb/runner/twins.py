"""Twin requests: two candidates of one run that would send the very same request, sent once.

With prompt variants, a variant that changes nothing for a task (``{"plain": {}, "same": {}}``,
or a per-task override that leaves the other tasks alone) asks every model exactly what another
variant asks. The planner (`item_planner`) keeps the first such unit a call and marks the others
twins; the engine holds the twins here instead of handing them to the executor, and the run's
context answers them from the first unit's outcome, whichever executor made the call: its
output (cached, so the twin costs nothing), or its failure (the same error, which a resume
sends again). Twins still waiting when the executor is done (their call was never made: a
stopped model, a spent budget) are stored as not run.
"""

from __future__ import annotations

from typing import Any

from evalnb.runner.unit import Unit

__all__ = ["Twins"]


class Twins:
    """Units waiting for the outcome of an identical request, by request key."""

    def __init__(self) -> None:
        self._waiting: dict[str, list[Unit]] = {}
        self._outcomes: dict[str, tuple[str, Any]] = {}  # key -> ("output", dict) | ("failed", error kwargs)

    def hold(self, unit: Unit) -> tuple[str, Any] | None:
        """Keep `unit` until its key's outcome arrives; the outcome if it came already."""
        outcome = self._outcomes.get(unit.key)
        if outcome is None:
            self._waiting.setdefault(unit.key, []).append(unit)
        return outcome

    def settle(self, key: str, kind: str, value: Any) -> list[Unit]:
        """The outcome of `key`'s call: the twins that waited for it (later twins get it at `hold`)."""
        if key not in self._outcomes:
            self._outcomes[key] = (kind, value)
        return self._waiting.pop(key, [])

    def leftover(self) -> list[Unit]:
        """Every twin whose request was never answered (its call was not made)."""
        units = [u for waiting in self._waiting.values() for u in waiting]
        self._waiting.clear()
        return units
