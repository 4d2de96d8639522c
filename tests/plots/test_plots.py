"""evalnb.plots: the figure objects carry the input numbers, stable colours and fixed layout.

Frames come from test_comparison._fixtures (3 models x 2 tasks x 50 items, seeded).
"""

from __future__ import annotations

import math
import subprocess
import sys

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from helpers.comparison_kit import MODELS, N_ITEMS, TASKS, A, B, frames_fixture as _fixtures

from evalnb import plots, stats
from evalnb.results.comparison import ALL_TASKS, agreement, paired


@pytest.fixture(scope="module")
def frames() -> dict[str, pd.DataFrame]:
    return _fixtures()


def _legend(fig: go.Figure) -> list[str]:
    return [t.name for t in fig.data if t.showlegend is not False and t.type != "heatmap"]


def _metric_row(metrics: pd.DataFrame, task: str, model: str, metric: str) -> pd.Series:
    part = metrics[(metrics.task_id == task) & (metrics.model == model)
                   & (metrics.metric == metric)]
    assert len(part) == 1
    return part.iloc[0]


def _check_common_layout(fig: go.Figure) -> None:
    """Title, axis titles, template, legend and hover text: what every figure must have."""
    assert fig.layout.title.text
    assert fig.layout.template == pio.templates["plotly_white"]
    assert fig.layout.showlegend is True and _legend(fig)
    axes = [fig.layout[k] for k in fig.layout if k.startswith(("xaxis", "yaxis"))]
    shown = [a for a in axes if a.showticklabels is not False]  # shared axes show ticks once
    assert shown and all(axis.title.text for axis in shown), "every axis has a title"
    for trace in fig.data:
        hover = trace.hovertext if trace.type != "heatmap" else trace.text
        assert hover is not None and all(hover), f"trace {trace.name} lacks hover text"
    assert fig.layout.height >= 300


# ------------------------------------------------------------------ import cost


