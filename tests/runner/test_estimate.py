"""evalnb.estimate and the preview's Estimate tab: counted without a call, priced with max_output_tokens."""

from __future__ import annotations

import math

import pytest

import evalnb
from evalnb import Model
from evalnb.providers.pricing import estimate_tokens

pytestmark = pytest.mark.usefixtures("evalnb_home")


def _rows(n):
    return [{"q": "Q" * (10 + i), "a": str(i)} for i in range(n)]  # prompts of 10..10+n-1 characters


def test_estimate_counts_calls_tokens_and_bounds_cost(make_suite, model_server):
    suite = make_suite({"a": _rows(6), "b": _rows(3)})
    price = {"input": 1.0, "output": 4.0}
    models = [Model("priced", base_url="http://127.0.0.1:9/v1", price=price), "free@http://127.0.0.1:9/v1"]
    est = evalnb.estimate(suite, models, generation={"max_gen_toks": 20, "instructions": "Be brief."}, epochs=2)
    tokens_a = 2 * sum(estimate_tokens("Q" * (10 + i)) + estimate_tokens("Be brief.") for i in range(6))
    table = est.table.set_index(["task_id", "model"])
    assert table.loc[("a", "priced"), "calls"] == 12 and table.loc[("a", "priced"), "input_tokens"] == tokens_a
    assert table.loc[("a", "priced"), "max_cost_usd"] == pytest.approx((tokens_a * 1.0 + 12 * 20 * 4.0) / 1e6)
    assert math.isnan(table.loc[("a", "free"), "max_cost_usd"])
    assert est.calls == 2 * (12 + 6) and est.max_cost_usd == pytest.approx(table.xs("priced", level="model")
                                                                              ["max_cost_usd"].sum())
    assert "no price for free" in est.summary() and "characters / 4" in est.summary()
    # the same numbers a run then reports: calls and (with the server counting words) no surprises
    server = model_server()
    result = evalnb.run(suite, [Model("priced", base_url=server.base_url, price=price)], epochs=2,
                        generation={"max_gen_toks": 20}, progress=False)
    assert server.request_count == table.xs("priced", level="model")["calls"].sum()
    assert result.cost_usd <= evalnb.estimate(suite, [Model("p", base_url=server.base_url, price=price)],
                                              generation={"max_gen_toks": 20}, epochs=2).max_cost_usd


def test_estimate_without_max_output_tokens_has_no_bound_and_counts_judge_calls(make_suite):
    source = "def grade(sample, item, ctx):\n    return 1\n"
    suite = make_suite({"j": _rows(4)}, j={"grader": {"contract": "model_backed", "source": source,
                                                       "max_model_calls": 3}})
    est = evalnb.estimate(suite, [Model("m", base_url="http://127.0.0.1:9/v1", price={"input": 1, "output": 1})])
    assert math.isnan(est.max_cost_usd) and "no upper bound" in est.summary()
    assert est.table["max_judge_calls"].tolist() == [12] and "judge calls: up to 12" in est.summary()
    with pytest.raises(ValueError, match="epochs must be an integer"):
        evalnb.estimate(suite, ["m@http://127.0.0.1:9/v1"], epochs=0)


def test_the_preview_shows_the_estimate_of_the_task(make_suite):
    suite = make_suite({"a": _rows(6)})
    model = Model("priced", base_url="http://127.0.0.1:9/v1", price={"input": 1.0, "output": 4.0})
    widget = evalnb.preview(suite, models=[model], generation={"max_output_tokens": 10})
    bound = widget.estimate.max_cost_usd
    assert widget.estimate.calls == 6
    assert f"${bound:,.4f}" in widget.estimate_html.value and "Estimate" in widget.static_html()
    plain = evalnb.preview(suite)  # no model: counted for any model, no price invented
    assert "(any model)" in plain.estimate_html.value and "no price" not in plain.estimate_html.value


def test_a_judge_called_once_per_item_is_estimated_at_one_call_per_item_not_max_model_calls(make_suite):
    suite = make_suite({"j": _rows(20)}, j={"grader": {"builtin": "llm_judge"}})
    est = evalnb.estimate(suite, [Model("m", base_url="http://127.0.0.1:9/v1")])
    assert est.table["judge_calls"].tolist() == [20] and est.table["max_judge_calls"].tolist() == [20 * 64]
    assert "judge calls: about 20" in est.summary() and "up to 1,280" not in est.summary()
    widget = evalnb.preview(suite, models=[Model("m", base_url="http://127.0.0.1:9/v1")])
    assert "plus about 20 judge calls" in widget.estimate_html.value
