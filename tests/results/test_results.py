"""evalnb.results.run_result: RunResult frames, metric aggregation against hand-computed numbers, display.

One stored run: two models (zeta, alpha, in that run order) over four tasks given to the run
in a different order than the manifest's, with failed, unfinished and unscored samples, a
metric that clashes with a fixed column, a lower-is-better metric, an `aggregation: none`
metric, an undeclared score key, and batch-grader metrics (one replacing a sample metric, one
failing).
"""

from __future__ import annotations

import json
import math

import pandas as pd
import plotly.graph_objects as go
import pytest

from evalnb.results.comparison import paired as comparison_paired
from evalnb.results.run_result import SAMPLE_COLUMNS, RunResult, metric_specs
from evalnb.store import Store, UnknownRunError

Z = 1.959963984540054  # standard normal 97.5% quantile
T2 = 4.302652729911275  # Student t 97.5% quantile, 2 degrees of freedom

MANIFEST = {
    "tasks": [
        {"id": "qa", "grader": {"type": "python", "contract": "sample"},
         "metrics": [{"id": "accuracy"}, {"id": "f1"}, {"id": "latency_pen", "higher_is_better": False},
                     {"id": "status", "aggregation": "none"}]},
        {"id": "sum", "grader": {"type": "python", "metric_id": "rouge"}},
        {"id": "plain", "grader": {"type": "python"}},
        {"id": "agg", "grader": {"type": "python", "contract": "batch"}},
    ]
}


def s(task, model, i, status="completed", scores=None, **extra):
    return {"task_id": task, "model": model, "sample_index": i, "status": status, "prompt": f"{task} prompt {i}",
            "target": "A", "output_text": f"out {i}", "extracted_output": "A", "scores": scores or {},
            "usage": {"input_tokens": 10 + i, "output_tokens": 2}, "latency_s": 0.5, "response_id": f"r{i}", **extra}


SAMPLES = [
    # qa, zeta: accuracy 1, 0, 1, True (bool) -> 3/4; f1 on three of them; idx 4 failed; idx 5 not finished
    s("qa", "zeta", 0, scores={"accuracy": 1, "f1": 0.5, "latency_pen": 2.0, "status": 1, "debug": 7}),
    s("qa", "zeta", 1, scores={"accuracy": 0, "f1": 0.25, "latency_pen": 4.0, "status": 0}),
    s("qa", "zeta", 2, scores={"accuracy": 1, "f1": 1.0, "status": 1}),
    s("qa", "zeta", 3, scores={"accuracy": True, "f1": None}, usage={"prompt_tokens": 7, "completion_tokens": 3}),
    s("qa", "zeta", 4, status="failed", usage=None, output_text=None,
      error={"type": "ProviderError", "message": "HTTP 500"}),
    s("qa", "zeta", 5, status="scoring", scores={"accuracy": 1}),
    # qa, alpha: accuracy 0, 0, 1, 0; f1 0, .5, 1, 0 (replaced by the batch grader's 0.9)
    s("qa", "alpha", 0, scores={"accuracy": 0, "f1": 0.0}),
    s("qa", "alpha", 1, scores={"accuracy": False, "f1": 0.5}),
    s("qa", "alpha", 2, scores={"accuracy": 1, "f1": 1.0}),
    s("qa", "alpha", 3, scores={"accuracy": 0, "f1": 0.0}),
    # sum: rouge .2 and .4 for zeta; alpha has one value and one failure
    s("sum", "zeta", 0, scores={"rouge": 0.2}),
    s("sum", "zeta", 1, scores={"rouge": 0.4}),
    s("sum", "alpha", 0, scores={"rouge": 0.6}),
    s("sum", "alpha", 1, status="failed", error="timed out"),
    # plain: default metric "score", only zeta ran it
    s("plain", "zeta", 0, scores={"score": True}),
    s("plain", "zeta", 1, scores={"score": False}),
    # agg: batch grader; per-sample scores empty
    s("agg", "zeta", 0),
    s("agg", "zeta", 1),
    s("agg", "alpha", 0),
]


