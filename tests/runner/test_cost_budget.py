"""Cost from known usage numbers, budgets that stop runs, and resuming a stopped run.

Every server here reports fixed usage numbers (`LocalModelServer(usage=...)`), so every cost
is known in advance; prompts all have the same length, so every call's worst case (the
chars/4 estimate of its prompt + max_output_tokens) is known too. The expected call counts are
worked out by `_calls_within` — a sequential simulation of the rule, independent of the runner.
"""

from __future__ import annotations

import math
import warnings

import pytest

import evalnb
from evalnb import Model
from evalnb.errors import ManifestError
from evalnb.providers.pricing import estimate_tokens

pytestmark = pytest.mark.usefixtures("evalnb_home")

N = 50
PRICE = {"input": 1000.0, "output": 2000.0}  # USD per 1M tokens: costs are round numbers
MAX_OUT = 16
GEN = {"max_output_tokens": MAX_OUT}


def fixed_rows(n: int) -> list[dict]:
    """Prompts of one length: ``ITEM-007: what number is this?`` (30 characters, 8 estimated tokens)."""
    return [{"q": f"ITEM-{i:03d}: what number is this?", "a": str(i)} for i in range(n)]


PROMPT_TOKENS = estimate_tokens(fixed_rows(1)[0]["q"])


def cost(input_tokens: int, output_tokens: int, price=PRICE, cached: int = 0) -> float:
    cached_price = price.get("cached_input", price["input"])
    return ((input_tokens - cached) * price["input"] + cached * cached_price + output_tokens * price["output"]) / 1e6


def _calls_within(budget: float, worst: float, actual: float, n: int) -> int:
    """Calls a budget allows, made one after another: start while spent + worst <= budget."""
    spent, calls = 0.0, 0
    while calls < n and spent + worst <= budget + 1e-9:
        spent += actual
        calls += 1
    return calls


def _suite(make_suite, n=N, **task):
    return make_suite({"t": fixed_rows(n)}, t=task)


def test_costs_from_known_usage_numbers_for_both_apis(make_suite, model_server):
    usage = {"input_tokens": 120, "output_tokens": 30, "cached_input_tokens": 100}
    server = model_server(usage=usage)
    price = {"input": 2.0, "output": 8.0, "cached_input": 0.5}
    models = [Model("responses-m", base_url=server.base_url, price=price),
              Model("chat-m", base_url=server.base_url, api="chat", price=price),
              Model("free-m", base_url=server.base_url)]
    result = evalnb.run(_suite(make_suite, 6), models, progress=False)
    each = cost(120, 30, price, cached=100)  # 20 x 2 + 100 x 0.5 + 30 x 8 = 330 per 1M
    assert each == pytest.approx(330e-6)
    samples = result.samples.set_index("model")
    assert samples.loc["responses-m", "cost_usd"].tolist() == pytest.approx([each] * 6)
    assert samples.loc["chat-m", "cost_usd"].tolist() == pytest.approx([each] * 6)  # prompt_tokens_details too
    assert samples.loc["free-m", "cost_usd"].isna().all()  # no price: unknown, not free
    assert not samples["cached"].any()
    costs = result.costs.set_index("model")
    assert costs.loc["chat-m", "input_tokens"] == 6 * 120 and costs.loc["chat-m", "cached_input_tokens"] == 6 * 100
    assert costs.loc["chat-m", "output_tokens"] == 6 * 30 and costs.loc["chat-m", "calls"] == 6
    assert costs.loc["responses-m", "cost_usd"] == pytest.approx(6 * each)
    assert math.isnan(costs.loc["free-m", "cost_usd"])
    assert result.cost_usd == pytest.approx(12 * each)
    # answered from the store: costs 0 and says so
    again = evalnb.run(_suite(make_suite, 6), models, progress=False, metadata={"second": "yes"})
    assert again.samples["cached"].all() and (again.samples["cost_usd"] == 0).all()
    assert again.costs["calls"].sum() == 0 and again.costs["cached"].sum() == 18
    assert again.cost_usd == 0


