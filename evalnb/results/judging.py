"""The judge and cost views a `RunResult` owns: judge_calls, costs, cost_usd, judge_agreement.

`costs` also has a row per (task, pair of candidates) for the run's pairwise judge calls
(role ``pairwise judge``), so `cost_usd` counts them.

Kept apart because "what the run's calls were, what they cost and how far its judge agrees
with people" is its own job. `RunResult` builds one `JudgeCosts` and hands it what it needs
(the store and run, and ways to get the frames); the tables themselves are built in
`results.costs` and `results.agreement`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from evalnb.store import Store

__all__ = ["JudgeCosts"]


class JudgeCosts:
    """One run's grader calls and costs; tables are built on first use and kept.

    ``frames()`` gives (a frame with the cost columns, cached input tokens per row); ``lean()``
    gives (lean score frame, metric id -> column); ``models()`` the model labels in run order.
    """

    def __init__(self, store: Store | None, run_id: str | None, run: Mapping[str, Any], *,
                 frames: Callable[[], tuple[pd.DataFrame, Any]], lean: Callable[[], tuple[pd.DataFrame, dict[str, str]]],
                 models: Callable[[], list[str]]) -> None:
        self._store, self._run_id, self._run = store, run_id, run
        self._frames, self._lean, self._models = frames, lean, models
        self._calls: pd.DataFrame | None = None
        self._costs: pd.DataFrame | None = None
        self._priced = 0.0  # USD of every priced call, whatever row it falls in (see cost_usd)

    @property
    def judge_calls(self) -> pd.DataFrame:
        if self._calls is None:
            from evalnb.results.costs import judge_calls_frame

            calls = self._store.judge_calls(self._run_id) if self._store is not None else []
            self._calls = judge_calls_frame(calls)
        return self._calls

    def cost_by_sample(self) -> dict[tuple[str, str, int, int], float]:
        """(task, model, index, epoch) -> what the sample's grader model calls cost (for `samples`)."""
        from evalnb.results.costs import judge_cost_by_sample

        return judge_cost_by_sample(self.judge_calls)

    @property
    def costs(self) -> pd.DataFrame:
        if self._costs is None:
            from evalnb.results.costs import costs_frame, priced_usd

            names = {m["label"]: m.get("name") or m["label"] for m in self._run.get("models") or []
                     if isinstance(m, Mapping)}
            frame, cached_input = self._frames()
            self._costs = costs_frame(frame, cached_input, self.judge_calls, names)
            pairwise = self._store.pairwise_calls(self._run_id) if self._store is not None else []
            self._priced = priced_usd(frame["cost_usd"], self.judge_calls["cost_usd"],
                                      [c.get("cost_usd") for c in pairwise])
            if pairwise:
                import pandas as pd

                from evalnb.results.costs import pairwise_costs_frame

                judges = {j["judge"]: j["judge_model"] for j in self._store.pairwise_judges(self._run_id)}
                extra = pairwise_costs_frame(pairwise, judges, self._models())
                self._costs = pd.concat([self._costs, extra], ignore_index=True).astype(self._costs.dtypes.to_dict())
        return self._costs

    def forget_costs(self) -> None:
        """Build `costs` again on next use (a pairwise pass has added judge calls)."""
        self._costs = None

    @property
    def cost_usd(self) -> float:
        """USD of the run's priced calls. A `costs` row is NaN as soon as one of its calls had no
        price, so summing rows would drop its priced calls too; the total is summed call by call
        instead, and a warning names the rows whose calls were (partly) not priced."""
        costs = self.costs
        unpriced = costs[costs["cost_usd"].isna() & (costs["calls"] > 0)]
        if len(unpriced):
            import warnings

            names = ", ".join(dict.fromkeys(f"{r['billed_model'] or r['model']} ({r['role']})"
                                            for r in unpriced.to_dict("records")))
            warnings.warn(f"cost_usd counts priced calls only: {int(unpriced['calls'].sum())} call(s) "
                          f"of {names} had no price and are not counted", stacklevel=3)
        return self._priced

    def judge_agreement(self, labels: Any, *, metric: str) -> pd.DataFrame:
        """`agreement.judge_agreement` over the lean frame (keys, status, one column per metric)."""
        from evalnb.results.agreement import judge_agreement

        frame, columns = self._lean()
        return judge_agreement(frame, columns.get(metric), labels, metric=metric, models=self._models(),
                               available=list(columns))

    def with_judge_calls(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` with a ``judge_calls`` column (each sample's grader calls) when there are any."""
        calls = self.judge_calls
        if calls.empty:
            return frame
        by_sample: dict[tuple, list[dict]] = {}
        for record in calls[calls["sample_index"].notna()].to_dict("records"):
            key = (record["task_id"], record["model"], int(record["sample_index"]), int(record["epoch"]))
            by_sample.setdefault(key, []).append(record)
        keys = zip(frame["task_id"], frame["model"], frame["sample_index"], frame["epoch"])
        return frame.assign(judge_calls=[by_sample.get((t, m, int(i), int(e))) for t, m, i, e in keys])