@pytest.fixture
def stored(tmp_path):
    store = Store(tmp_path / "evalnb.sqlite")
    run_id = store.create_run("v1", manifest=MANIFEST, models=[{"name": "zeta"}, {"name": "a-model", "label": "alpha"}],
                              task_ids=["sum", "qa", "plain", "agg"])
    store.write_samples(SAMPLES, run_id=run_id)
    store.write_task_metrics(run_id, "agg", "zeta", {"macro_f1": 0.4, "extra_batch": 2})
    store.write_task_metrics(run_id, "agg", "alpha", None, error="grade_batch raised ZeroDivisionError")
    store.write_task_metrics(run_id, "qa", "alpha", {"f1": 0.9})
    store.update_run(run_id, status="completed")
    yield store, run_id
    store.close()


@pytest.fixture
def result(stored):
    store, run_id = stored
    return RunResult(store, run_id)


def metric_row(result: RunResult, task: str, model: str, metric: str) -> dict:
    table = result.metrics
    rows = table[(table.task_id == task) & (table.model == model) & (table.metric == metric)]
    assert len(rows) == 1, rows
    return rows.iloc[0].to_dict()


# ------------------------------------------------------------------ metric specs


def test_metric_specs_read_the_manifest_dict():
    specs = metric_specs(MANIFEST)
    assert [m["id"] for m in specs["qa"]] == ["accuracy", "f1", "latency_pen", "status"]
    assert specs["qa"][2] == {"id": "latency_pen", "aggregation": "mean", "higher_is_better": False}
    assert specs["qa"][3]["aggregation"] == "none"
    assert specs["sum"] == [{"id": "rouge", "aggregation": "mean", "higher_is_better": True}]
    assert specs["plain"] == [{"id": "score", "aggregation": "mean", "higher_is_better": True}]
    assert specs["agg"] == []  # a batch grader reports its own metrics
    explicit = {"tasks": [{"id": "t", "grader": {"contract": "model_backed", "execution": "aggregate"}}]}
    assert metric_specs(explicit) == {"t": []}
    assert metric_specs(None) == {}


# ------------------------------------------------------------------ samples frame


def test_samples_frame_shape_columns_and_order(result):
    frame = result.samples
    assert len(frame) == len(SAMPLES)
    assert list(frame.columns) == [
        "task_id", "model", "sample_index", "epoch", "status", "prompt", "prompt_text", "target", "output_text",
        "extracted_output", "accuracy", "f1", "latency_pen", "score:status", "rouge", "score", "debug",
        "error", "log", "latency_s", "input_tokens", "output_tokens", "response_id", "judge", "dataset_row",
        "cost_usd", "judge_cost_usd", "cached",
    ]
    assert result.metric_columns["status"] == "score:status" and result.metric_columns["accuracy"] == "accuracy"
    # the run's task order and model order, then sample_index
    order = list(zip(frame.task_id, frame.model, frame.sample_index))
    assert order[:4] == [("sum", "zeta", 0), ("sum", "zeta", 1), ("sum", "alpha", 0), ("sum", "alpha", 1)]
    assert [t for t, _, _ in order[4:14]] == ["qa"] * 10 and order[-1] == ("agg", "alpha", 0)
    assert frame.task_id.unique().tolist() == ["sum", "qa", "plain", "agg"]


def test_samples_share_prompt_strings_between_models(stored):
    store, run_id = stored
    store.write_samples([s("plain", "alpha", 0, prompt="plain prompt 0")], run_id=run_id)
    frame = RunResult(store, run_id).samples.set_index(["task_id", "model", "sample_index"])
    prompts = frame["prompt"]
    assert prompts[("plain", "zeta", 0)] == "plain prompt 0"
    assert prompts[("plain", "zeta", 0)] is prompts[("plain", "alpha", 0)]


def test_samples_frame_values(result):
    frame = result.samples.set_index(["task_id", "model", "sample_index"])
    assert frame.loc[("qa", "zeta", 3), "accuracy"] == 1.0  # bool counts as 1
    assert math.isnan(frame.loc[("qa", "zeta", 3), "f1"])  # None: not scored
    assert math.isnan(frame.loc[("qa", "zeta", 4), "accuracy"])  # failed: no scores
    assert frame.loc[("qa", "zeta", 0), "score:status"] == 1.0 and frame.loc[("qa", "zeta", 0), "debug"] == 7.0
    assert frame.loc[("qa", "zeta", 4), "error"] == "ProviderError: HTTP 500"
    assert frame.loc[("sum", "alpha", 1), "error"] == "timed out"
    assert frame.loc[("qa", "zeta", 0), "error"] is None
    assert frame.loc[("qa", "zeta", 3), "input_tokens"] == 7 and frame.loc[("qa", "zeta", 3), "output_tokens"] == 3
    assert frame.loc[("qa", "zeta", 2), "input_tokens"] == 12
    assert frame.loc[("qa", "zeta", 4), "input_tokens"] is pd.NA
    assert str(result.samples["input_tokens"].dtype) == "Int64"
    assert result.samples["latency_s"].dtype == "float64" and result.samples["accuracy"].dtype == "float64"