def test_judge_calls_are_costed_to_the_judge(make_suite, model_server):
    cand = model_server(usage={"input_tokens": 10, "output_tokens": 2})
    judge = model_server(lambda body: "yes", usage={"input_tokens": 40, "output_tokens": 1})
    source = ("def grade(sample, item, ctx):\n"
              "    return ctx.responses_create(input='ok? ' + sample['output_text'])['output_text'] == 'yes'\n")
    suite = _suite(make_suite, 5, grader={"contract": "model_backed", "source": source})
    judge_price = {"input": 10.0, "output": 20.0}
    result = evalnb.run(suite, [Model("m", base_url=cand.base_url, price={"input": 1.0, "output": 1.0})],
                        judge_model=Model("judge-x", base_url=judge.base_url, price=judge_price), progress=False)
    rows = result.costs.set_index("role")
    assert rows.loc["candidate", "cost_usd"] == pytest.approx(5 * cost(10, 2, {"input": 1.0, "output": 1.0}))
    assert rows.loc["judge", "cost_usd"] == pytest.approx(5 * cost(40, 1, judge_price))
    assert rows.loc["judge", "billed_model"] == "judge-x" and rows.loc["judge", "model"] == "m"
    assert result.samples["judge_cost_usd"].tolist() == pytest.approx([cost(40, 1, judge_price)] * 5)
    assert result.judge_calls["cost_usd"].tolist() == pytest.approx([cost(40, 1, judge_price)] * 5)


@pytest.mark.parametrize("concurrency", [1, 8])
def test_a_budget_stops_the_run_at_the_right_call_count(make_suite, model_server, concurrency):
    actual_usage = {"input_tokens": PROMPT_TOKENS, "output_tokens": 10}  # the estimate is exact here
    server = model_server(usage=actual_usage, latency=0.005)
    worst, actual = cost(PROMPT_TOKENS, MAX_OUT), cost(PROMPT_TOKENS, 10)
    budget = 1.0
    expected = _calls_within(budget, worst, actual, N)
    assert 0 < expected < N
    result = evalnb.run(_suite(make_suite), [Model("m", base_url=server.base_url, price=PRICE)], generation=GEN,
                        max_cost_usd=budget, concurrency=concurrency, progress=False)
    assert result.status == "stopped"
    assert server.request_count == expected
    assert "max_cost_usd=1" in result.run["error"] and "evalnb.resume" in result.run["error"]
    done = result.samples
    assert len(done) == expected and (done["status"] == "completed").all()  # every finished sample kept
    assert result.cost_usd == pytest.approx(expected * actual) and result.cost_usd <= budget
    assert evalnb.runs().set_index("run_id").loc[result.run_id, "status"] == "stopped"


@pytest.mark.parametrize("concurrency", [1, 8])
def test_an_underestimated_call_overshoots_by_at_most_the_calls_in_flight(make_suite, model_server, concurrency):
    """The server bills 100 input tokens where chars/4 says 8: reservations are too small."""
    server = model_server(usage={"input_tokens": 100, "output_tokens": 10}, latency=0.005)
    worst, actual = cost(PROMPT_TOKENS, MAX_OUT), cost(100, 10)
    assert actual > worst
    budget = 1.0
    result = evalnb.run(_suite(make_suite), [Model("m", base_url=server.base_url, price=PRICE)], generation=GEN,
                        max_cost_usd=budget, concurrency=concurrency, progress=False)
    assert result.status == "stopped"
    spent = result.cost_usd
    assert spent > budget - actual  # it did use the budget
    assert spent <= budget + concurrency * (actual - worst) + 1e-9  # over only by what the calls in flight hid
    assert server.max_in_flight <= concurrency


