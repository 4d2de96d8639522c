"""Gaps an audit of pairwise judging found (issue 32): costs of a priced and an unpriced judge on
one pair, which judge set-up counts as the current one, ranking when no pair got a verdict, and
ranks of equal scores. Real local servers play candidates and judges."""

from __future__ import annotations

import math

import pytest

import evalnb
from evalnb import Model
from evalnb.store import Store
from helpers.pairwise_kit import TEMPLATE, biased_judge, candidate, fair_judge
from helpers.runner_kit import rows

pytestmark = pytest.mark.usefixtures("evalnb_home")

N = 6
MODELS = ("strong", "mid", "weak")


@pytest.fixture
def run(make_suite, model_server):
    server = model_server(candidate)
    return evalnb.run(make_suite({"t": rows(N)}), [Model(m, base_url=server.base_url) for m in MODELS],
                      progress=False)


def test_a_priced_and_an_unpriced_judge_on_one_pair_keep_their_own_rows_and_the_total(run, model_server):
    server = model_server(fair_judge)
    run.pairwise("strong", "mid", judge_model=Model("free", base_url=server.base_url), template=TEMPLATE)
    priced = Model("paid", base_url=server.base_url, price={"input": 1000, "output": 1000})
    run.pairwise("strong", "mid", judge_model=priced, template=TEMPLATE)
    spent = sum(c["cost_usd"] or 0 for c in Store().pairwise_calls(run.run_id))
    assert spent > 0
    costs = evalnb.load_run(run.run_id).costs
    rows_ = costs[costs["role"] == "pairwise judge"].set_index("billed_model")
    assert sorted(rows_.index) == ["free", "paid"] and (rows_["model"] == "strong vs mid").all()
    assert math.isnan(rows_.loc["free", "cost_usd"]) and rows_.loc["paid", "cost_usd"] == pytest.approx(spent)
    with pytest.warns(UserWarning, match=r"priced calls only: .*free \(pairwise judge\)"):
        total = evalnb.load_run(run.run_id).cost_usd
    assert total == pytest.approx(spent)  # was 0: the shared row was NaN and NaN counted 0


def test_unpriced_candidate_calls_are_named_and_the_priced_ones_counted(make_suite, model_server):
    server = model_server(candidate)
    paid = Model("paid", base_url=server.base_url, price={"input": 1000, "output": 1000})
    result = evalnb.run(make_suite({"t": rows(3)}), [paid, Model("free", base_url=server.base_url)], progress=False)
    spent = float(result.samples["cost_usd"].fillna(0).sum())
    assert spent > 0
    with pytest.warns(UserWarning, match=r"3 call\(s\) of free \(candidate\)"):
        assert result.cost_usd == pytest.approx(spent)


def test_the_judge_set_up_used_last_is_the_current_one(run, model_server):
    server = model_server(biased_judge)
    first, second = (Model(name, base_url=server.base_url) for name in ("J1", "J2"))

    def current() -> str:
        return evalnb.load_run(run.run_id).pairwise_judgements.attrs["judge"]["judge_model"]

    run.pairwise("strong", "mid", judge_model=first, template=TEMPLATE)
    run.pairwise("strong", "mid", judge_model=second, template=TEMPLATE)  # the same second, most likely
    assert current() == "J2"
    sent = server.calls()
    run.pairwise("strong", "mid", judge_model=first, template=TEMPLATE)  # answered by the store
    assert server.calls() == sent and current() == "J1"
    judges = Store().pairwise_judges(run.run_id)
    assert [j["judge_model"] for j in judges] == ["J2", "J1"]
    assert judges[1]["created_at"] <= judges[0]["created_at"]  # created first, used last


def test_rank_without_a_single_verdict_gives_no_scores_and_says_so(run, model_server):
    server = model_server(lambda body: "Both are fine, I cannot choose.")
    garbled = Model("garbled", base_url=server.base_url)
    [row] = run.win_rate("strong", "mid", judge_model=garbled, template=TEMPLATE).to_dict("records")
    assert (row["n"], row["errors"]) == (0, N) and math.isnan(row["win_rate"])
    with pytest.warns(UserWarning, match="no pair got a verdict"):
        ranked = run.rank(judge_model=garbled, template=TEMPLATE)
    assert ranked["model"].tolist() == list(MODELS) and ranked[["score", "ci_low", "ci_high"]].isna().all().all()
    assert ranked["rank"].isna().all() and (ranked[["wins", "losses", "ties"]] == 0).all().all()
    assert "no pair got a verdict" in ranked.attrs["note"]
    with pytest.warns(UserWarning):
        lc = run.rank(judge_model=garbled, template=TEMPLATE, length_control=True)
    assert lc["lc_win_rate"].isna().all()


def test_a_candidate_without_any_verdict_has_no_score(run, model_server):
    from evalnb.results.bradley_terry import rank_table

    server = model_server(fair_judge)
    pairs = run.pairwise("strong", "weak", judge_model=Model("j", base_url=server.base_url), template=TEMPLATE)
    ranked = rank_table(pairs[pairs["verdict"].notna()], ["strong", "mid", "weak"])
    assert ranked["model"].tolist() == ["strong", "weak", "mid"]  # 3 wins, 2 losses, 1 tie; mid never judged
    assert ranked.iloc[-1][["score", "ci_low", "ci_high"]].isna().all() and ranked.iloc[0]["score"] > 1000
    assert ranked["rank"].tolist()[:2] == [1, 2] and ranked["rank"].isna().tolist() == [False, False, True]
    assert ranked.attrs["note"] == "no pair with a verdict for mid: no score"


def test_equal_scores_share_a_rank(run, model_server):
    server = model_server(biased_judge)  # every pair inconsistent: all ties
    ranked = run.rank(judge_model=Model("biased", base_url=server.base_url), template=TEMPLATE)
    assert (ranked["ties"] == 2 * N).all() and ranked["score"].nunique() == 1
    assert ranked["rank"].tolist() == [1, 1, 1] and ranked["rank"].dtype == "int64"
