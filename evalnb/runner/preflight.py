"""Before you spend: `estimate(suite, models)` — calls, input tokens and the most it could cost.

Nothing is called: the items are built exactly as a run builds them (so the prompts are the
ones that would be sent) and counted. Input tokens are ``ceil(characters / 4)`` of each
prompt plus the ``instructions`` (`providers.pricing.estimate_tokens`): no tokenizer. On
evalnb's examples the total is within 7% of OpenAI's cl100k_base, single prompts within
-24%..+35% (benchmarks/token_estimate.py); Chinese or Japanese text can need 2x more. The cost bound prices every call at its estimated input tokens plus
``max_output_tokens`` of output, as if nothing were answered from the store; without
``max_output_tokens`` there is no bound. Judge calls are counted but not priced: what a
judge is sent depends on the answers. ``judge_calls`` is the likely count (a per-sample grader
makes one call per ``ctx.responses_create`` / ``ctx.embeddings_create`` in its code, per
sample), ``max_judge_calls`` the bound (``max_model_calls`` per grading). Beside the cost bound,
``max_cost_usd_batch`` is the same bound at the models' batch prices (``executor="batch"``;
`providers.pricing.batch_price`: the live price where a model gives no batch price).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    import pandas as pd

    from evalnb.suite import Suite

ESTIMATE_COLUMNS = ("task_id", "model", "calls", "input_tokens", "max_output_tokens", "max_cost_usd",
                    "max_cost_usd_batch", "judge_calls", "max_judge_calls")
_MODEL_CALLS = frozenset({"responses_create", "embeddings_create"})


@dataclass
class Estimate:
    """What a run would ask: ``table`` per (task_id, model), totals, and notes on what is left out."""

    table: pd.DataFrame
    notes: list[str] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return int(self.table["calls"].sum())

    @property
    def input_tokens(self) -> int:
        return int(self.table["input_tokens"].sum())

    @property
    def max_cost_usd(self) -> float:
        """The most the candidate calls could cost, over the priced models (NaN: no bound or no price)."""
        priced = self.table[self._priced]
        if priced.empty or priced["max_cost_usd"].isna().any():
            return math.nan
        return float(priced["max_cost_usd"].sum())

    @property
    def max_cost_usd_batch(self) -> float:
        """`max_cost_usd` at the models' batch prices (``executor="batch"``)."""
        priced = self.table[self._priced]
        if priced.empty or priced["max_cost_usd_batch"].isna().any():
            return math.nan
        return float(priced["max_cost_usd_batch"].sum())

    @property
    def _priced(self) -> Any:
        return self.table["priced"] if "priced" in self.table.columns else self.table["max_cost_usd"].notna()

    def summary(self) -> str:
        """One line: calls, input tokens and, with prices, the cost bound; then the notes."""
        line = f"{self.calls:,} calls, ~{self.input_tokens:,} input tokens (characters / 4)"
        cost = self.max_cost_usd
        if cost == cost:
            line += f", at most ${cost:,.4f}"
            batch = self.max_cost_usd_batch
            if batch == batch and batch != cost:
                line += f" live, ${batch:,.4f} batched"
        judges = int(self.table["max_judge_calls"].sum())
        likely = self.table["judge_calls"]
        if judges and likely.notna().all():
            line += (f"; judge calls: about {int(likely.sum()):,} (as the graders' code reads), at most {judges:,} "
                     "(max_model_calls; not priced)")
        elif judges:
            line += f"; judge calls: up to {judges:,} (not priced)"
        return "\n".join([line, *self.notes])

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return f"<Estimate {self.summary().splitlines()[0]}>"

    def _repr_html_(self) -> str:
        import html

        shown = self.table[list(ESTIMATE_COLUMNS)]
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        return (f"<div class='evalnb-estimate'><p><b>Estimate</b>: {html.escape(self.summary().splitlines()[0])}</p>"
                f"{shown.to_html(index=False, na_rep='—', float_format=lambda x: f'{x:.4f}')}"
                f"{f'<ul>{notes}</ul>' if notes else ''}</div>")