def test_resume_after_a_budget_stop_needs_a_new_budget_and_then_finishes(make_suite, model_server):
    server = model_server(usage={"input_tokens": PROMPT_TOKENS, "output_tokens": 10})
    suite = _suite(make_suite)
    worst, actual = cost(PROMPT_TOKENS, MAX_OUT), cost(PROMPT_TOKENS, 10)
    stopped = evalnb.run(suite, [Model("m", base_url=server.base_url, price=PRICE)], generation=GEN,
                         max_cost_usd=0.5, progress=False)
    first = server.request_count
    assert stopped.status == "stopped" and first == _calls_within(0.5, worst, actual, N)
    # the run's own budget again: nothing fits, nothing is sent
    same = evalnb.resume(stopped.run_id, progress=False)
    assert same.status == "stopped" and server.request_count == first and same.run_id == stopped.run_id
    # a budget for the whole run: what was spent counts, so 1.0 allows the calls that 1.0 allows
    more = evalnb.resume(stopped.run_id, max_cost_usd=1.0, progress=False)
    assert more.status == "stopped" and server.request_count == _calls_within(1.0, worst, actual, N)
    done = evalnb.resume(stopped.run_id, max_cost_usd=None, progress=False)  # no budget
    assert done.status == "completed" and server.request_count == N and len(done.samples) == N
    assert done.cost_usd == pytest.approx(N * actual)
    assert done.run["summary"]["options"]["max_cost_usd"] is None


def test_running_the_same_thing_again_continues_a_stopped_run(make_suite, model_server):
    server = model_server(usage={"input_tokens": PROMPT_TOKENS, "output_tokens": 10})
    suite = _suite(make_suite)
    models = [Model("m", base_url=server.base_url, price=PRICE)]
    stopped = evalnb.run(suite, models, generation=GEN, max_cost_usd=0.5, progress=False)
    bigger = evalnb.run(suite, models, generation=GEN, max_cost_usd=100, progress=False)
    assert bigger.run_id == stopped.run_id and bigger.status == "completed" and server.request_count == N


def test_resume_keeps_judge_generation_budget_and_prices(make_suite, model_server):
    server = model_server(usage={"input_tokens": PROMPT_TOKENS, "output_tokens": 10})
    judge = model_server(lambda body: "yes", usage={"input_tokens": 4, "output_tokens": 1})
    source = ("def grade(sample, item, ctx):\n"
              "    return ctx.responses_create(input='Judge item %05d' % sample['sample_index'])['output_text'] == 'yes'\n")
    suite = _suite(make_suite, 20, grader={"contract": "model_backed", "source": source})
    judge_price = {"input": 1000.0, "output": 1000.0}
    jgen = {"temperature": 0, "max_output_tokens": 4}
    stopped = evalnb.run(suite, [Model("m", base_url=server.base_url, price=PRICE)], generation=GEN,
                         judge_model=Model("j", base_url=judge.base_url, price=judge_price), judge_generation=jgen,
                         max_cost_usd=0.3, progress=False)
    assert stopped.status == "stopped"
    options = stopped.run["summary"]["options"]
    assert options["max_cost_usd"] == 0.3 and options["judge_generation"] == {"temperature": 0.0, "max_output_tokens": 4}
    assert options["judge_model"]["price"] == judge_price and stopped.run["summary"]["models"][0]["price"] == PRICE
    judged_before = judge.request_count
    done = evalnb.resume(stopped.run_id, max_cost_usd=10, progress=False)
    assert done.status == "completed" and (done.samples["status"] == "completed").all()
    assert all(r.body["temperature"] == 0 and r.body["max_output_tokens"] == 4 for r in judge.requests)
    assert judge.request_count == 20 and judge.request_count > judged_before
    # the costs of both attempts add up: nothing paid was lost, nothing counted twice
    assert done.costs.set_index("role").loc["judge", "cost_usd"] == pytest.approx(20 * cost(4, 1, judge_price))
    assert done.cost_usd == pytest.approx(20 * cost(PROMPT_TOKENS, 10) + 20 * cost(4, 1, judge_price))


