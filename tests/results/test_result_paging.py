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


class CountingStore(Store):
    """A real store that counts the sample rows its one read path hands out (and which fields)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.rows_read = 0
        self.fields_read: set[str] = set()

    def column_pages(self, run_id, fields=None, **options):
        from evalnb.store import SAMPLE_FIELDS

        fields = list(SAMPLE_FIELDS if fields is None else fields)
        self.fields_read.update(fields)
        for page in super().column_pages(run_id, fields, **options):
            self.rows_read += len(page[fields[0]])
            yield page


def test_samples_page_seeks_to_its_rows_instead_of_reading_the_pages_before(stored):
    store = CountingStore()
    result = RunResult(store, stored.run_id)
    whole = RunResult(Store(), stored.run_id).samples  # 2 tasks x 2 models x (90 | 40) items x 2 epochs = 520
    assert len(whole) == 520
    result.metrics  # noqa: B018 - reads the keys once (the lean frame)
    for page, size in ((4, 100), (1, 170), (5, 90), (0, 520), (3, 130)):  # pages across (task, model) boundaries
        store.rows_read = 0
        got = result.samples_page(page, page_size=size)
        pd.testing.assert_frame_equal(got, whole.iloc[page * size:(page + 1) * size].reset_index(drop=True))
        assert store.rows_read == len(got)  # only the page's own rows came out of the store
    assert "_frame" not in result.__dict__


def test_costs_compare_and_judge_agreement_do_not_build_the_samples_frame(stored):
    store = CountingStore()
    lean = RunResult(store, stored.run_id)
    costs = lean.costs
    figure = lean.compare()
    labels = pd.DataFrame({"task_id": "alpha", "model": "good", "sample_index": range(10), "label": 1.0})
    agreement = lean.judge_agreement(labels, metric="score")
    assert "_frame" not in lean.__dict__ and "prompt" not in store.fields_read
    full = RunResult(Store(), stored.run_id)
    full.samples  # noqa: B018 - the frame built first: costs read from it
    pd.testing.assert_frame_equal(costs, full.costs)
    pd.testing.assert_frame_equal(agreement, full.judge_agreement(labels, metric="score"))
    assert figure.layout.title.text.startswith("Model comparison")
    assert agreement.iloc[0]["n"] == 10 and agreement.iloc[0]["accuracy"] == 1.0  # "good" answers every item


def test_metrics_reads_no_dataset_row_when_the_store_records_missing_fields(make_suite, model_server):
    from evalnb.store import SAMPLE_FIELDS

    data = [{"q": r["q"], **({"a": r["a"]} if i % 4 else {})} for i, r in enumerate(rows(20))]  # 5 lack "a"
    suite = make_suite({"t": data})
    server = model_server()
    run = evalnb.run(suite, [Model("good", base_url=server.base_url, api="chat")], progress=False)
    store = CountingStore()
    table = RunResult(store, run.run_id).metrics
    assert table["n_missing_field"].tolist() == [5]
    # the flag recorded per sample at render time is read; rows are decoded only for a store without it
    assert ("dataset_row" in store.fields_read) == ("missing_field" not in SAMPLE_FIELDS)
