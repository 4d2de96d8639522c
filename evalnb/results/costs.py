"""What a run's model calls were and what they cost: the `judge_calls` and `costs` frames.

Both read what the store recorded; nothing is priced again here. A call's ``cost_usd`` was
worked out when it returned (its usage at its model's price then): 0 for a call answered from
the store (``cached``), NaN for a model without a price.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

JUDGE_CALL_COLUMNS = (
    "task_id", "model", "sample_index", "epoch", "call", "kind", "judge_model", "request", "output_text",
    "usage", "input_tokens", "output_tokens", "latency_s", "cost_usd", "cached", "reply",
)
COST_COLUMNS = (
    "task_id", "model", "role", "billed_model", "calls", "cached", "input_tokens", "cached_input_tokens",
    "output_tokens", "cost_usd",
)


def _tokens(usage: Any, *names: str) -> int | None:
    """The first of ``names`` in ``usage`` that is an int (as the samples frame reads usage)."""
    if isinstance(usage, Mapping):
        for name in names:
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def judge_calls_frame(calls: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per grader model call (`Store.judge_calls` records), in sample order.

    A batch grader's calls belong to no sample: their ``sample_index`` and ``epoch`` are <NA>.
    """
    import pandas as pd

    rows = []
    for c in calls:
        batch = c.get("sample_index", -1) is None or c.get("sample_index", -1) < 0
        rows.append({
            **{k: c.get(k) for k in JUDGE_CALL_COLUMNS},
            "sample_index": None if batch else c["sample_index"],
            "epoch": None if batch else c.get("epoch", 0),
            "input_tokens": _tokens(c.get("usage"), "input_tokens"),
            "output_tokens": _tokens(c.get("usage"), "output_tokens"),
            "cached": bool(c.get("cached")),
        })
    frame = pd.DataFrame.from_records(rows, columns=list(JUDGE_CALL_COLUMNS))
    for name in ("sample_index", "epoch", "call", "input_tokens", "output_tokens"):
        frame[name] = pd.array(frame[name].tolist(), dtype="Int64")
    for name in ("latency_s", "cost_usd"):
        frame[name] = pd.to_numeric(frame[name], errors="coerce").astype("float64")
    frame["cached"] = frame["cached"].astype("bool")
    return frame


def cost_columns(pages: Iterable[Mapping[str, list[Any]]]) -> tuple[pd.DataFrame, Any]:
    """(the columns `costs_frame` reads, cached input tokens per row) from `Store.column_pages`
    pages of task_id, model, cached, output_text, usage and cost_usd: no samples frame needed.

    Output texts are read a page at a time and kept only as "was there an output" (True/None).
    """
    import numpy as np
    import pandas as pd

    parts, cached_input = [], []
    for page in pages:
        usages = page["usage"]
        parts.append(pd.DataFrame({
            "task_id": page["task_id"], "model": page["model"],
            "cached": pd.array(page["cached"], dtype="boolean"),
            "output_text": pd.Series([None if o is None else True for o in page["output_text"]], dtype="object"),
            "input_tokens": pd.array([_tokens(u, "input_tokens", "prompt_tokens") for u in usages],
                                     dtype="Int64"),
            "output_tokens": pd.array([_tokens(u, "output_tokens", "completion_tokens") for u in usages],
                                      dtype="Int64"),
            "cost_usd": pd.to_numeric(pd.Series(page["cost_usd"], dtype="object"), errors="coerce").astype("float64"),
        }))
        cached_input.extend((_tokens(u, "cached_input_tokens") or 0) for u in usages)
    if not parts:
        empty = pd.DataFrame({c: [] for c in ("task_id", "model", "cached", "output_text", "input_tokens",
                                              "output_tokens", "cost_usd")})
        return empty, np.array([], dtype="int64")
    return pd.concat(parts, ignore_index=True), np.asarray(cached_input, dtype="int64")


