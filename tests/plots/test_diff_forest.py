"""plots.diff_forest: one point per (task, model) with its interval, counts and an mde band."""

from __future__ import annotations

import plotly.io as pio
import pytest
from helpers.comparison_kit import MODELS, frames_fixture

from evalnb import plots
from evalnb.results.diff import diff_scores


@pytest.fixture(scope="module")
def table():
    before, after = frames_fixture(seed=0)["scores"], frames_fixture(seed=1)["scores"]
    return diff_scores(after, before)


def test_diff_forest_draws_the_diff_table(table):
    em = table[table.metric == "exact_match"]
    fig = plots.diff_forest(em)
    assert [t.name for t in fig.data] == list(MODELS)  # a trace per model, in table order
    for trace in fig.data:
        rows = em[em.model == trace.name]
        assert list(trace.x) == pytest.approx(list(rows.mean_diff))
        assert list(trace.error_x.array) == pytest.approx(list(rows.ci_high - rows.mean_diff))
        assert list(trace.error_x.arrayminus) == pytest.approx(list(rows.mean_diff - rows.ci_low))
        assert list(trace.text) == [f"+{f} fixed / −{b} broken, p={p:.2g}"
                                    for f, b, p in zip(rows.n_fixed, rows.n_broken, rows.mcnemar_p)]
        assert all(label.endswith(f"(n={n})") for label, n in zip(trace.y, rows.n_pairs))
    bands = [s for s in fig.layout.shapes if s.type == "rect"]
    assert sorted(round(s.x1, 9) for s in bands) == sorted(round(m, 9) for m in em.mde)
    assert all(s.x0 == -s.x1 for s in bands)
    assert [s for s in fig.layout.shapes if s.type == "line"][0].x0 == 0
    assert "exact_match" in fig.layout.title.text
    assert pio.to_json(fig) == pio.to_json(plots.diff_forest(em))  # deterministic for nbval


def test_diff_forest_with_several_metrics_and_bad_input(table):
    fig = plots.diff_forest(table)
    labels = [label for trace in fig.data for label in trace.y]
    assert any("f1" in label for label in labels) and any("exact_match" in label for label in labels)
    assert all(t == "" or "p=" not in t for label, t in zip(fig.data[0].y, fig.data[0].text) if "f1" in label)
    with pytest.raises(ValueError, match="missing column"):
        plots.diff_forest(table.drop(columns=["mde"]))
    with pytest.raises(ValueError, match="empty"):
        plots.diff_forest(table.head(0))
