"""RunResult over a big run: metrics and summaries from the store's score columns, samples in pages."""

from __future__ import annotations

import pandas as pd
import pytest

import evalnb
from evalnb import Model
from evalnb.results.run_result import RunResult
from evalnb.store import Store
from helpers.runner_kit import rows

pytestmark = pytest.mark.usefixtures("evalnb_home")


@pytest.fixture
def stored(make_suite, model_server):
    """Two tasks (run order not alphabetical), two models, epochs=2, a clustering field."""
    data = [{**r, "link": i // 3} for i, r in enumerate(rows(90))]
    suite = make_suite({"zeta": data, "alpha": [{**r, "link": i // 2} for i, r in enumerate(rows(40))]})
    server = model_server()
    models = [Model("good", base_url=server.base_url, api="chat"), Model("b", base_url=server.base_url, api="chat")]
    return evalnb.run(suite, models, progress=False, epochs=2)


def test_metrics_and_summaries_need_no_samples_frame_and_match_it(stored):
    store = Store()
    lean = RunResult(store, stored.run_id)
    metrics = lean.metrics
    clustered = lean.summarize()
    scores = lean.scores
    paired = lean.paired("good", "b")
    assert "_frame" not in lean.__dict__  # nothing above built the samples frame
    full = RunResult.from_data(store.samples(stored.run_id), run=store.get_run(stored.run_id),
                               manifest=store.get_suite(stored.run["suite_version"]))
    pd.testing.assert_frame_equal(metrics, full.metrics)
    pd.testing.assert_frame_equal(clustered, full.summarize())
    pd.testing.assert_frame_equal(scores, full.scores)
    pd.testing.assert_frame_equal(paired, full.paired("good", "b"))
    assert lean.epochs == 2 and lean.task_ids == ["zeta", "alpha"] and lean.models == ["good", "b"]
    assert metrics.set_index(["task_id", "model"]).loc[("zeta", "b"), "mean"] == pytest.approx(72 / 90)


def test_clustered_summaries_stream_the_rows(stored):
    lean = RunResult(Store(), stored.run_id)
    table = lean.summarize(cluster_by="link")
    assert "_frame" not in lean.__dict__
    assert table.groupby("task_id")["n_clusters"].unique().map(list).to_dict() == {"alpha": [20], "zeta": [30]}
    store = Store()
    full = RunResult.from_data(store.samples(stored.run_id), run=store.get_run(stored.run_id),
                               manifest=store.get_suite(stored.run["suite_version"]))
    pd.testing.assert_frame_equal(table, full.summarize(cluster_by="link"))
    with pytest.raises(ValueError, match="task 'alpha', row 0: cluster_by field 'q.x' not found"):
        lean.summarize(cluster_by="q.x")


def test_iter_samples_and_samples_page_give_the_samples_frame_in_pieces(stored):
    result = RunResult(Store(), stored.run_id)
    pages = list(result.iter_samples(batch_size=70))
    assert max(len(p) for p in pages) <= 70
    whole = pd.concat(pages, ignore_index=True)
    pd.testing.assert_frame_equal(whole, result.samples)
    page = result.samples_page(2, page_size=100)
    pd.testing.assert_frame_equal(page, result.samples.iloc[200:300].reset_index(drop=True))
    assert len(result.samples_page(100, page_size=100)) == 0
    with pytest.raises(ValueError, match="page"):
        result.samples_page(-1)