def costs_frame(samples: pd.DataFrame, cached_input: Any, calls: pd.DataFrame, names: Mapping[str, str]) -> pd.DataFrame:
    """Per (task_id, model, role): calls made, calls answered from the store, tokens, USD.

    ``role`` is ``candidate`` (the model's own calls, from `samples`) or ``judge`` (the calls
    its samples' graders made, from `calls`; ``billed_model`` names the judge whose price they
    were costed at). Tokens count the calls made; ``cost_usd`` is NaN when a call of the row
    that was made had no price (it is unknown then; cached calls cost 0). ``cached_input``:
    per sample row, the input tokens the provider's prompt cache served. ``names``: model
    label -> model name (the candidate's billed model).
    """
    import pandas as pd

    rows: list[dict[str, Any]] = []
    if len(samples):
        cached = samples["cached"].fillna(False).astype(bool)
        frame = pd.DataFrame({
            "task_id": samples["task_id"], "model": samples["model"],
            "made": samples["output_text"].notna() & ~cached, "cached": cached,
            "input": samples["input_tokens"].fillna(0).astype("int64"),
            "cached_input": pd.Series(cached_input, index=samples.index).astype("int64"),
            "output": samples["output_tokens"].fillna(0).astype("int64"),
            "cost": samples["cost_usd"].astype("float64"),
        })
        for (task, model), part in frame.groupby(["task_id", "model"], sort=False):
            made = part["made"]
            rows.append(_row(task, model, "candidate", names.get(model, model), int(made.sum()),
                             int(part["cached"].sum()), part["input"][made].sum(), part["cached_input"][made].sum(),
                             part["output"][made].sum(), part["cost"], made))
    if len(calls):
        cached_inp = [_tokens(u, "cached_input_tokens") or 0 for u in calls["usage"]]
        frame = calls.assign(cached_input=cached_inp)
        for (task, model), part in frame.groupby(["task_id", "model"], sort=False):
            made = ~part["cached"]
            billed = ", ".join(dict.fromkeys(str(m) for m in part["judge_model"].dropna()))
            rows.append(_row(task, model, "judge", billed, int(made.sum()), int(part["cached"].sum()),
                             part["input_tokens"][made].fillna(0).sum(), part["cached_input"][made].sum(),
                             part["output_tokens"][made].fillna(0).sum(), part["cost_usd"], made))
    table = pd.DataFrame.from_records(rows, columns=list(COST_COLUMNS))
    if not rows:
        return table.astype({"calls": "int64", "cached": "int64", "cost_usd": "float64"})
    order = {key: i for i, key in enumerate(dict.fromkeys(zip(table["task_id"], table["model"])))}
    table["_order"] = [(order[(t, m)], r != "candidate") for t, m, r in zip(table["task_id"], table["model"], table["role"])]
    table = table.sort_values("_order", kind="stable").drop(columns="_order").reset_index(drop=True)
    return table.astype({"calls": "int64", "cached": "int64", "input_tokens": "int64", "cached_input_tokens": "int64",
                         "output_tokens": "int64", "cost_usd": "float64"})


def _row(task: str, model: str, role: str, billed: str, calls: int, cached: int, inp: Any, cached_inp: Any,
         out: Any, costs: pd.Series, made: pd.Series) -> dict[str, Any]:
    # unknown as soon as one call that was made had no price; cached calls cost 0
    cost = float("nan") if costs[made].isna().any() else float(costs.fillna(0.0).sum())
    return {"task_id": task, "model": model, "role": role, "billed_model": billed, "calls": calls, "cached": cached,
            "input_tokens": int(inp), "cached_input_tokens": int(cached_inp), "output_tokens": int(out),
            "cost_usd": cost}


def priced_usd(*costs: Iterable[Any]) -> float:
    """USD of every priced call in ``costs`` (iterables of per-call USD, None/NaN when unpriced):
    `RunResult.cost_usd`, which must not lose a row's priced calls to one unpriced call."""
    import pandas as pd

    return float(sum(pd.to_numeric(pd.Series(list(c), dtype="object"), errors="coerce").fillna(0.0).sum()
                     for c in costs))


def judge_cost_by_sample(calls: pd.DataFrame) -> dict[tuple[str, str, int, int], float]:
    """(task, model, sample_index, epoch) -> USD of that sample's grader calls (priced ones only)."""
    if not len(calls):
        return {}
    priced = calls[calls["sample_index"].notna() & calls["cost_usd"].notna()]
    sums = priced.groupby(["task_id", "model", "sample_index", "epoch"], sort=False)["cost_usd"].sum()
    return {(t, m, int(i), int(e)): float(v) for (t, m, i, e), v in sums.items()}


def pairwise_costs_frame(calls: Iterable[Mapping[str, Any]], judges: Mapping[str, str],
                         order: list[str]) -> pd.DataFrame:
    """`costs` rows of a run's pairwise judge calls (`Store.pairwise_calls`): one per (task_id, pair,
    judge), ``model`` the pair ("a vs b", in ``order``), ``role`` ``pairwise judge``, ``billed_model``
    the judge (``judges``: judge set-up digest -> judge model name).

    One row per judge, not per pair: a priced and an unpriced judge asked about the same pair
    would otherwise share a row whose cost is unknown (NaN), hiding what the priced one cost."""
    import pandas as pd

    rank = {name: i for i, name in enumerate(order)}
    rows = []
    for c in calls:
        a, b = sorted((c["first"], c["second"]), key=lambda n: (rank.get(n, len(rank)), n))
        rows.append({"task_id": c["task_id"], "model": f"{a} vs {b}", "judge_model": judges.get(c.get("judge"), ""),
                     "cached": bool(c.get("cached")), "input_tokens": _tokens(c.get("usage"), "input_tokens"),
                     "output_tokens": _tokens(c.get("usage"), "output_tokens"),
                     "cached_input": _tokens(c.get("usage"), "cached_input_tokens") or 0,
                     "cost_usd": c.get("cost_usd")})
    if not rows:
        return pd.DataFrame(columns=list(COST_COLUMNS))
    frame = pd.DataFrame.from_records(rows)
    frame["cost_usd"] = pd.to_numeric(frame["cost_usd"], errors="coerce").astype("float64")
    out = []
    for (task, pair, billed), part in frame.groupby(["task_id", "model", "judge_model"], sort=False):
        made = ~part["cached"]
        out.append(_row(task, pair, "pairwise judge", billed, int(made.sum()), int(part["cached"].sum()),
                        part["input_tokens"][made].fillna(0).sum(), part["cached_input"][made].sum(),
                        part["output_tokens"][made].fillna(0).sum(), part["cost_usd"], made))
    return pd.DataFrame.from_records(out, columns=list(COST_COLUMNS))