def test_import_does_not_load_plotly_or_pandas():
    code = ("import sys, evalnb.plots, evalnb.results.comparison; "
            "print(sorted(m for m in ('plotly', 'pandas', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------ colours


def test_model_colors_are_keyed_by_sorted_names():
    assert plots.model_colors(["b", "a", "c", "a"]) == plots.model_colors(["c", "b", "a"])
    colors = plots.model_colors(["b", "a"])
    assert colors == {"a": plots.PALETTE[0], "b": plots.PALETTE[1]}
    many = plots.model_colors([f"m{i:02d}" for i in range(21)])
    assert len(set(list(many.values())[:20])) == 20  # 20 distinct colours for a full run
    assert many["m20"] == plots.PALETTE[0]  # then the palette cycles


def test_each_model_keeps_its_colour_in_every_figure(frames):
    m, s, sa = frames["metrics"], frames["scores"], frames["samples"]
    expected = plots.model_colors(MODELS)
    figures = [
        plots.metric_by_model(m), plots.metric_by_model(m, task_id="qa"), plots.per_task(m),
        plots.compare(m), plots.compare(m, models=["gamma", MODELS[1]]),
        plots.latency_vs_score(sa, s), plots.tokens_vs_score(sa, s),
    ]
    for fig in figures:
        for trace in fig.data:
            assert trace.marker.color == expected[trace.name], (fig.layout.title.text, trace.name)
    # two models only: "only <model>" bars wear the model's colour too
    view = plots.agreement_view(agreement(s, sa, [A, B]))
    bars = {t.name: t.marker.color for t in view.data if t.type == "bar"}
    assert bars[f"only {A} scored 1"] == expected[A]
    assert bars[f"only {B} scored 1"] == expected[B]


def test_explicit_colors_override_the_palette(frames):
    fig = plots.metric_by_model(frames["metrics"], colors={"alpha": "#000000"})
    colors = {t.name: t.marker.color for t in fig.data}
    assert colors["alpha"] == "#000000"
    assert colors["gamma"] == plots.model_colors(MODELS)["gamma"]


# ------------------------------------------------------------------ metric by model


def test_metric_by_model_several_tasks_groups_bars_per_task(frames):
    metrics = frames["metrics"]
    fig = plots.metric_by_model(metrics)
    _check_common_layout(fig)
    assert len(fig.data) == len(MODELS)
    assert _legend(fig) == sorted(MODELS)
    assert fig.layout.barmode == "group"
    assert list(fig.layout.yaxis.categoryarray) == list(TASKS)
    for trace in fig.data:
        assert trace.orientation == "h" and list(trace.y) == list(TASKS)
        rows = [_metric_row(metrics, t, trace.name, "exact_match") for t in TASKS]
        assert list(trace.x) == pytest.approx([r["mean"] for r in rows])
        assert list(trace.error_x.array) == pytest.approx([r.ci_high - r["mean"] for r in rows])
        assert list(trace.error_x.arrayminus) == pytest.approx([r["mean"] - r.ci_low
                                                                for r in rows])
        assert trace.error_x.symmetric is False
    assert "exact_match" in fig.layout.xaxis.title.text
    assert "higher is better" in fig.layout.xaxis.title.text


def test_metric_by_model_one_task_puts_models_on_the_axis(frames):
    metrics = frames["metrics"]
    fig = plots.metric_by_model(metrics, task_id="arith", metric="f1")
    _check_common_layout(fig)
    assert [list(t.y) for t in fig.data] == [[m] for m in sorted(MODELS)]
    for trace in fig.data:
        assert trace.x[0] == pytest.approx(_metric_row(metrics, "arith", trace.name, "f1")["mean"])
    assert "arith" in fig.layout.title.text and "f1" in fig.layout.title.text
    assert fig.layout.yaxis.title.text == "model"
    # room for the longest model name on the left
    assert fig.layout.margin.l >= 7 * len(MODELS[1])


def test_metric_by_model_task_level_metric_has_no_error_bars(frames):
    fig = plots.metric_by_model(frames["metrics"], metric="corpus_bleu")
    for trace in fig.data:
        assert list(trace.error_x.array) == [None, None]
        assert all("task-level metric" in h for h in trace.hovertext)
    assert [t.x for t in fig.data] == [(20.0, 20.0), (25.0, 25.0), (30.0, 30.0)]


def test_metric_by_model_skips_metrics_without_a_mean(frames):
    metrics = frames["metrics"].copy()
    metrics.loc[metrics.metric == "exact_match", ["mean", "ci_low", "ci_high"]] = math.nan
    fig = plots.metric_by_model(metrics)  # first metric with a mean: f1
    assert "f1" in fig.layout.title.text
    with pytest.raises(ValueError, match="no mean"):
        plots.metric_by_model(metrics, metric="exact_match")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"metric": "bleu"}, r"unknown metric 'bleu' in the metrics frame; available: "
                             r"'corpus_bleu', 'exact_match', 'f1'"),
        ({"task_id": "math"}, r"unknown task 'math'; available: 'arith', 'qa'"),
    ],
)
def test_metric_by_model_errors(frames, kwargs, message):
    with pytest.raises(ValueError, match=message):
        plots.metric_by_model(frames["metrics"], **kwargs)


def test_metric_figures_reject_bad_frames(frames):
    with pytest.raises(ValueError, match="missing column.*ci_high"):
        plots.metric_by_model(frames["metrics"].drop(columns=["ci_high"]))
    with pytest.raises(ValueError, match="empty"):
        plots.compare(frames["metrics"].head(0))
    with pytest.raises(TypeError, match="DataFrame"):
        plots.per_task({"task_id": []})