# ------------------------------------------------------------------ metrics


def test_binary_metric_mean_stderr_and_wilson_interval(result):
    row = metric_row(result, "qa", "zeta", "accuracy")
    assert (row["n"], row["n_failed"]) == (4, 1)  # the unfinished sample does not count
    assert row["n_unscored"] == 1  # ... it is not scored: every sample is in n, n_failed or n_unscored
    assert row["mean"] == 0.75
    assert row["stderr"] == pytest.approx(0.25)  # sd 0.5 / sqrt(4)
    p, n = 0.75, 4
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(centre - half), pytest.approx(centre + half))
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(0.300642, abs=1e-6), pytest.approx(0.954413, abs=1e-6))
    assert row["higher_is_better"] is True and row["source"] == "samples" and row["error"] is None


def test_continuous_metric_uses_a_t_interval(result):
    row = metric_row(result, "qa", "zeta", "f1")
    values = [0.5, 0.25, 1.0]
    mean = sum(values) / 3
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / 2)
    assert row["n"] == 3 and row["mean"] == pytest.approx(mean)
    assert row["n_unscored"] == 2  # idx 3 returned f1 None, idx 5 was never graded
    assert row["stderr"] == pytest.approx(sd / math.sqrt(3))
    # mean -/+ t(2) * stderr = -0.365 / 1.532, clipped to [0, 1] because every f1 lies there
    assert mean - T2 * sd / math.sqrt(3) < 0 and mean + T2 * sd / math.sqrt(3) > 1
    assert (row["ci_low"], row["ci_high"]) == (0.0, 1.0)
    pen = metric_row(result, "qa", "zeta", "latency_pen")  # 2.0 and 4.0: not a [0, 1] score, no clipping
    assert (pen["n"], pen["mean"], pen["higher_is_better"]) == (2, 3.0, False)
    assert pen["stderr"] == pytest.approx(1.0)  # sd sqrt(2) / sqrt(2)
    assert pen["ci_low"] == pytest.approx(3.0 - 12.706204736174698)  # t(1) 97.5% quantile
    assert pen["ci_high"] == pytest.approx(3.0 + 12.706204736174698)


def test_aggregation_none_reports_only_n(result):
    row = metric_row(result, "qa", "zeta", "status")
    assert row["n"] == 3 and row["aggregation"] == "none"
    assert all(math.isnan(row[k]) for k in ("mean", "stderr", "ci_low", "ci_high"))


def test_single_value_and_missing_model(result):
    one = metric_row(result, "sum", "alpha", "rouge")
    assert (one["n"], one["n_failed"], one["mean"]) == (1, 1, 0.6)
    assert math.isnan(one["stderr"]) and math.isnan(one["ci_low"])  # no interval from one value
    missing = metric_row(result, "plain", "alpha", "score")  # alpha never ran the task
    assert (missing["n"], missing["n_failed"]) == (0, 0) and math.isnan(missing["mean"])
    plain = metric_row(result, "plain", "zeta", "score")
    assert (plain["n"], plain["mean"]) == (2, 0.5)


def test_batch_metrics_replace_sample_rows_and_carry_errors(result):
    f1 = metric_row(result, "qa", "alpha", "f1")
    assert (f1["mean"], f1["source"], f1["n"]) == (0.9, "batch", 4)
    assert math.isnan(f1["stderr"]) and math.isnan(f1["ci_low"])
    acc = metric_row(result, "qa", "alpha", "accuracy")  # untouched by the batch grader
    assert (acc["source"], acc["mean"], acc["n"]) == ("samples", 0.25, 4)
    zeta = result.metrics[(result.metrics.task_id == "agg") & (result.metrics.model == "zeta")]
    assert zeta.set_index("metric")["mean"].to_dict() == {"macro_f1": 0.4, "extra_batch": 2.0}
    failed = result.metrics[(result.metrics.task_id == "agg") & (result.metrics.model == "alpha")]
    assert failed["metric"].tolist() == ["macro_f1", "extra_batch"]  # what the grader gave other models
    assert set(failed["error"]) == {"grade_batch raised ZeroDivisionError"} and failed["mean"].isna().all()


