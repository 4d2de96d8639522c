"""Issue 22 item 4: task_id= on summarize/diff/paired/paired_all, and cluster_by on a multi-task run.

A two-task suite run against LocalModelServer: only ``sentiment``'s rows have ``product``;
``arith``'s do not. Clustering applies to ``sentiment`` and says it left ``arith`` alone.
"""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

import evalnb
from evalnb import Model
from evalnb.results.run_result import RunResult
from evalnb.store import Store
from helpers.runner_kit import rows

pytestmark = pytest.mark.usefixtures("evalnb_home")


@pytest.fixture
def runs(make_suite, model_server):
    """(this run, a baseline run) of the same two-task suite; two models each."""
    sentiment = [{**r, "product": f"p{i // 4}"} for i, r in enumerate(rows(40))]  # 10 products
    suite = make_suite({"sentiment": sentiment, "arith": rows(30, tag="x")})
    server = model_server()
    models = [Model("good", base_url=server.base_url, api="chat"), Model("b", base_url=server.base_url, api="chat")]
    before = evalnb.run(suite, models, progress=False)
    after = evalnb.run(suite, models, progress=False, name="again")
    return RunResult(Store(), after.run_id), RunResult(Store(), before.run_id)


def test_paired_of_one_task_clusters_it_without_a_word_about_the_other(runs):
    result, _ = runs
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to say: the task asked for has the field
        table = result.paired("good", "b", task_id="sentiment", cluster_by="product")
    assert list(table["task_id"]) == ["sentiment"]
    row = table.iloc[0]
    assert row["n_pairs"] == 40 and row["n_clusters"] == 10 and row["note"] is None
    plain = result.paired("good", "b", task_id="sentiment").iloc[0]
    assert row["mean_diff"] == pytest.approx(plain["mean_diff"]) == pytest.approx(8 / 40)  # b misses n % 5 == 4
    assert row["stderr"] != pytest.approx(plain["stderr"])  # CR1 over 10 products, not the item stderr


def test_cluster_by_on_both_tasks_clusters_one_and_names_the_other(runs):
    result, _ = runs
    with pytest.warns(UserWarning, match=r"cluster_by='product' left task\(s\) 'arith' unclustered.*"
                                         r"task 'arith', row 0: cluster_by field 'product' not found"):
        table = result.summarize(cluster_by="product")
    clusters = table.set_index(["task_id", "model"])["n_clusters"]
    assert clusters.loc[("sentiment", "good")] == 10
    assert clusters.loc[("arith", "good")] is pd.NA
    assert set(table.attrs["unclustered"]) == {"arith"}
    plain = result.metrics.set_index(["task_id", "model", "metric"])
    arith = table[table["task_id"] == "arith"].set_index(["task_id", "model", "metric"])
    pd.testing.assert_series_equal(arith["stderr"], plain.loc[arith.index, "stderr"])  # ordinary errors
    with pytest.warns(UserWarning, match="'arith' unclustered"):
        paired = result.paired("good", "b", cluster_by="product").set_index("task_id")
    assert paired.loc["arith", "note"].startswith("not clustered: task 'arith'")
    assert paired.loc["arith", "n_clusters"] is pd.NA and paired.loc["sentiment", "n_clusters"] == 10
    assert paired.loc["all tasks", "note"].startswith("not clustered")
    with pytest.warns(UserWarning, match="'arith' unclustered"):
        every = result.paired_all(cluster_by="product").set_index("task_id")
    assert every.loc["sentiment", "p_value"] == every.loc["sentiment", "p_value"]  # a number, not NaN
    assert every.loc["arith", "p_value"] == result.paired_all().set_index("task_id").loc["arith", "p_value"]


def test_task_id_filters_every_table(runs):
    result, baseline = runs
    assert list(result.summarize(task_id="arith")["task_id"].unique()) == ["arith"]
    assert set(result.summarize(task_id=["arith", "sentiment"])["task_id"]) == {"arith", "sentiment"}
    assert list(result.paired("good", "b", task_id=["arith"])["task_id"]) == ["arith"]
    assert set(result.paired_all(task_id="sentiment")["task_id"]) == {"sentiment"}
    diff = result.diff(baseline, task_id="sentiment", cluster_by="product")
    assert set(diff["task_id"]) == {"sentiment"} and (diff["n_clusters"] == 10).all()
    assert (diff["n_pairs"] == 40).all() and (diff["mean_diff"] == 0).all()  # the same answers twice
    with pytest.warns(UserWarning, match="'arith' unclustered"):
        both = result.diff(baseline, cluster_by="product").set_index(["task_id", "model"])
    assert both.loc[("arith", "good"), "n_clusters"] is pd.NA


def test_unknown_tasks_and_fields_are_clear_errors(runs):
    result, baseline = runs
    known = r"the run's tasks: 'sentiment', 'arith'"
    for call in (lambda: result.summarize(task_id="sentimnet"), lambda: result.paired("good", "b", task_id="nope"),
                 lambda: result.paired_all(task_id=["arith", "nope"]), lambda: result.diff(baseline, task_id="x")):
        with pytest.raises(ValueError, match=r"unknown task_id '\w+'; " + known):
            call()
    with pytest.raises(ValueError, match="task_id must be a task id or a list of them"):
        result.summarize(task_id=[])
    with pytest.raises(ValueError, match=r"task 'arith', row 0: cluster_by field 'product' not found"):
        result.paired("good", "b", task_id="arith", cluster_by="product")  # no chosen task has it
    with pytest.raises(ValueError, match=r"cluster_by field 'prodcut' not found"):
        result.summarize(cluster_by="prodcut")
