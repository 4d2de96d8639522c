"""summarize(cluster_by=...), paired(cluster_by=...), paired_all, epochs in metrics, verdicts:
RunResult over known samples, every number against statsmodels / scipy / a hand computation."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from evalnb.results import RunResult, verdicts
from evalnb.results.stats import pass_at_k, sample_size

N_PASSAGES, PER_PASSAGE = 8, 3
MODELS = ("big", "mid", "small")


def _samples(seed=0, models=MODELS, epochs=1):
    """Items share passages (3 questions each); a model that misreads a passage misses its questions."""
    rng = random.Random(seed)
    out = []
    for m, model in enumerate(models):
        for p in range(N_PASSAGES):
            misread = rng.random() < 0.2 + 0.15 * m
            for q in range(PER_PASSAGE):
                i = p * PER_PASSAGE + q
                row = {"question": f"q{i}", "meta": {"passage": f"P{p}"}, "link": f"P{p}", "qid": i}
                for e in range(epochs):
                    right = rng.random() < (0.3 if misread else 0.9)
                    out.append({"task_id": "read", "model": model, "sample_index": i, "epoch": e,
                                "status": "completed", "dataset_row": row,
                                "scores": {"acc": float(right), "f1": round(rng.uniform(0, 1), 3)}})
    return out


def _result(**kw):
    return RunResult.from_data(_samples(**kw), run={"run_id": "r", "status": "completed", "models": list(MODELS)})


def _cluster_se(values, groups):
    fit = sm.OLS(np.asarray(values, float), np.ones((len(values), 1))).fit(
        cov_type="cluster", cov_kwds={"groups": np.asarray(groups)})
    return float(fit.bse[0])


def _values(result, model, metric="acc"):
    s = result.scores
    part = s[(s.model == model) & (s.metric == metric)].sort_values("sample_index")
    return part["value"].to_numpy()


GROUPS = np.arange(N_PASSAGES * PER_PASSAGE) // PER_PASSAGE


def test_summarize_clusters_by_a_row_field_with_cr1_and_t_g_minus_1():
    result = _result()
    table = result.summarize(cluster_by="link").set_index(["model", "metric"])
    for model in MODELS:
        row = table.loc[(model, "acc")]
        values = _values(result, model)
        assert (row.n, row.n_clusters) == (24, 8)
        assert row["mean"] == pytest.approx(values.mean())
        assert row.stderr == pytest.approx(_cluster_se(values, GROUPS), rel=1e-10)
        half = sps.t.ppf(0.975, 7) * row.stderr
        assert row.ci_low == pytest.approx(max(0.0, values.mean() - half), rel=1e-10)
        assert row.ci_high == pytest.approx(min(1.0, values.mean() + half), rel=1e-10)
    dotted = result.summarize(cluster_by="meta.passage").set_index(["model", "metric"])
    assert dotted["stderr"].equals(table["stderr"])


def test_clustered_stderr_with_one_item_per_cluster_is_the_ordinary_one():
    result = _result()
    plain = result.metrics.set_index(["model", "metric"])
    clustered = result.summarize(cluster_by="qid").set_index(["model", "metric"])
    assert (clustered["n_clusters"] == clustered["n"]).all()
    assert np.allclose(clustered["stderr"], plain["stderr"], rtol=1e-12)


def test_summarize_without_clustering_is_metrics_plus_n_clusters():
    result = _result()
    table = result.summarize()
    assert list(table.columns[:5]) == ["task_id", "model", "metric", "n", "n_clusters"]
    assert table.drop(columns="n_clusters").equals(result.metrics)
    assert (table["n_clusters"] == table["n"]).all()
    wider = result.summarize(confidence=0.99).set_index(["model", "metric"])
    narrow = result.metrics.set_index(["model", "metric"])
    assert (wider.ci_high - wider.ci_low > narrow.ci_high - narrow.ci_low).all()


def test_summarize_bad_input_names_the_task_row_and_field():
    result = _result()
    with pytest.raises(ValueError, match=r"task 'read', row 0: cluster_by field 'passage' not found \(no 'passage'\); "
                                         r"the row has: question, meta, link, qid"):
        result.summarize(cluster_by="passage")
    with pytest.raises(ValueError, match=r"cluster_by field 'meta.x' not found \(no 'x'\)"):
        result.summarize(cluster_by="meta.x")
    with pytest.raises(ValueError, match="cluster_by must be a dataset-row field name"):
        result.summarize(cluster_by="")
    with pytest.raises(ValueError, match="cluster_by must be"):
        result.summarize(cluster_by=3)
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        result.summarize(confidence=95)
    one = RunResult.from_data([{**s, "dataset_row": {"link": "same"}} for s in _samples()])
    with pytest.raises(ValueError, match=r"task 'read', model 'big', metric 'acc': all 24 scored items have the same "
                                         r"'link' \('same'\); clustered errors need at least 2 clusters"):
        one.summarize(cluster_by="link")
    nulls = RunResult.from_data([{**s, "dataset_row": {"link": None}} for s in _samples()])
    with pytest.raises(ValueError, match="task 'read', row 0: cluster_by field 'link' is null"):
        nulls.summarize(cluster_by="link")


def test_paired_clustered_differences():
    result = _result()
    table = result.paired("big", "small", cluster_by="link")
    row = table.iloc[0]
    d = _values(result, "big") - _values(result, "small")
    assert row.n_clusters == 8 and row.n_pairs == 24
    assert row.stderr == pytest.approx(_cluster_se(d, GROUPS), rel=1e-10)
    half = sps.t.ppf(0.975, 7) * row.stderr
    assert (row.ci_low, row.ci_high) == pytest.approx((d.mean() - half, d.mean() + half), rel=1e-10)
    plain = result.paired("big", "small").iloc[0]
    assert plain.stderr == pytest.approx(d.std(ddof=1) / math.sqrt(24))
    assert "n_clusters" not in result.paired("big", "small").columns


def test_paired_all_gives_every_pair_with_holm():
    result = _result()
    table = result.paired_all(metric="acc")
    assert list(zip(table.model_a, table.model_b)) == [("big", "mid"), ("big", "small"), ("mid", "small")]
    for row in table.itertuples():
        assert row.p_value == row.mcnemar_p  # 0/1 metric: McNemar's exact test
    assert list(table.p_holm) == pytest.approx(list(multipletests(table.p_value, method="holm")[1]))
    assert (table.p_holm >= table.p_value).all()
    continuous = result.paired_all(metric="f1")
    for row in continuous.itertuples():
        a, b = _values(result, row.model_a, "f1"), _values(result, row.model_b, "f1")
        assert row.p_value == pytest.approx(sps.ttest_rel(a, b).pvalue, rel=1e-8)
    assert list(continuous.p_holm) == pytest.approx(list(multipletests(continuous.p_value, method="holm")[1]))
    clustered = result.paired_all(metric="acc", cluster_by="link")
    for row in clustered.itertuples():
        assert row.p_value == pytest.approx(2 * sps.t.sf(abs(row.mean_diff / row.stderr), 7), rel=1e-8)
    with pytest.raises(ValueError, match="two or more distinct models"):
        result.paired_all(["big"])


def test_metrics_with_epochs_reduce_per_item_and_give_pass_at_k():
    result = _result(epochs=5)
    assert result.epochs == 5 and len(result.samples) == 3 * 24 * 5
    table = result.metrics.set_index(["model", "metric"])
    assert [c for c in table.columns if c.startswith("pass_at_")] == ["pass_at_1", "pass_at_5"]
    frame = result.samples
    for model in MODELS:
        part = frame[frame.model == model]
        per_item = part.groupby("sample_index")["acc"].mean()
        row = table.loc[(model, "acc")]
        assert (row.n, row.epochs) == (24, 5)
        assert row["mean"] == pytest.approx(per_item.mean())
        assert row.stderr == pytest.approx(per_item.std(ddof=1) / math.sqrt(24))
        correct = part.groupby("sample_index")["acc"].sum().astype(int)
        assert row.pass_at_1 == pytest.approx(per_item.mean())
        assert row.pass_at_5 == pytest.approx(np.mean([pass_at_k(5, int(c), 5) for c in correct]))
        assert math.isnan(table.loc[(model, "f1"), "pass_at_5"])  # not a 0/1 metric
    scores = result.scores
    assert len(scores) == 3 * 24 * 2  # one row per item and metric
    clustered = result.summarize(cluster_by="link").set_index(["model", "metric"])
    per_item = frame[frame.model == "big"].groupby("sample_index")["acc"].mean().to_numpy()
    assert clustered.loc[("big", "acc"), "stderr"] == pytest.approx(_cluster_se(per_item, GROUPS), rel=1e-10)


def test_an_item_whose_epochs_partly_failed_averages_the_scored_ones():
    samples = _samples(models=("big",), epochs=3)
    for s in samples:
        if s["sample_index"] == 0 and s["epoch"] == 1:
            s.update(status="failed", scores={})
    result = RunResult.from_data(samples)
    row = result.metrics.set_index("metric").loc["acc"]
    item0 = [s["scores"]["acc"] for s in samples if s["sample_index"] == 0 and s["status"] == "completed"]
    assert row.n == 24 and row.n_failed == 1
    assert result.scores.set_index(["metric", "sample_index"]).loc[("acc", 0), "value"] == pytest.approx(np.mean(item0))


def test_verdicts_in_words():
    result = _result()
    table = result.paired_all(metric="acc")
    words = verdicts(table)
    assert len(words) == 3 and set(words.verdict) <= {"real", "not shown", "borderline"}
    for w, row in zip(words.itertuples(), table.itertuples()):
        assert w.p_value == row.p_holm and w.test == "Holm-adjusted p"
        excludes = row.ci_low > 0 or row.ci_high < 0
        expected = "real" if excludes and row.p_holm < 0.05 else "not shown" if not excludes and row.p_holm >= 0.05 \
            else "borderline"
        assert w.verdict == expected
        sd = row.stderr * math.sqrt(row.n_pairs)
        assert w.n_needed == (sample_size(abs(row.mean_diff), sd) if row.mean_diff else None)
        assert w.mde == pytest.approx(2.80158 * sd / math.sqrt(row.n_pairs), rel=1e-4)
    with pytest.raises(ValueError, match="verdicts\\(\\) takes a table"):
        verdicts(result.metrics)


def test_paired_and_compare_work_on_item_means_with_epochs():
    result = _result(epochs=4)
    table = result.paired("big", "small")
    row = table.iloc[0]
    frame = result.samples
    means = {m: frame[frame.model == m].groupby("sample_index")["acc"].mean() for m in ("big", "small")}
    assert row.n_pairs == 24  # items, not 96 samples
    assert row.mean_diff == pytest.approx((means["big"] - means["small"]).mean())
    assert row.stderr == pytest.approx((means["big"] - means["small"]).std(ddof=1) / math.sqrt(24))
    fig = result.compare()
    assert fig.data and any("big" in str(t.name) for t in fig.data)
    assert "epochs: 4 (n counts items)" in result.summary() and "<b>epochs</b> 4" in result._repr_html_()
    assert "epochs" not in _result().summary()