def test_per_task_has_a_panel_per_task_and_one_legend_entry_per_model(frames):
    metrics = frames["metrics"]
    fig = plots.per_task(metrics)
    _check_common_layout(fig)
    assert len(fig.data) == len(TASKS) * len(MODELS)
    assert _legend(fig) == sorted(MODELS)
    assert [a.text for a in fig.layout.annotations] == [f"{t} — exact_match" for t in TASKS]
    for trace in fig.data:
        task = TASKS[0] if trace.xaxis == "x" else TASKS[1]
        assert trace.x[0] == pytest.approx(
            _metric_row(metrics, task, trace.name, "exact_match")["mean"])
    one = plots.per_task(metrics[metrics.task_id == "qa"])
    assert fig.layout.height > one.layout.height  # height follows the number of rows


def test_compare_is_metric_by_model_with_cis(frames):
    m = frames["metrics"]
    fig = plots.compare(m)
    _check_common_layout(fig)
    assert fig.layout.title.text.startswith("Model comparison")
    base = plots.metric_by_model(m)
    assert [t.x for t in fig.data] == [t.x for t in base.data]
    assert [t.error_x.array for t in fig.data] == [t.error_x.array for t in base.data]
    sub = plots.compare(m, models=["gamma", "alpha"])
    assert _legend(sub) == ["alpha", "gamma"]
    with pytest.raises(ValueError, match=r"unknown model 'delta'; available: 'alpha'"):
        plots.compare(m, models=["delta"])


def test_compare_uses_a_panel_per_task_when_metrics_differ(frames):
    m = frames["metrics"]
    mixed = pd.concat([m[m.task_id == "arith"],
                       m[(m.task_id == "qa") & (m.metric == "f1")]])  # qa's first metric: f1
    fig = plots.compare(mixed)
    assert [a.text for a in fig.layout.annotations] == ["arith — exact_match", "qa — f1"]
    assert len(fig.data) == len(TASKS) * len(MODELS)


def test_height_grows_with_rows(frames):
    m = frames["metrics"]
    one = plots.metric_by_model(m[m.model == "alpha"], task_id="qa")
    three = plots.metric_by_model(m, task_id="qa")
    both_tasks = plots.metric_by_model(m)
    assert one.layout.height == 300  # the floor
    assert three.layout.height < both_tasks.layout.height
    many = pd.concat([m.assign(model=m.model + f"-v{i}") for i in range(7)])  # 21 models
    crowded = plots.metric_by_model(many)
    assert crowded.layout.height > 2 * both_tasks.layout.height
    assert crowded.layout.margin.b > both_tasks.layout.margin.b  # legend rows under the plot


# ------------------------------------------------------------------ paired forest


def test_paired_forest_draws_the_paired_table(frames):
    table = paired(frames["scores"], A, B)
    fig = plots.paired_forest(table)
    _check_common_layout(fig)
    per_task, pooled = fig.data
    assert (per_task.name, pooled.name) == ("per task", "all tasks (pooled)")
    tasks = table[table.task_id != ALL_TASKS]
    assert list(per_task.x) == pytest.approx(list(tasks.mean_diff))
    assert list(per_task.error_x.array) == pytest.approx(list(tasks.ci_high - tasks.mean_diff))
    assert list(per_task.error_x.arrayminus) == pytest.approx(list(tasks.mean_diff
                                                                   - tasks.ci_low))
    assert pooled.x[0] == pytest.approx(table.iloc[-1].mean_diff)
    assert pooled.marker.size > per_task.marker.size and pooled.marker.symbol == "diamond"
    assert list(per_task.text) == [f"McNemar p={p:.3g}" for p in tasks.mcnemar_p]
    order = list(fig.layout.yaxis.categoryarray)
    assert order[-1].startswith("<b>all tasks</b>") and order[0].startswith("arith (n=")
    zero = [s for s in fig.layout.shapes if s.type == "line"]
    assert len(zero) == 1 and zero[0].x0 == zero[0].x1 == 0
    assert f"{A} − {B}" in fig.layout.title.text