def estimate(
    suite: "Suite",
    models: Sequence[Any] | Any,
    *,
    generation: Any = None,
    task_ids: Sequence[str] | None = None,
    max_samples: int | None = None,
    epochs: int = 1,
    items: dict[str, list[Any]] | None = None,
    variants: dict[str, Any] | None = None,
) -> Estimate:
    """Count what ``evalnb.run(suite, models, ...)`` with these options would send.

    Returns an `Estimate`: ``.table`` (task_id, model, calls, input_tokens, max_output_tokens,
    max_cost_usd, max_cost_usd_batch, max_judge_calls), ``.calls``, ``.input_tokens``,
    ``.max_cost_usd``, ``.max_cost_usd_batch`` and ``.summary()``. ``items`` (task id -> Items already built, e.g. by the preview) skips
    building them again. ``variants`` as in `evalnb.run`: one row per (task, model, variant),
    with a ``variant`` column (each variant's own prompts are counted; a request that an earlier
    variant of the run already sends, e.g. a variant that changes nothing, is counted once, as the
    run sends it once: `runner.twins`).
    """
    import pandas as pd

    from evalnb.providers.pricing import batch_price, estimate_tokens, worst_case_cost
    from evalnb.runner.run_plan import make_plan

    plan = make_plan(suite, models, generation=generation, task_ids=task_ids, max_samples=max_samples, epochs=epochs,
                     variants=variants)
    if plan.variants is not None:
        suite = plan.suite  # one task per (task, variant)
    gen = plan.generation
    max_out = gen.get("max_output_tokens")
    instructions = estimate_tokens(gen.get("instructions")) if isinstance(gen.get("instructions"), str) else 0
    rows, notes = [], []
    twins = _Twins(plan) if plan.variants is not None else None
    for task_id in plan.task_ids:
        built = (items or {}).get(task_id)
        if built is None:
            built = suite.items(task_id, limit=plan.max_samples)
        elif plan.max_samples is not None:
            built = built[: plan.max_samples]
        per_item = [estimate_tokens(item.prompt) + instructions for item in built]
        samples = len(built) * plan.epochs
        judges = _judge_calls(suite.task(task_id), samples)  # every sample is graded, twins too
        likely = _likely_judge_calls(suite.task(task_id), samples) if judges else 0
        for model in plan.models:
            if twins is None:
                calls, tokens = samples, sum(per_item) * plan.epochs
            else:  # a request an earlier (task, variant) of the run sends is not sent again
                sent = twins.new(task_id, model.label, built, plan.epochs)
                calls, tokens = len(sent), sum(per_item[i] for i in sent)
            bound = batched = math.nan
            if model.price is not None and max_out is not None:
                bound = worst_case_cost(tokens, max_out * calls, model.price)
                batched = worst_case_cost(tokens, max_out * calls, batch_price(model.price))
            rows.append({"task_id": task_id, "model": model.label, "calls": calls, "input_tokens": tokens,
                         "max_output_tokens": max_out, "max_cost_usd": bound, "max_cost_usd_batch": batched,
                         "judge_calls": likely, "max_judge_calls": judges, "priced": model.price is not None})
    unpriced = [m.label for m in plan.models if m.price is None]
    if unpriced:
        notes.append(f"no price for {', '.join(unpriced)}: give Model(..., price={{'input': ..., 'output': ...}}) "
                     "(USD per 1M tokens) to bound its cost")
    if max_out is None and len(unpriced) < len(plan.models):
        notes.append("generation sets no max_output_tokens: a call's output, hence the cost, has no upper bound")
    table = pd.DataFrame.from_records(rows, columns=[*ESTIMATE_COLUMNS, "priced"])
    table = table.astype({"calls": "int64", "input_tokens": "int64", "max_cost_usd": "float64",
                          "max_cost_usd_batch": "float64",
                          "max_judge_calls": "int64", "priced": "bool"})
    table["max_output_tokens"] = pd.array(table["max_output_tokens"].tolist(), dtype="Int64")
    table["judge_calls"] = pd.array(table["judge_calls"].tolist(), dtype="Int64")
    if plan.variants is not None:
        from evalnb.suite.variants import split_slot

        pairs = [split_slot(t) for t in table["task_id"]]
        table["task_id"] = [t for t, _ in pairs]
        table.insert(2, "variant", [v for _, v in pairs])
    return Estimate(table, notes)


def _judge_calls(task: Any, calls: int) -> int:
    """The most model calls the task's grader may make for ``calls`` samples (of one model)."""
    grader = task.grader
    if grader is None or getattr(grader, "effective_model_access", "none") != "mka1":
        return 0
    per = int(getattr(grader, "max_model_calls", 0) or 0)
    return per if getattr(grader, "effective_execution", None) == "aggregate" else per * calls


def _likely_judge_calls(task: Any, calls: int) -> int | None:
    """The judge calls ``calls`` samples likely take: one per model call written in a per-sample
    grader's code, per sample (a retry on a bad reply adds a few); None when the code cannot
    tell (a batch grader, code by ``file_id``, calls made some other way)."""
    import ast

    grader = task.grader
    if getattr(grader, "effective_execution", None) != "per_sample" or not getattr(grader, "source", None):
        return None
    try:
        tree = ast.parse(grader.source)
    except (SyntaxError, ValueError):
        return None
    sites = sum(1 for node in ast.walk(tree) if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute) and node.func.attr in _MODEL_CALLS)
    return sites * calls if sites else None


class _Twins:
    """The request keys a run with variants sends, as its planner keys them (`item_planner`):
    the same model, generation and prompt in two (task, variant) slots is one call."""

    def __init__(self, plan: Any) -> None:
        from evalnb.store import request_key_function
        from evalnb.suite.task_generation import merged_generation

        self._plan, self._claimed = plan, set()
        self._keys = {}
        for task in plan.suite.tasks:
            gen = plan.generation
            if getattr(task, "generation", None) is not None:
                gen = merged_generation(gen, task.generation)
            for m in plan.models:
                self._keys[(task.id, m.label)] = request_key_function(m.name, m.base_url, m.api, gen)

    def new(self, task_id: str, label: str, items: Sequence[Any], epochs: int) -> list[int]:
        """The positions in ``items`` (one per epoch) of the calls not made already, claiming them."""
        from evalnb.runner.item_planner import key_text
        from evalnb.store import epoch_request_key

        keyer = self._keys[(task_id, label)]
        sent = []
        for epoch in range(epochs):
            for i, item in enumerate(items):
                key = keyer(key_text(item))
                key = epoch_request_key(key, epoch) if epoch else key
                if key not in self._claimed:
                    self._claimed.add(key)
                    sent.append(i)
        return sent
