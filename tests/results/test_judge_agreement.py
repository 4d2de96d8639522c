"""judge_agreement: accuracy, Wilson interval, Cohen's kappa and the confusion figure,
checked against statsmodels (an independent implementation, tests only)."""

from __future__ import annotations

import math
import random

import pandas as pd
import pytest

import evalnb
from evalnb.results.agreement import cohen_kappa
from evalnb.results.run_result import RunResult

statsmodels_inter_rater = pytest.importorskip("statsmodels.stats.inter_rater")
from statsmodels.stats.proportion import proportion_confint  # noqa: E402


def _result(judged: dict[str, list[float]], *, failed: set[tuple[str, int]] = frozenset()) -> RunResult:
    samples = [
        {"task_id": "t", "model": model, "sample_index": i, "status": "failed" if (model, i) in failed else "completed",
         "scores": {"judged": value}}
        for model, values in judged.items() for i, value in enumerate(values)
    ]
    manifest = {"tasks": [{"id": "t", "metrics": [{"id": "judged"}]}]}
    return RunResult.from_data(samples, run={"models": [{"label": m} for m in judged]}, manifest=manifest)


def _statsmodels_kappa(person: list, judge: list) -> float:
    values = sorted(set(person) | set(judge))
    table = [[sum(1 for a, b in zip(person, judge) if a == x and b == y) for y in values] for x in values]
    return statsmodels_inter_rater.cohens_kappa(table).kappa


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_kappa_and_accuracy_match_statsmodels(seed):
    rng = random.Random(seed)
    levels = [0, 0.5, 1] if seed % 2 else [0, 1]
    person = [rng.choice(levels) for _ in range(60)]
    judge = [p if rng.random() < 0.7 else rng.choice(levels) for p in person]
    result = _result({"m": judge})
    labels = pd.DataFrame({"task_id": "t", "sample_index": range(60), "label": person})
    [row] = result.judge_agreement(labels, metric="judged").to_dict("records")
    agree = sum(a == b for a, b in zip(person, judge))
    assert row["n"] == 60 and row["accuracy"] == pytest.approx(agree / 60)
    low, high = proportion_confint(agree, 60, alpha=0.05, method="wilson")
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), abs=1e-3)  # z = 1.96 vs 1.95996
    assert row["cohen_kappa"] == pytest.approx(_statsmodels_kappa(person, judge), abs=1e-12)
    assert sum(sum(v.values()) for v in row["confusion"].values()) == 60
    assert row["confusion"].get(1, {}).get(1, 0) == sum(1 for a, b in zip(person, judge) if a == b == 1)


def test_kappa_edge_cases():
    assert cohen_kappa([1, 1, 1], [1, 1, 1]) != cohen_kappa([1, 1, 1], [1, 1, 1])  # NaN: p_e = 1
    assert cohen_kappa([0, 1], [1, 0]) == pytest.approx(-1.0)
    assert cohen_kappa([0, 1, 0, 1], [0, 1, 0, 1]) == 1.0
    with pytest.raises(ValueError, match="same, non-zero length"):
        cohen_kappa([], [])


def test_per_model_labels_unscored_samples_and_float_noise():
    result = _result({"a": [1, 0, 1, 0.1 + 0.2], "b": [0, 0, 1, 1]}, failed={("b", 3)})
    labels = pd.DataFrame({"task_id": "t", "model": ["a", "a", "a", "a", "b", "b", "b", "b"],
                           "sample_index": [0, 1, 2, 3] * 2, "label": [1, 1, 1, 0.3, 0, 0, 1, 1]})
    table = result.judge_agreement(labels, metric="judged").set_index("model")
    assert table.loc["a", "accuracy"] == 0.75 and table.loc["a", "n"] == 4  # 0.1 + 0.2 == 0.3 as a category
    assert table.loc["b", "n"] == 3 and table.loc["b", "n_unscored"] == 1 and table.loc["b", "accuracy"] == 1.0
    fig = evalnb.plots.judge_confusion(table.reset_index())
    assert len(fig.data) == 2 and "accuracy 0.75" in fig.layout.annotations[0].text
    heat = fig.data[0]  # person 1 answered: judge gave 0 once, 1 twice -> shares 1/3, 2/3 in the last row
    values = list(heat.y)
    row = heat.z[values.index("1")]
    assert row[values.index("0")] == pytest.approx(1 / 3) and row[values.index("1")] == pytest.approx(2 / 3)


def test_bad_labels_are_refused_with_the_row_named():
    result = _result({"a": [1, 0], "b": [1, 1]})
    good = pd.DataFrame({"task_id": "t", "model": "a", "sample_index": [0, 1], "label": [1, 0]})
    with pytest.raises(ValueError, match="does not have: task_id='t', model='a', sample_index=7"):
        result.judge_agreement(good.assign(sample_index=[0, 7]), metric="judged")
    with pytest.raises(ValueError, match="does not have: task_id='nope'"):
        result.judge_agreement(good.assign(task_id="nope"), metric="judged")
    with pytest.raises(ValueError, match="no 'model' column, but the run has 2 models"):
        result.judge_agreement(good.drop(columns="model"), metric="judged")
    with pytest.raises(ValueError, match="missing column.*label"):
        result.judge_agreement(good.drop(columns="label"), metric="judged")
    with pytest.raises(ValueError, match=r"labels row 1 .*label must be a finite number"):
        result.judge_agreement(good.assign(label=[1, "yes"]), metric="judged")
    with pytest.raises(ValueError, match=r"labels row 0 .*label must be a finite number"):
        result.judge_agreement(good.assign(label=[math.nan, 1]), metric="judged")
    with pytest.raises(ValueError, match="2 rows for the same sample"):
        result.judge_agreement(good.assign(sample_index=[0, 0]), metric="judged")
    with pytest.raises(ValueError, match="metric 'score' is not a metric of this run; its metrics: judged"):
        result.judge_agreement(good, metric="score")
    with pytest.raises(TypeError, match="labels must be a DataFrame"):
        result.judge_agreement([{"task_id": "t"}], metric="judged")
