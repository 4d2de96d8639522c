"""evalnb.plots on a run with prompt variants: every figure keys by candidate, "model · variant".

A run of two models × two variants (helpers.variant_kit, a LocalModelServer that reads the
prompt) has four candidates; keyed by model alone the metrics frame has two rows per key (a
ValueError) and the samples merge two candidates into one trace. Runs without variants draw as
before (tests/plots/test_plots.py).
"""

from __future__ import annotations

import pytest
from helpers.variant_kit import DEFINED, reads_prompt, sentiment_manifest

import evalnb
from evalnb import Model, plots
from evalnb.testing import LocalModelServer

CANDIDATES = {"strong · plain", "strong · defined", "weak · plain", "weak · defined"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One variants run and a plain baseline run (for diff), on a real local server."""
    root = tmp_path_factory.mktemp("variant_plots")
    server = LocalModelServer(reads_prompt).start()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("EVALNB_HOME", str(root / "home"))
            suite = evalnb.Suite.from_dict(sentiment_manifest(root / "data"), base_dir=root / "data")
            models = [Model("strong", base_url=server.base_url, api="chat"), Model("weak", base_url=server.base_url)]
            run = evalnb.run(suite, models, variants={"plain": {}, "defined": {"prompt_template": DEFINED}},
                             progress=False)
            baseline = evalnb.run(suite, models, progress=False)
            yield run, baseline
    finally:
        server.stop()


def _names(fig) -> set[str]:
    return {t.name for t in fig.data}


def _bar_means(fig) -> dict[str, float]:
    return {t.name: t.x[0] for t in fig.data}


def test_metric_by_model_draws_one_bar_per_candidate(runs):
    run, _ = runs
    fig = plots.metric_by_model(run.metrics)
    assert _names(fig) == CANDIDATES
    means = _bar_means(fig)
    assert means["strong · plain"] == pytest.approx(20 / 30)
    assert means["strong · defined"] == pytest.approx(1.0)
    assert means["weak · defined"] == pytest.approx(29 / 30)


def test_per_task_draws_one_bar_per_candidate(runs):
    run, _ = runs
    fig = plots.per_task(run.metrics)
    assert _names(fig) == CANDIDATES
    assert _bar_means(fig)["strong · defined"] == pytest.approx(1.0)


def test_compare_on_the_metrics_frame_matches_the_runs_compare(runs):
    run, _ = runs
    fig = plots.compare(run.metrics)
    assert _names(fig) == _names(run.compare()) == CANDIDATES
    # a model label picks all of its variants; a candidate picks one
    assert _names(plots.compare(run.metrics, models=["weak"])) == {"weak · plain", "weak · defined"}
    assert _names(plots.compare(run.metrics, models="weak · defined")) == {"weak · defined"}


@pytest.mark.parametrize("draw", [plots.latency_vs_score, plots.tokens_vs_score])
def test_cost_against_score_draws_one_point_per_candidate(runs, draw):
    run, _ = runs
    fig = draw(run.samples, run.scores)
    assert _names(fig) == CANDIDATES
    score = {t.name: t.y[0] for t in fig.data}
    assert score["strong · plain"] == pytest.approx(20 / 30)
    assert score["strong · defined"] == pytest.approx(1.0)


def test_extraction_failures_counts_each_candidate(runs):
    run, _ = runs
    fig = plots.extraction_failures(run.samples)
    assert set(fig.data[0].y) == CANDIDATES
    assert "of 30 samples" in fig.data[0].hovertext[0]  # one candidate's items, not two merged


def test_diff_forest_draws_one_row_per_candidate(runs):
    run, baseline = runs
    fig = plots.diff_forest(run.diff(baseline))
    assert _names(fig) == CANDIDATES
    rows = [y for t in fig.data for y in t.y]
    assert len(rows) == len(set(rows)) == 4
    change = {t.name: t.x[0] for t in fig.data}
    assert change["strong · defined"] == pytest.approx(10 / 30)
    assert change["strong · plain"] == pytest.approx(0.0)


def test_paired_forest_labels_each_models_pair_of_variants(runs):
    run, _ = runs
    table = run.paired("defined", "plain")
    fig = plots.paired_forest(table)
    labels = list(fig.data[0].y)
    assert len(labels) == len(set(labels)) == len(table)
    assert any("strong · defined − strong · plain" in label for label in labels)
    assert any("weak · defined − weak · plain" in label for label in labels)
    both = plots.paired_forest(run.paired_all())
    every = [y for t in both.data for y in t.y]
    assert len(every) == len(set(every)) == len(run.paired_all())


def test_a_run_without_variants_keeps_model_names(runs):
    _, baseline = runs
    assert _names(plots.metric_by_model(baseline.metrics)) == {"strong", "weak"}
    assert _names(plots.latency_vs_score(baseline.samples, baseline.scores)) == {"strong", "weak"}
