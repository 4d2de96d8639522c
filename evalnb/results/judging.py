"""The judge and cost views of a `RunResult`: judge_calls, costs, cost_usd, judge_agreement.

A mixin of `RunResult` (it uses the result's store, run record, samples frame and models);
kept apart because "what the run's calls were, what they cost and how far its judge agrees
with people" is its own job. The tables themselves are built in `results.costs` and
`results.agreement`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd




class JudgeCostViews:
    """Needs ``_store``, ``_run_id``, ``_run``, ``_frame`` and ``models`` from `RunResult`."""

    _cached_input: Any = None

    def _judge_costs(self) -> dict[tuple[str, str, int, int], float]:
        """(task, model, index, epoch) -> what the sample's grader model calls cost (for `samples`)."""
        from evalnb.results.costs import judge_cost_by_sample

        return judge_cost_by_sample(self.judge_calls)

    @cached_property
    def judge_calls(self) -> pd.DataFrame:
        """Every model call the run's graders made: task_id, model, sample_index, epoch, call, kind,
        judge_model, request (the body as sent), output_text, usage, input_tokens, output_tokens,
        latency_s, cost_usd, cached (answered from the store), reply (the whole reply).

        One row per call, in sample order; a batch grader's calls have sample_index <NA>.
        """
        from evalnb.results.costs import judge_calls_frame

        calls = self._store.judge_calls(self._run_id) if self._store is not None else []
        return judge_calls_frame(calls)

    @cached_property
    def costs(self) -> pd.DataFrame:
        """Per (task_id, model, role): calls, cached, input_tokens, cached_input_tokens,
        output_tokens, cost_usd, billed_model. ``role`` is ``candidate`` (the model's own calls)
        or ``judge`` (its samples' grader calls, costed at the judge's price); see
        `evalnb.results.costs.costs_frame`."""
        from evalnb.results.costs import costs_frame

        names = {m["label"]: m.get("name") or m["label"] for m in self._run.get("models") or [] if isinstance(m, Mapping)}
        frame = self._frame[0]
        return costs_frame(frame, self._cached_input, self.judge_calls, names)

    @property
    def cost_usd(self) -> float:
        """USD the run's recorded calls cost, candidates and judges (calls without a price count 0)."""
        return float(self.costs["cost_usd"].fillna(0.0).sum())

    def judge_agreement(self, labels: Any, *, metric: str) -> pd.DataFrame:
        """How far the judge's ``metric`` agrees with people's ``labels`` on the same answers.

        ``labels``: a DataFrame with ``task_id, sample_index, label`` (a person's score for the
        model's answer, on the metric's scale), plus ``model`` when the run has several models
        (and ``epoch`` for a run with epochs; default 0). Returns one row per (task_id, model):
        n (answers both scored), n_unscored (labelled but not scored by the judge), accuracy with
        its 95% Wilson interval (ci_low, ci_high), cohen_kappa and confusion ({label: {judged:
        count}}; `evalnb.plots.judge_confusion` draws it). Labels for samples the run does not
        have are a ValueError naming them.
        """
        from evalnb.results.agreement import judge_agreement

        frame, columns = self._frame
        return judge_agreement(frame, columns.get(metric), labels, metric=metric, models=self.models,
                               available=list(columns))

    def _with_judge_calls(self, frame: pd.DataFrame) -> pd.DataFrame:
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