def test_metrics_frame_shape_and_order(result):
    table = result.metrics
    assert list(table.columns) == ["task_id", "model", "metric", "n", "n_failed", "n_unscored", "n_not_run",
                                   "n_missing_field", "epochs", "mean", "stderr", "ci_low", "ci_high", "higher_is_better",
                                   "aggregation", "source", "error"]
    assert (table["epochs"] == 1).all()
    assert (table["n"] + table["n_failed"] + table["n_unscored"]).tolist() == [
        len([x for x in SAMPLES if (x["task_id"], x["model"]) == (t, m)]) for t, m in zip(table.task_id, table.model)
    ]
    keys = list(zip(table.task_id, table.model, table.metric))
    assert keys == [
        ("sum", "zeta", "rouge"), ("sum", "alpha", "rouge"),
        *[("qa", m, k) for m in ("zeta", "alpha") for k in ("accuracy", "f1", "latency_pen", "status")],
        ("plain", "zeta", "score"), ("plain", "alpha", "score"),
        ("agg", "zeta", "macro_f1"), ("agg", "zeta", "extra_batch"),
        ("agg", "alpha", "macro_f1"), ("agg", "alpha", "extra_batch"),
    ]
    assert "debug" not in set(table.metric)  # undeclared score keys are not aggregated
    assert table["n"].dtype == "int64" and table["higher_is_better"].dtype == "bool"


def test_scores_long_frame(result):
    scores = result.scores
    assert list(scores.columns) == ["task_id", "model", "sample_index", "metric", "value"]
    assert len(scores) == 10 * 5 + 4 * 1 + 2 * 1  # qa: 4 declared + debug; sum: rouge; plain: score; agg: none
    qa = scores[(scores.task_id == "qa") & (scores.model == "zeta") & (scores.metric == "accuracy")]
    assert dict(zip(qa.sample_index, qa.value))[3] == 1.0
    assert qa.set_index("sample_index")["value"][[4, 5]].isna().all()  # failed and unfinished: not scored
    assert scores.drop_duplicates(["task_id", "model", "sample_index", "metric"]).shape[0] == len(scores)


# ------------------------------------------------------------------ comparisons


def test_paired_differences_by_hand(result):
    table = result.paired("zeta", "alpha", task_id="qa", metric="accuracy")
    row = table.iloc[0].to_dict()
    # items 0-3 pair: zeta 1,0,1,1 vs alpha 0,0,1,0 -> diffs 1,0,0,1
    assert row["n_pairs"] == 4 and row["mean_diff"] == 0.5
    assert (row["mean_a"], row["mean_b"]) == (0.75, 0.25)
    assert row["stderr"] == pytest.approx(math.sqrt(1 / 3) / 2)
    assert (row["n10"], row["n01"]) == (2, 0) and row["mcnemar_p"] == pytest.approx(0.5)
    expected = comparison_paired(result.scores, "zeta", "alpha", task_id="qa", metric="accuracy")
    pd.testing.assert_frame_equal(table, expected)


def test_paired_rejects_unknown_models(result):
    with pytest.raises(ValueError, match="unknown model 'nobody'"):
        result.paired("zeta", "nobody")


def test_compare_builds_a_figure(result):
    figure = result.compare()
    assert figure.data and isinstance(figure, go.Figure)


# ------------------------------------------------------------------ display and export


def test_summary_and_repr(result):
    text = result.summary()
    assert text.startswith(f"RunResult {result.run_id}  status: completed")
    assert "models: zeta, alpha" in text
    assert "qa / accuracy\n  zeta: 0.750 [0.301, 0.954] n=4, 1 failed, 1 unscored\n  alpha: 0.250" in text
    assert "qa / latency_pen (lower is better)" in text
    assert "agg / macro_f1\n  zeta: 0.400 batch\n  alpha: batch, 1 unscored, error: grade_batch raised ZeroDivisionError" in text
    assert str(result) == text
    assert repr(result).startswith("<RunResult ") and "\n" not in repr(result)


