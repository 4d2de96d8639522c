"""RunResult.diff on two real runs (two suite versions against a LocalModelServer), known answers.

Version 1 asks ``{{q}}``, version 2 ``{{q}} Think first.``; the server's model ``flaky`` is
wrong on items W1 under v1 and W2 under v2, so the fixed items are W1 - W2 and the broken
ones W2 - W1; ``good`` is always right. Every number is checked against numpy / scipy /
statsmodels.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats as sps

import evalnb
from evalnb import Model
from evalnb.results import verdicts
from evalnb.results.diff import DIFF_COLUMNS
from helpers.runner_kit import item_number

pytestmark = pytest.mark.usefixtures("evalnb_home")

N = 20
W1 = {1, 3, 5, 7, 9, 11}
W2 = {5, 13}
FIXED, BROKEN = W1 - W2, W2 - W1
V2_SUFFIX = " Think first."


def responder(body: dict) -> str:
    prompt = body["input"]
    n = item_number(prompt)
    wrong = W2 if prompt.endswith(V2_SUFFIX) else W1
    return "wrong" if body["model"] == "flaky" and n in wrong else str(n)


def _rows():
    return [{"q": f"ITEM-{i}: what number?", "a": str(i), "passage": f"p{i // 4}"} for i in range(N)]


@pytest.fixture
def two_runs(make_suite, model_server):
    server = model_server(responder)
    models = [Model("flaky", base_url=server.base_url), Model("good", base_url=server.base_url)]
    v1 = make_suite({"t": _rows()})
    manifest = v1.to_dict()
    manifest["tasks"][0]["prompt_template"] = "{{q}}" + V2_SUFFIX
    v2 = evalnb.Suite.from_dict(manifest, base_dir=v1.base_dir)
    return evalnb.run(v1, models, progress=False), evalnb.run(v2, models, progress=False), server


def _diffs(before, after, model):
    s0 = before.samples.set_index(["model", "sample_index"])["score"]
    s1 = after.samples.set_index(["model", "sample_index"])["score"]
    return (s1.loc[model] - s0.loc[model]).sort_index().to_numpy()


def test_diff_counts_the_known_fixed_and_broken_items(two_runs):
    before, after, server = two_runs
    assert server.request_count == 4 * N  # v2 changed every prompt: no reuse
    table = after.diff(before)
    assert list(table.columns) == list(DIFF_COLUMNS)
    flaky = table.set_index("model").loc["flaky"]
    assert (flaky.task_id, flaky.metric, flaky.n_pairs) == ("t", "score", N)
    assert (flaky.n_fixed, flaky.n_broken) == (len(FIXED), len(BROKEN))
    assert flaky.mean_baseline == pytest.approx(1 - len(W1) / N) and flaky["mean"] == pytest.approx(1 - len(W2) / N)
    assert flaky.mean_diff == pytest.approx((len(W1) - len(W2)) / N)
    d = _diffs(before, after, "flaky")
    stderr = d.std(ddof=1) / math.sqrt(N)
    assert flaky.stderr == pytest.approx(stderr, rel=1e-12)
    half = sps.t.ppf(0.975, N - 1) * stderr
    assert (flaky.ci_low, flaky.ci_high) == pytest.approx((d.mean() - half, d.mean() + half), rel=1e-10)
    assert flaky.mcnemar_p == pytest.approx(sps.binomtest(len(BROKEN), len(FIXED) + len(BROKEN), 0.5).pvalue)
    assert flaky.mde == pytest.approx((sps.norm.ppf(0.975) + sps.norm.ppf(0.8)) * stderr, rel=1e-12)
    assert flaky.mde == pytest.approx(2.8016 * stderr, rel=1e-4)
    good = table.set_index("model").loc["good"]
    assert (good.n_fixed, good.n_broken, good.mean_diff, good.stderr, good.mcnemar_p, good.mde) == (0, 0, 0, 0, 1, 0)


def test_diff_at_another_confidence_and_in_words(two_runs):
    before, after, _ = two_runs
    d = _diffs(before, after, "flaky")
    row = after.diff(before, confidence=0.8).set_index("model").loc["flaky"]
    half = sps.t.ppf(0.9, N - 1) * d.std(ddof=1) / math.sqrt(N)
    assert row.ci_high - row.mean_diff == pytest.approx(half, rel=1e-10)
    # the runs are named as a reader meets them: name first (none here), then the id
    words = verdicts(after.diff(before)).set_index("comparison").loc[f"flaky: {after.run_id} − {before.run_id}"]
    assert words.verdict == "not shown"  # +0.20 with 5 fixed and 1 broken: McNemar p = 0.22
    assert words.n_needed == evalnb.stats.sample_size(0.2, d.std(ddof=1))
    assert "could not be told from noise" in words.text and f"about {words.n_needed} items" in words.text


def test_verdicts_for_an_unchanged_model_say_so_quietly(two_runs):
    before, after, _ = two_runs
    words = verdicts(after.diff(before)).set_index("comparison").loc[f"good: {after.run_id} − {before.run_id}"]
    assert words.verdict == "no difference"
    assert words.text == f"good: {after.run_id} − {before.run_id} on t (score): no difference; all {N} items scored the same in both."
    assert "noise" not in words.text and "0.000" not in words.text and pd.isna(words.n_needed)


def test_diff_clustered_by_a_row_field(two_runs):
    before, after, _ = two_runs
    table = after.diff(before, cluster_by="passage").set_index("model")
    row = table.loc["flaky"]
    d = _diffs(before, after, "flaky")
    groups = np.arange(N) // 4
    fit = sm.OLS(d, np.ones((N, 1))).fit(cov_type="cluster", cov_kwds={"groups": groups})
    assert row.n_clusters == 5
    assert row.stderr == pytest.approx(float(fit.bse[0]), rel=1e-10)
    half = sps.t.ppf(0.975, 4) * row.stderr
    assert (row.ci_low, row.ci_high) == pytest.approx((d.mean() - half, d.mean() + half), rel=1e-10)
    assert row.mde == pytest.approx(evalnb.stats.min_detectable_effect(1, row.stderr))
    with pytest.raises(ValueError, match=r"task 't', row 0: cluster_by field 'nope' not found .*the row has: q, a, passage"):
        after.diff(before, cluster_by="nope")


def test_diff_of_runs_that_share_nothing_and_of_a_non_result(two_runs, make_suite, model_server):
    before, after, _ = two_runs
    with pytest.raises(TypeError, match="baseline RunResult"):
        after.diff(before.samples)
    server = model_server(responder)
    other = evalnb.run(make_suite({"other": _rows()}), [Model("good", base_url=server.base_url)], progress=False)
    with pytest.raises(ValueError, match="share no \\(task, model, metric\\)"):
        other.diff(before)


def test_diff_with_epochs_pairs_item_means(make_suite, model_server):
    """Epochs: an item's score is its mean over epochs; fixed/broken count only 0 -> 1 and 1 -> 0 means."""
    asks: dict[tuple[str, str], int] = {}

    def alternating(body):
        prompt = body["input"]
        n = item_number(prompt)
        k = asks[(body["model"], prompt)] = asks.get((body["model"], prompt), -1) + 1
        if prompt.endswith(V2_SUFFIX):
            return str(n)  # v2: always right
        return str(n) if (n % 2 == 0 or k % 2 == 0) else "wrong"  # v1: odd items right every other ask

    server = model_server(alternating)
    models = [Model("m", base_url=server.base_url)]
    v1 = make_suite({"t": _rows()})
    manifest = v1.to_dict()
    manifest["tasks"][0]["prompt_template"] = "{{q}}" + V2_SUFFIX
    v2 = evalnb.Suite.from_dict(manifest, base_dir=v1.base_dir)
    before = evalnb.run(v1, models, epochs=2, progress=False)
    after = evalnb.run(v2, models, epochs=2, progress=False)
    row = after.diff(before).iloc[0]
    assert row.n_pairs == N  # items, not samples
    assert row.mean_baseline == pytest.approx(0.75) and row["mean"] == 1.0
    assert (row.n_fixed, row.n_broken) == (0, 0)  # odd items went 0.5 -> 1, not 0 -> 1
    assert math.isnan(row.mcnemar_p)  # item means are not 0/1
    d = np.array([0.5 if i % 2 else 0.0 for i in range(N)])
    assert row.stderr == pytest.approx(d.std(ddof=1) / math.sqrt(N))