def test_paired_forest_without_mcnemar_or_pairs(frames):
    scores = frames["scores"].copy()
    scores.loc[(scores.task_id == "qa") & (scores.model == B), "sample_index"] += 1000
    table = paired(scores, A, B, metric="f1")
    fig = plots.paired_forest(table)
    assert all(t == "" for trace in fig.data for t in trace.text)  # f1: no McNemar
    notes = [a.text for a in fig.layout.annotations]
    assert notes == ["no paired items"]
    with pytest.raises(ValueError, match="missing column"):
        plots.paired_forest(table.drop(columns=["ci_low"]))
    with pytest.raises(ValueError, match="empty"):
        plots.paired_forest(table.head(0))


# ------------------------------------------------------------------ agreement view


def test_agreement_view_two_models_counts_flip_kinds(frames):
    table = agreement(frames["scores"], frames["samples"], [A, B])
    fig = plots.agreement_view(table)
    _check_common_layout(fig)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in bars] == ["both scored 1", f"only {A} scored 1",
                                      f"only {B} scored 1", "both scored 0", "not scored"]
    assert [sum(values) for values in zip(*(t.x for t in bars), strict=True)] == [N_ITEMS] * 2
    pairs = paired(frames["scores"], A, B).set_index("task_id")
    assert list(bars[1].x) == [pairs.loc[t].n10 for t in TASKS]
    assert list(bars[2].x) == [pairs.loc[t].n01 for t in TASKS]
    (heat,) = [t for t in fig.data if t.type == "heatmap"]
    n_disagree = int((table.agree == False).sum())  # noqa: E712
    assert len(heat.z) == n_disagree and list(heat.x) == [A, B]
    assert all(sorted(row) == [0.0, 1.0] for row in heat.z)
    # items that flip the same way sit together, within each task
    first_rows = [tuple(row) for row in heat.z]
    arith = [r for r, y in zip(first_rows, heat.y, strict=True) if y.startswith("arith")]
    assert arith == sorted(arith, reverse=True)


def test_agreement_view_three_models_and_item_limit(frames):
    table = agreement(frames["scores"], frames["samples"], list(MODELS))
    fig = plots.agreement_view(table, max_items=10)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in bars] == ["all agree", "disagree", "not scored"]
    (heat,) = [t for t in fig.data if t.type == "heatmap"]
    assert len(heat.y) == 10 and list(heat.x) == list(MODELS)
    n_disagree = int((table.agree == False).sum())  # noqa: E712
    assert f"top 10 of {n_disagree}" in " ".join(a.text for a in fig.layout.annotations)
    spreads = [max(r) - min(r) for r in heat.z]
    assert spreads == sorted(spreads, reverse=True)
    with pytest.raises(ValueError, match="max_items"):
        plots.agreement_view(table, max_items=0)


def test_agreement_view_when_all_agree(frames):
    table = agreement(frames["scores"], frames["samples"], [A, B])
    table[f"value:{B}"] = table[f"value:{A}"]
    table["agree"] = table["agree"].where(table["agree"].isna(), True)
    table["flip"] = table[f"value:{A}"].map({1.0: "both", 0.0: "neither"})
    fig = plots.agreement_view(table)
    assert not [t for t in fig.data if t.type == "heatmap"]
    assert "agree on every item" in fig.layout.annotations[-1].text
    with pytest.raises(ValueError, match="two or more models"):
        plots.agreement_view(table.drop(columns=[f"value:{B}"]))


# ------------------------------------------------------------------ samples figures


def test_extraction_failures_shares(frames):
    samples = frames["samples"]
    fig = plots.extraction_failures(samples)
    _check_common_layout(fig)
    assert len(fig.data) == 2 * len(TASKS)
    assert _legend(fig) == ["failed (error)", "no extracted output"]
    for k, task in enumerate(TASKS):
        failed, unextracted = fig.data[2 * k], fig.data[2 * k + 1]
        assert list(failed.y) == sorted(MODELS)
        for i, model in enumerate(sorted(MODELS)):
            part = samples[(samples.task_id == task) & (samples.model == model)]
            n_failed = int((part.status == "failed").sum())
            n_none = int(((part.status == "completed") & part.extracted_output.isna()).sum())
            assert failed.x[i] == pytest.approx(n_failed / len(part))
            assert unextracted.x[i] == pytest.approx(n_none / len(part))
            assert f"{n_none} of {len(part) - n_failed} completed" in unextracted.hovertext[i]
    assert sum(sum(t.x) for t in fig.data) > 0
    assert fig.layout.barmode == "stack"