def test_html_is_a_static_table(result):
    page = result._repr_html_()
    assert page.startswith("<div") and page.endswith("</div>")
    assert "<script" not in page.lower() and "<style" not in page.lower()
    assert result.run_id in page and "<th" in page and page.count("<tr>") == 1 + 8  # header + one per task x metric
    assert "<b>0.750</b>" in page  # zeta's accuracy beats alpha's
    assert "<b>0.250</b>" not in page
    assert "[0.301, 0.954] n=4, 1 failed, 1 unscored" in page
    assert "latency_pen ↓" in page and "accuracy ↑" in page
    assert "error: grade_batch raised ZeroDivisionError" in page


def test_html_escapes_labels_and_marks_ties_without_bold():
    samples = [
        {"task_id": "t<1>", "model": "<img src=x>", "sample_index": 0, "status": "completed", "scores": {"m": 1}},
        {"task_id": "t<1>", "model": "b&c", "sample_index": 0, "status": "completed", "scores": {"m": 1}},
    ]
    page = RunResult.from_data(samples)._repr_html_()
    assert "<img" not in page and "&lt;img src=x&gt;" in page and "b&amp;c" in page and "t&lt;1&gt;" in page
    assert "<b>1.000</b>" not in page  # a tie has no winner


def test_to_records_is_json_ready(result):
    for what in ("samples", "scores", "metrics"):
        records = result.to_records(what)
        json.dumps(records, allow_nan=False)
        assert len(records) == len(getattr(result, what))
    first = result.to_records("metrics")[0]
    assert first["task_id"] == "sum" and first["stderr"] == pytest.approx(0.1)  # rouge .2, .4: sd .1414 / sqrt(2)
    assert result.to_records("samples")[8]["input_tokens"] is None  # qa zeta 4, failed
    with pytest.raises(ValueError, match="'samples', 'scores' or 'metrics'"):
        result.to_records("runs")


# ------------------------------------------------------------------ construction


def test_run_record_properties(result):
    assert result.status == "completed" and result.run_id.startswith("eval_run_")
    assert result.models == ["zeta", "alpha"] and result.task_ids == ["sum", "qa", "plain", "agg"]
    assert result.run["counts"]["total"] == len(SAMPLES)


def test_open_by_path_and_default_store(stored, monkeypatch):
    store, run_id = stored
    assert RunResult(store.path, run_id).metrics.equals(RunResult(store, run_id).metrics)
    monkeypatch.setenv("EVALNB_HOME", str(store.path.parent))
    assert RunResult(None, run_id).status == "completed"
    with pytest.raises(UnknownRunError):
        RunResult(store, "eval_run_" + "f" * 32)


def test_refresh_sees_new_samples(stored):
    store, run_id = stored
    result = RunResult(store, run_id)
    assert metric_row(result, "plain", "alpha", "score")["n"] == 0
    store.write_samples([s("plain", "alpha", 0, scores={"score": 1})], run_id=run_id)
    assert metric_row(result, "plain", "alpha", "score")["n"] == 0  # a snapshot until refreshed
    assert metric_row(result.refresh(), "plain", "alpha", "score")["n"] == 1
    assert len(result.samples) == len(SAMPLES) + 1