def test_judge_calls_count_toward_the_budget(make_suite, model_server):
    """Only the judge has a price: the budget stops the run after the judge calls it allows."""
    server = model_server()
    judge = model_server(lambda body: "yes", usage={"input_tokens": 4, "output_tokens": 1})
    source = ("def grade(sample, item, ctx):\n"
              "    return ctx.responses_create(input='Judge item %05d' % sample['sample_index'])['output_text'] == 'yes'\n")
    suite = _suite(make_suite, 30, grader={"contract": "model_backed", "source": source})
    judge_price = {"input": 1000.0, "output": 1000.0}
    judge_tokens = estimate_tokens("Judge item 00000")
    worst, actual = cost(judge_tokens, 4, judge_price), cost(4, 1, judge_price)
    budget = 0.06
    expected = _calls_within(budget, worst, actual, 30)
    assert 0 < expected < 30
    result = evalnb.run(suite, [Model("m", base_url=server.base_url)], judge_model=Model("j", base_url=judge.base_url,
                        price=judge_price), judge_generation={"max_output_tokens": 4}, max_cost_usd=budget,
                        concurrency=4, progress=False)
    assert result.status == "stopped" and judge.request_count == expected
    samples = result.samples
    assert (samples["status"] == "completed").sum() == expected
    # a sample whose judge call the budget refused is not failed: it waits to be graded
    assert set(samples["status"]) <= {"completed", "scoring"} and not (samples["status"] == "failed").any()
    assert result.cost_usd == pytest.approx(expected * actual) and result.cost_usd <= budget
    done = evalnb.resume(result.run_id, max_cost_usd=None, progress=False)
    assert done.status == "completed" and judge.request_count == 30 and server.request_count == 30


def test_bad_prices_and_budgets_are_refused_before_anything_runs(make_suite, model_server):
    server = model_server()
    suite = _suite(make_suite, 3)
    for price, message in [({"input": 1}, "missing output"), ({"input": -1, "output": 1}, "finite number >= 0"),
                           ({"input": 1, "output": 2, "cache": 1}, "unknown key"), ("cheap", "must be a dict"),
                           ({"input": float("nan"), "output": 1}, "finite number"),
                           ({"input": True, "output": 1}, "finite number")]:
        with pytest.raises(ValueError, match=message):
            Model("m", base_url=server.base_url, price=price)
    model = Model("m", base_url=server.base_url, price=PRICE)
    for budget in (-1, float("inf"), "5", True):
        with pytest.raises(ValueError, match="max_cost_usd must be a number of USD >= 0"):
            evalnb.run(suite, [model], generation=GEN, max_cost_usd=budget, progress=False)
    with pytest.raises(ValueError, match="no max_output_tokens"):
        evalnb.run(suite, [model], max_cost_usd=1, progress=False)
    with pytest.raises(ValueError, match="judge_generation sets no max_output_tokens"):
        evalnb.run(suite, [model], generation=GEN, judge_model=Model("j", base_url=server.base_url, price=PRICE),
                   max_cost_usd=1, progress=False)
    with pytest.raises(ManifestError, match="judge_generation.temperature"):
        evalnb.run(suite, [model], judge_generation={"temperature": 9}, progress=False)
    assert server.request_count == 0


def test_a_budget_without_prices_warns_and_counts_calls_as_free(make_suite, model_server):
    server = model_server()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = evalnb.run(_suite(make_suite, 4), [Model("m", base_url=server.base_url)], max_cost_usd=0,
                            progress=False)
    assert any("no model has a price" in str(w.message) for w in caught)
    assert result.status == "completed" and server.request_count == 4


def test_the_progress_line_shows_spend(make_suite, model_server, capsys):
    server = model_server(usage={"input_tokens": PROMPT_TOKENS, "output_tokens": 10})
    evalnb.run(_suite(make_suite, 5), [Model("m", base_url=server.base_url, price=PRICE)], generation=GEN,
               max_cost_usd=5, progress="text")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"${5 * cost(PROMPT_TOKENS, 10):.4f} spent of $5.00" in line and "completed" in line


def test_a_budget_below_a_cent_is_shown_as_given_not_rounded_to_zero(make_suite, model_server, capsys):
    server = model_server(usage={"input_tokens": PROMPT_TOKENS, "output_tokens": 10})
    small = {"input": 1.0, "output": 2.0}  # a call's worst case: (8 + 2 * 16) / 1e6 = $0.00004
    result = evalnb.run(_suite(make_suite, 10), [Model("m", base_url=server.base_url, price=small)], generation=GEN,
                        max_cost_usd=0.0001, progress="text")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert result.status == "stopped" and "spent of $0.0001" in line and "of $0.00 " not in line + " "
    assert "spent of $0.0001," in result.run["error"]