def test_extraction_failures_errors(frames):
    with pytest.raises(ValueError, match="missing column.*extracted_output"):
        plots.extraction_failures(frames["samples"].drop(columns=["extracted_output"]))
    with pytest.raises(ValueError, match="empty"):
        plots.extraction_failures(frames["samples"].head(0))


@pytest.mark.parametrize(("figure", "column"), [(plots.latency_vs_score, "latency_s"),
                                                (plots.tokens_vs_score, "output_tokens")])
def test_cost_vs_score_one_marker_per_model_and_task(frames, figure, column):
    samples, scores = frames["samples"], frames["scores"]
    fig = figure(samples, scores)
    _check_common_layout(fig)
    assert len(fig.data) == len(MODELS) * len(TASKS)
    assert _legend(fig) == sorted(MODELS)
    for trace in fig.data:
        task = TASKS[0] if trace.xaxis == "x" else TASKS[1]
        done = samples[(samples.task_id == task) & (samples.model == trace.name)
                       & (samples.status == "completed")]
        values = scores[(scores.task_id == task) & (scores.model == trace.name)
                        & (scores.metric == "exact_match")].value
        expected = stats.summarize(values.tolist())
        assert trace.x == pytest.approx((done[column].mean(),))
        assert trace.y == pytest.approx((expected.mean,))
        assert trace.error_y.array[0] == pytest.approx(expected.ci_high - expected.mean)
        assert trace.error_x.array[0] > 0
    gamma = [t for t in fig.data if t.name == "gamma" and t.xaxis == "x"][0]
    alpha = [t for t in fig.data if t.name == "alpha" and t.xaxis == "x"][0]
    assert gamma.x[0] > alpha.x[0]  # gamma is the slow, verbose one


def test_cost_vs_score_errors(frames):
    samples = frames["samples"].assign(output_tokens=math.nan)
    with pytest.raises(ValueError, match="no completed sample has a output_tokens value"):
        plots.tokens_vs_score(samples, frames["scores"])
    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        plots.latency_vs_score(frames["samples"], frames["scores"], metric="bleu")
    fig = plots.latency_vs_score(frames["samples"], frames["scores"], metric="f1")
    assert "f1" in fig.layout.annotations[0].text


# ------------------------------------------------------------------ determinism


def _all_figures(f: dict[str, pd.DataFrame]) -> dict[str, go.Figure]:
    m, s, sa = f["metrics"], f["scores"], f["samples"]
    return {
        "metric_by_model": plots.metric_by_model(m, metric="exact_match"),
        "per_task": plots.per_task(m, metric="f1"),
        "compare": plots.compare(m, metric="exact_match"),
        "paired_forest": plots.paired_forest(paired(s, A, B, metric="exact_match")),
        "agreement_view": plots.agreement_view(agreement(s, sa, list(MODELS),
                                                         metric="exact_match")),
        "extraction_failures": plots.extraction_failures(sa),
        "latency_vs_score": plots.latency_vs_score(sa, s, metric="exact_match"),
        "tokens_vs_score": plots.tokens_vs_score(sa, s, metric="exact_match"),
    }


def test_figures_are_deterministic_and_ignore_row_order(frames):
    first = {k: fig.to_json() for k, fig in _all_figures(frames).items()}
    again = {k: fig.to_json() for k, fig in _all_figures(frames).items()}
    assert first == again
    shuffled = {k: df.sample(frac=1.0, random_state=7) for k, df in frames.items()}
    assert {k: fig.to_json() for k, fig in _all_figures(shuffled).items()} == first
    assert all('"uid"' not in text for text in first.values())
