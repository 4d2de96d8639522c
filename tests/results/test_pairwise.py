"""Pairwise judging against real local servers: candidates whose better answer is known per item,
a fair judge that reads both answers, a judge that always says [[A]]; Bradley–Terry checked
against statsmodels' logistic regression (an independent fit, tests only)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import evalnb
from evalnb import Model
from evalnb.store import Store
from helpers.pairwise_kit import (
    TEMPLATE,
    UNPARSEABLE_ITEM,
    better,
    biased_judge,
    candidate,
    fair_judge,
    quality,
    sloppy_judge,
)
from helpers.runner_kit import item_number, rows, wait_for

pytestmark = pytest.mark.usefixtures("evalnb_home")

N = 24
MODELS = ("strong", "mid", "weak", "worst")


@pytest.fixture
def run(make_suite, model_server):
    server = model_server(candidate)
    suite = make_suite({"t": rows(N)})
    return evalnb.run(suite, [Model(m, base_url=server.base_url) for m in MODELS], progress=False)


def judge(server) -> Model:
    return Model("judge", base_url=server.base_url)


def requests_for(*pairs: tuple[str, str]) -> int:
    """Judge calls both orders of these pairs take: identical requests (two equal answers, shown
    either way) are one call."""
    return len({(n, quality(x, n), quality(y, n)) for a, b in pairs for n in range(N) for x, y in ((a, b), (b, a))})


def test_fair_judge_gives_the_known_verdicts_and_win_rates(run, model_server):
    server = model_server(fair_judge)
    pairs = run.pairwise("strong", "worst", judge_model=judge(server), template=TEMPLATE)
    assert list(pairs.columns) == ["task_id", "sample_index", "epoch", "a", "b", "verdict", "verdict_ab",
                                   "verdict_ba", "consistent", "error"]
    assert len(pairs) == N and (pairs["verdict"] == "a").all() and pairs["consistent"].all()
    assert pairs["error"].isna().all()
    assert server.calls("/v1/responses") == 2 * N  # both orders of every item
    [row] = run.win_rate("strong", "worst", judge_model=judge(server), template=TEMPLATE).to_dict("records")
    assert server.calls() == 2 * N  # asked again: nothing is sent
    assert (row["n"], row["a_wins"], row["b_wins"], row["ties"], row["win_rate"]) == (N, N, 0, 0, 1.0)
    assert row["ci_low"] == row["ci_high"] == 1.0 and row["inconsistent"] == 0 and math.isnan(row["position_bias"])
    # a mixed pair: every verdict is the known one, and the counts follow
    mixed = run.pairwise("strong", "weak", judge_model=judge(server), template=TEMPLATE)
    assert mixed["verdict"].tolist() == [better("strong", "weak", n) for n in range(N)]
    [row] = run.win_rate("weak", "strong", judge_model=judge(server), template=TEMPLATE).to_dict("records")
    expected = [better("weak", "strong", n) for n in range(N)]
    assert (row["a_wins"], row["b_wins"], row["ties"]) == (expected.count("a"), expected.count("b"),
                                                           expected.count("tie"))
    assert row["win_rate"] == pytest.approx((expected.count("a") + expected.count("tie") / 2) / N)
    assert row["ci_low"] < row["win_rate"] < row["ci_high"]
    # (weak, strong) is (strong, weak) swapped: the same calls; on a tie both orders are one request
    assert expected.count("tie") > 0 and server.calls() == 2 * N + 2 * N - expected.count("tie")


def test_a_judge_that_always_says_A_is_all_position_bias(run, model_server):
    server = model_server(biased_judge)
    pairs = run.pairwise("strong", "worst", judge_model=judge(server), template=TEMPLATE)
    assert (pairs["verdict_ab"] == "a").all() and (pairs["verdict_ba"] == "b").all()
    assert (pairs["verdict"] == "tie").all() and not pairs["consistent"].any()
    [row] = run.win_rate("strong", "worst", judge_model=judge(server), template=TEMPLATE).to_dict("records")
    assert (row["n"], row["ties"], row["win_rate"], row["inconsistent"], row["position_bias"]) == (N, N, 0.5, N, 1.0)
    # one order only: the bias goes unseen, A (shown first) wins everything
    one = run.pairwise("worst", "strong", judge_model=judge(server), template=TEMPLATE, swap=False)
    assert (one["verdict"] == "a").all() and one["consistent"].isna().all() and one["verdict_ba"].isna().all()
    assert server.calls() == 2 * N  # worst-first calls were made by the swap already


def test_an_unparseable_reply_is_an_error_on_its_row_not_a_guess(run, model_server):
    server = model_server(sloppy_judge)
    pairs = run.pairwise("strong", "weak", judge_model=judge(server), template=TEMPLATE).set_index("sample_index")
    bad = pairs.loc[UNPARSEABLE_ITEM]
    assert pd.isna(bad["verdict"]) and pd.isna(bad["verdict_ab"]) and pd.isna(bad["consistent"])
    assert "no [[A]], [[B]] or [[C]] in the judge's reply" in bad["error"] and "[[D]]" in bad["error"]
    assert pairs.drop(index=UNPARSEABLE_ITEM)["error"].isna().all()
    [row] = run.win_rate("strong", "weak", judge_model=judge(server), template=TEMPLATE).to_dict("records")
    assert row["n"] == N - 1 and row["errors"] == 1
    stored = Store().pairwise_calls(run.run_id)
    assert sum(c["error"] is not None for c in stored) == 2 and len(stored) == 2 * N
    assert server.calls() == requests_for(("strong", "weak"))  # a stored unparseable reply is not asked again


def test_the_default_template_is_mt_bench_and_templates_are_checked(run, model_server):
    server = model_server(lambda body: "[[B]] on reflection... no: [[A]]")  # the last mark counts
    pairs = run.pairwise("mid", "weak", judge_model=judge(server), swap=False)
    assert (pairs["verdict"] == "a").all()
    sent = server.requests[0].body["input"]
    assert "impartial judge" in sent and "[The Start of Assistant A's Answer]" in sent and "[[C]]\" for a tie" in sent
    assert "Reference Answer" in sent  # these items have a target
    with pytest.raises(ValueError, match=r"lacks \{\{output_b\}\}"):
        run.pairwise("mid", "weak", judge_model=judge(server), template="{{output_a}} vs ?")
    with pytest.raises(ValueError, match=r"unknown placeholder\(s\) \{\{answer\}\}"):
        run.pairwise("mid", "weak", judge_model=judge(server), template="{{output_a}} {{output_b}} {{answer}}")
    with pytest.raises(ValueError, match="'nobody' is not a candidate of this run; its candidates: 'strong'"):
        run.pairwise("nobody", "weak", judge_model=judge(server))
    with pytest.raises(ValueError, match="the same candidate"):
        run.pairwise("weak", "weak", judge_model=judge(server))
    with pytest.raises(TypeError, match="bare string"):
        run.pairwise("mid", "weak", judge_model="judge")


def test_ranking_three_candidates_matches_an_independent_bradley_terry_fit(run, model_server):
    sm = pytest.importorskip("statsmodels.api")
    server = model_server(fair_judge)
    names = ["weak", "strong", "mid"]
    ranked = run.rank(judge_model=judge(server), models=names, template=TEMPLATE)
    assert server.calls() == requests_for(("weak", "strong"), ("weak", "mid"), ("strong", "mid"))
    assert ranked["model"].tolist() == ["strong", "mid", "weak"] and ranked["rank"].tolist() == [1, 2, 3]
    assert (ranked["ci_low"] <= ranked["score"]).all() and (ranked["score"] <= ranked["ci_high"]).all()
    assert ranked["score"].mean() == pytest.approx(1000)
    # the same verdicts (from the store: no call), fitted as Arena-Hard does: a logistic
    # regression without intercept, a win as y=1, a tie as half a win each way
    frames = [run.pairwise(a, b, judge_model=judge(server), template=TEMPLATE)
              for a, b in (("weak", "strong"), ("weak", "mid"), ("strong", "mid"))]
    assert server.calls() == requests_for(("weak", "strong"), ("weak", "mid"), ("strong", "mid"))
    X, y, w = [], [], []
    for frame in frames:
        for r in frame.itertuples():
            x = [(r.a == n) - (r.b == n) for n in names]
            share = {"a": 1.0, "tie": 0.5, "b": 0.0}[r.verdict]
            for outcome, weight in ((1.0, share), (0.0, 1 - share)):
                if weight:
                    X.append(x[:-1])  # the last candidate is the reference (theta = 0)
                    y.append(outcome)
                    w.append(weight)
    fit = sm.GLM(np.array(y), np.array(X, float), family=sm.families.Binomial(), freq_weights=np.array(w)).fit()
    theta = np.append(fit.params, 0.0)
    elo = 1000 + 400 * (theta - theta.mean()) / np.log(10)
    mine = ranked.set_index("model").loc[names, "score"].to_numpy()
    np.testing.assert_allclose(mine, elo, atol=0.05)
    counts = ranked.set_index("model")
    for name in names:
        outcomes = [better(name, other, n) for other in names if other != name for n in range(N)]
        assert counts.loc[name, ["wins", "losses", "ties"]].tolist() == [outcomes.count("a"), outcomes.count("b"),
                                                                        outcomes.count("tie")]


def test_length_control_adds_adjusted_win_rates(run, model_server):
    server = model_server(fair_judge)
    ranked = run.rank(judge_model=judge(server), models=["strong", "mid", "weak"], template=TEMPLATE,
                      length_control=True)
    assert "lc_win_rate" in ranked.columns and ranked["lc_win_rate"].between(0, 1).all()
    assert ranked["lc_win_rate"].is_monotonic_decreasing and "length_coef" in ranked.attrs


def test_a_crashed_pass_resumes_without_asking_answered_items_again(run, model_server, evalnb_home):
    server = model_server(fair_judge, latency=0.05)
    child = textwrap.dedent(f"""
        import evalnb
        from helpers.pairwise_kit import TEMPLATE
        result = evalnb.load_run({run.run_id!r})
        result.pairwise("strong", "mid", judge_model=evalnb.Model("judge", base_url={server.base_url!r}),
                        template=TEMPLATE, concurrency=1)
    """)
    tests = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), str(tests.parent)]),
           "EVALNB_HOME": str(evalnb_home)}
    proc = subprocess.Popen([sys.executable, "-c", child], env=env)
    store = Store()
    try:
        wait_for(lambda: len(store.pairwise_calls(run.run_id)) >= 5 or proc.poll() is not None, what="5 verdicts")
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode != 0, "the pass finished before it could be killed"
    answered = {c["request_key"] for c in store.pairwise_calls(run.run_id)}
    assert 5 <= len(answered) < 2 * N
    before = server.calls()
    asked_before = [r.body["input"] for r in server.requests]
    pairs = run.pairwise("strong", "mid", judge_model=judge(server), template=TEMPLATE)
    assert pairs["verdict"].tolist() == [better("strong", "mid", n) for n in range(N)]
    resent = [r.body["input"] for r in server.requests[before:]]
    assert len(resent) <= 2 * N - len(answered)  # the stored verdicts were not asked for again
    assert len(resent) >= 2 * N - len(asked_before)  # and everything never asked was asked now
    assert len(store.pairwise_calls(run.run_id)) == 2 * N


def test_budget_and_price(run, model_server):
    server = model_server(fair_judge)
    priced = Model("judge", base_url=server.base_url, price={"input": 1000, "output": 1000})
    with pytest.raises(ValueError, match="sets no max_output_tokens"):
        run.pairwise("strong", "mid", judge_model=priced, template=TEMPLATE, max_cost_usd=1)
    pairs = run.pairwise("strong", "mid", judge_model=priced, template=TEMPLATE, max_cost_usd=0.2,
                         judge_generation={"max_output_tokens": 20}, concurrency=1)
    stored = Store().pairwise_calls(run.run_id)
    spent = sum(c["cost_usd"] or 0 for c in stored)
    assert 0 < spent <= 0.2 and 0 < len(stored) == server.calls() < 2 * N
    refused = pairs[pairs["error"].notna()]
    assert len(refused) and refused["error"].str.contains("budget").all()
    [row] = run.costs[run.costs["role"] == "pairwise judge"].to_dict("records")
    assert (row["model"], row["billed_model"], row["calls"], row["cached"]) == ("strong vs mid", "judge", len(stored), 0)
    assert row["cost_usd"] == pytest.approx(spent) and run.cost_usd == pytest.approx(spent)  # candidates: no price
    # a larger budget continues: only the calls not made yet are sent
    run.pairwise("strong", "mid", judge_model=priced, template=TEMPLATE, max_cost_usd=100,
                 judge_generation={"max_output_tokens": 20})
    assert server.calls() == 2 * N


def test_pairwise_labels_agreement_and_kappa(run, model_server):
    server = model_server(fair_judge)
    truth = [better("strong", "weak", n) for n in range(N)]
    person = [t if n % 3 else {"a": "b", "b": "tie", "tie": "a"}[t] for n, t in enumerate(truth)]
    labels = pd.DataFrame({"task_id": "t", "sample_index": range(N), "a": "strong", "b": "weak", "label": person})
    with pytest.raises(ValueError, match="no stored pairwise judgements"):
        run.judge_agreement(labels)
    [row] = run.judge_agreement(labels, judge_model=judge(server), template=TEMPLATE).to_dict("records")
    agree = sum(p == t for p, t in zip(person, truth))
    assert row["n"] == N and row["accuracy"] == pytest.approx(agree / N)
    from evalnb.results.agreement import cohen_kappa

    assert row["cohen_kappa"] == pytest.approx(cohen_kappa(person, truth))
    # labels written the other way round read the stored verdicts, flipped
    flipped = labels.assign(a="weak", b="strong", label=[{"a": "b", "b": "a", "tie": "tie"}[p] for p in person])
    [again] = evalnb.load_run(run.run_id).judge_agreement(flipped).to_dict("records")
    assert again["accuracy"] == row["accuracy"] and server.calls() == requests_for(("strong", "weak"))
    with pytest.raises(ValueError, match="label must be 'a', 'b' or 'tie'"):
        run.judge_agreement(labels.assign(label="A"))


def test_stored_judgements_reach_the_run_report(run, model_server, tmp_path):
    server = model_server(fair_judge)
    run.rank(judge_model=judge(server), models=["strong", "mid", "weak"], template=TEMPLATE)
    stored = evalnb.load_run(run.run_id).pairwise_judgements
    assert len(stored) == 3 * N and stored.attrs["judge"]["judge_model"] == "judge"
    path = evalnb.report(run.run_id, tmp_path / "run.html")
    page = path.read_text()
    assert "Pairwise judgements" in page and "Win rate of A against B" in page  # the picture's title
    assert "Bradley–Terry ranking (Elo scale" in page and "strong vs mid (n=24)" in page  # a bar's label
    assert page.count("<svg") >= 3  # metrics, win rates, ranking
    assert page.index("strong") < page.index("Samples")


def test_a_candidate_that_won_everything_gets_a_finite_score(run, model_server):
    server = model_server(fair_judge)
    ranked = run.rank(judge_model=judge(server), models=["worst", "strong"], template=TEMPLATE)
    assert ranked["model"].tolist() == ["strong", "worst"] and ranked[["wins", "losses"]].iloc[0].tolist() == [N, 0]
    assert np.isfinite(ranked[["score", "ci_low", "ci_high"]].to_numpy()).all()
    assert ranked["score"].iloc[0] - ranked["score"].iloc[1] > 1000  # no finite MLE: the weak prior holds it


def test_candidate_names_are_models_or_variants_never_both():
    from evalnb.results.candidates import candidate_names, candidate_samples

    plain = pd.DataFrame({"task_id": "t", "model": ["m1", "m2"], "sample_index": 0, "epoch": 0})
    assert candidate_samples(plain, "m2")["model"].tolist() == ["m2"]
    assert candidate_names(plain.assign(variant=""), ["m1", "m2"]) == ["m1", "m2"]  # empty variants: none
    variants = pd.DataFrame({"task_id": "t", "model": "m1", "sample_index": [0, 0], "epoch": 0,
                             "variant": ["short", "long"]})
    assert candidate_names(variants, ["m1"]) == ["m1", "short", "long", "m1 · short", "m1 · long"]
    assert candidate_samples(variants, "long")["variant"].tolist() == ["long"]
    assert candidate_samples(variants, "m1 · short")["variant"].tolist() == ["short"]
    with pytest.raises(ValueError, match="'m1' denotes several answers per item"):
        candidate_samples(variants, "m1", where="a")
    with pytest.raises(ValueError, match="both a model label and a variant name"):
        candidate_samples(variants.assign(variant=["m1", "long"]), "m1")
    with pytest.raises(ValueError, match="b='v9' is not a candidate of this run; its candidates: 'm1', 'short'"):
        candidate_samples(variants, "v9", where="b")


def test_another_run_with_the_same_answers_is_judged_from_the_cache(make_suite, model_server):
    cand, server = model_server(candidate), model_server(fair_judge)
    suite = make_suite({"t": rows(N)})
    models = [Model(m, base_url=cand.base_url) for m in ("strong", "mid")]
    first = evalnb.run(suite, models, progress=False)
    first.pairwise("strong", "mid", judge_model=judge(server), template=TEMPLATE)
    second = evalnb.run(suite, models, progress=False, name="again")
    assert second.run_id != first.run_id and server.calls() == 2 * N
    pairs = second.pairwise("strong", "mid", judge_model=judge(server), template=TEMPLATE)
    assert server.calls() == 2 * N and pairs["verdict"].tolist() == [better("strong", "mid", n) for n in range(N)]
    stored = Store().pairwise_calls(second.run_id)
    assert len(stored) == 2 * N and all(c["cached"] and c["cost_usd"] == 0 for c in stored)
    # another template is another question: asked anew
    second.pairwise("strong", "mid", judge_model=judge(server), template=TEMPLATE + " Be brief.", swap=False)
    assert server.calls() == 3 * N


def _by_variant(body: dict) -> str:
    """A candidate whose answer is better under the "defined" prompt (and from m1 than from m2)."""
    text = body.get("input") if isinstance(body.get("input"), str) else ""
    n = item_number(text) or 0
    q = (3 if "Be thorough" in text else 1) - (1 if body.get("model") == "m2" else 0)
    return f"answer {n} quality {q}"


VARIANTS = {"plain": {}, "defined": {"prompt_template": "{{q}} Be thorough."}}


def test_prompt_variants_are_candidates_end_to_end(make_suite, model_server):
    cand, server = model_server(_by_variant), model_server(fair_judge)
    suite = make_suite({"t": rows(N)})
    one = evalnb.run(suite, [Model("m1", base_url=cand.base_url)], progress=False, variants=VARIANTS)
    table = one.win_rate("plain", "defined", judge_model=judge(server), template=TEMPLATE)
    [row] = table.to_dict("records")
    assert (row["a"], row["b"], row["n"], row["a_wins"], row["b_wins"]) == ("plain", "defined", N, 0, N)
    assert row["win_rate"] == 0.0
    assert server.calls() == 2 * N and row["inconsistent"] == 0
    # the same candidates by their "model · variant" names: the judge cache answers, nothing is sent
    again = one.pairwise("m1 · defined", "m1 · plain", judge_model=judge(server), template=TEMPLATE)
    assert (again["verdict"] == "a").all() and len(again) == N and server.calls() == 2 * N
    # two models × two variants: rank() ranks every (model, variant) candidate by default
    two = evalnb.run(suite, [Model(m, base_url=cand.base_url) for m in ("m1", "m2")], progress=False,
                     variants=VARIANTS, name="grid")
    ranked = two.rank(judge_model=judge(server), template=TEMPLATE)
    assert ranked["model"].tolist() == ["m1 · defined", "m2 · defined", "m1 · plain", "m2 · plain"] == [
        two.candidates[i] for i in (1, 3, 0, 2)]
    assert ranked[["wins", "losses", "ties"]].values.tolist() == [[3 * N, 0, 0], [2 * N, N, 0], [N, 2 * N, 0],
                                                                   [0, 3 * N, 0]]
    with pytest.raises(ValueError, match=r"a='plain' denotes several answers per item .*'model · variant'"):
        two.win_rate("plain", "defined", judge_model=judge(server), template=TEMPLATE)
    stored = evalnb.load_run(two.run_id).pairwise_judgements
    assert len(stored) == 6 * N and stored["a"].iloc[0] == "m1 · plain"  # a: the first in candidate order