def test_the_progress_panel_shows_spend_and_judge_calls(make_suite, model_server, widget_displays):
    server = model_server(usage={"input_tokens": PROMPT_TOKENS, "output_tokens": 10})
    judge = model_server(lambda body: "yes", usage={"input_tokens": 4, "output_tokens": 1})
    source = "def grade(sample, item, ctx):\n    return ctx.responses_create(input='ok?')['output_text'] == 'yes'\n"
    suite = _suite(make_suite, 3, grader={"contract": "model_backed", "source": source})
    result = evalnb.run(suite, [Model("m", base_url=server.base_url, price=PRICE)], generation=GEN,
                        judge_model=Model("j", base_url=judge.base_url, price=PRICE), progress=True)
    [panel] = widget_displays
    assert f"${result.cost_usd:.4f} spent" in panel.title.value
    _, text = panel.rows["m"]
    assert "3 judge calls, 2 cached" in text.value and f"${result.cost_usd:.4f}" in text.value
    assert f"${result.cost_usd:.4f} spent" in panel.static_html()


@pytest.mark.parametrize("reuse", [True, False])
def test_answers_a_crash_kept_only_in_the_cache_stay_paid_for_by_their_run(make_suite, model_server, reuse):
    """A crash between an answer reaching the store and its sample being written: the resume takes
    the answer back from the cache, and it still counts as this run's call, at its price."""
    from evalnb.store import Store

    server = model_server(usage={"input_tokens": PROMPT_TOKENS, "output_tokens": 10})
    result = evalnb.run(_suite(make_suite, 8), [Model("m", base_url=server.base_url, price=PRICE)], reuse=reuse,
                        progress=False)
    with Store() as store:  # what such a crash leaves: the run unfinished, three samples never written
        store._conn.execute("DELETE FROM samples WHERE run_id = ? AND sample_index < 3", (result.run_id,))
        store.update_run(result.run_id, status="failed")
    done = evalnb.resume(result.run_id, progress=False)
    assert done.status == "completed" and server.request_count == 8  # nothing asked again
    assert not done.samples["cached"].any()
    assert done.cost_usd == pytest.approx(8 * cost(PROMPT_TOKENS, 10))


def test_pairwise_judge_spend_counts_in_a_resumed_runs_budget(make_suite, model_server):
    """Pairwise judge calls are the run's spend too: `Store.run_spend` counts them, so a resume's
    budget (the whole run's) leaves less for the candidates."""
    from evalnb.store import Store

    server = model_server(usage={"input_tokens": PROMPT_TOKENS, "output_tokens": 10})
    judge_server = model_server(lambda body: "The first. [[A]]", usage={"input_tokens": 100, "output_tokens": 10})
    suite = _suite(make_suite)
    worst, actual = cost(PROMPT_TOKENS, MAX_OUT), cost(PROMPT_TOKENS, 10)
    models = [Model(m, base_url=server.base_url, price=PRICE) for m in ("a", "b")]
    stopped = evalnb.run(suite, models, generation=GEN, max_cost_usd=0.5, progress=False, concurrency=1)
    assert stopped.status == "stopped"
    sent, candidates_spent = server.request_count, stopped.cost_usd
    assert candidates_spent == pytest.approx(sent * actual)
    judge = Model("judge", base_url=judge_server.base_url, price=PRICE)
    pairs = stopped.pairwise("a", "b", judge_model=judge, swap=False)
    judged = judge_server.request_count
    assert judged == len(pairs) > 0
    judge_spent = judged * cost(100, 10)
    assert judge_spent > 2 * worst  # without counting it, the resume below would make calls
    assert Store().run_spend(stopped.run_id) == pytest.approx(candidates_spent + judge_spent)
    # the run's budget raised by less than the judge spent: still nothing fits
    again = evalnb.resume(stopped.run_id, max_cost_usd=0.5 + judge_spent - worst, progress=False)
    assert again.status == "stopped" and server.request_count == sent
    # raised by the judge's spend plus room for calls: exactly those calls are made
    more = evalnb.resume(stopped.run_id, max_cost_usd=candidates_spent + judge_spent + 3 * worst, progress=False)
    assert server.request_count == sent + _calls_within(3 * worst, worst, actual, 2 * N - sent)
    assert more.status == "stopped"