def test_a_run_without_samples(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        run_id = store.create_run("v1", manifest=MANIFEST, models=[{"name": "m"}])
        result = RunResult(store, run_id)
        declared = ["accuracy", "f1", "latency_pen", "score:status", "rouge", "score"]  # columns exist regardless
        assert result.samples.empty and list(result.samples.columns) == [*SAMPLE_COLUMNS[:10], *declared, *SAMPLE_COLUMNS[10:]]
        assert result.scores.empty and list(result.scores.columns) == ["task_id", "model", "sample_index", "metric", "value"]
        table = result.metrics
        assert table["task_id"].tolist() == ["qa"] * 4 + ["sum", "plain"]  # manifest order; agg has no metrics yet
        assert (table["n"] == 0).all() and table["mean"].isna().all()
        assert "RunResult" in result.summary() and "<table" in result._repr_html_()


def test_from_data_without_a_manifest_treats_every_score_key_as_a_metric():
    samples = [
        {"task_id": "t", "model": "a", "sample_index": i, "status": "completed", "scores": {"em": i % 2, "len": i}}
        for i in range(4)
    ] + [{"task_id": "t", "model": "b", "sample_index": 0, "status": "failed", "scores": {}}]
    result = RunResult.from_data(samples, run={"run_id": "local", "status": "completed"})
    assert result.run_id == "local" and result.models == ["a", "b"] and result.task_ids == ["t"]
    table = result.metrics.set_index(["model", "metric"])
    assert table.loc[("a", "em"), "mean"] == 0.5 and table.loc[("a", "len"), "mean"] == 1.5
    assert table.loc[("b", "em"), "n_failed"] == 1 and table.loc[("b", "em"), "n"] == 0
    assert list(result.samples.columns[10:12]) == ["em", "len"]


def test_n_missing_field_counts_prompts_whose_row_lacks_a_template_field():
    manifest = {"tasks": [
        {"id": "t", "prompt_template": "{{q}} {{hint}}", "target_template": "{{a}}", "grader": {"type": "python"}},
        {"id": "deep", "prompt_template": "{{q}} {{ctx.title}}", "grader": {"type": "python"}},
    ]}
    rows = [{"q": "1", "a": "x", "hint": "h"}, {"q": "2", "a": "y"}, {"q": "3"}, {"q": "4", "a": "z", "hint": ""}]
    samples = [
        {"task_id": "t", "model": m, "sample_index": i, "status": "completed", "scores": {"score": 1}, "dataset_row": r}
        for m in ("a", "b") for i, r in enumerate(rows)
    ] + [
        {"task_id": "deep", "model": "a", "sample_index": 0, "status": "failed", "dataset_row": {"q": "1", "ctx": {}}},
        {"task_id": "deep", "model": "a", "sample_index": 1, "status": "completed", "scores": {"score": 0},
         "dataset_row": {"q": "2", "ctx": {"title": "T"}}},
    ]
    table = RunResult.from_data(samples, manifest=manifest).metrics.set_index(["task_id", "model"])
    # rows 1 (no hint) and 2 (no hint, no a) lack a field; an empty value ("") is not missing
    assert table.loc[("t", "a"), "n_missing_field"] == 2 and table.loc[("t", "b"), "n_missing_field"] == 2
    assert table.loc[("deep", "a"), "n_missing_field"] == 1  # counted whatever the sample's outcome
    assert RunResult.from_data(samples).metrics["n_missing_field"].eq(0).all()  # no manifest: nothing to check


def test_paired_on_a_batch_metric_says_why_there_are_no_pairs():
    manifest = {"tasks": [
        {"id": "qa", "grader": {"type": "python"}, "metrics": [{"id": "acc"}]},
        {"id": "agg", "grader": {"type": "python", "contract": "batch"}, "metrics": [{"id": "macro_f1"}]},
    ]}
    samples = [{"task_id": t, "model": m, "sample_index": i, "status": "completed",
                "scores": {"acc": (i + (m == "b")) % 2} if t == "qa" else {}}
               for t in ("qa", "agg") for m in ("a", "b") for i in range(4)]
    batch = [{"task_id": "agg", "model": "a", "metrics": {"macro_f1": 0.5}},
             {"task_id": "agg", "model": "b", "metrics": {"macro_f1": 0.7}}]
    result = RunResult.from_data(samples, manifest=manifest, task_metrics=batch)
    table = result.paired("a", "b").set_index("task_id")
    assert table.loc["qa", "n_pairs"] == 4 and table.loc["qa", "note"] is None
    assert table.loc["agg", "n_pairs"] == 0
    assert table.loc["agg", "note"].startswith("macro_f1 is a batch metric: grade_batch gives one value per task")
    with pytest.raises(ValueError, match="in task 'agg': macro_f1 is a batch metric"):
        result.paired("a", "b", task_id="agg")
    # a per-item metric the models share no item of: a different reason
    shifted = [{**x, "sample_index": x["sample_index"] + (10 if x["model"] == "b" else 0)} for x in samples]
    other = RunResult.from_data(shifted, manifest=manifest, task_metrics=batch)
    with pytest.raises(ValueError, match="no scored items in common"):
        other.paired("a", "b", task_id="qa")
