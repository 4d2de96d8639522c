"""evalnb.results.comparison: paired tables and item agreement, checked against evalnb.results.stats by hand.

The frames (3 models x 2 tasks x 50 items, seeded) come from ``helpers.comparison_kit``.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from evalnb import stats
from evalnb.results.comparison import ALL_TASKS, agreement, paired

from helpers.comparison_kit import MODELS, N_ITEMS, TASKS, A, B, frames_fixture as _fixtures


@pytest.fixture(scope="module")
def frames() -> dict[str, pd.DataFrame]:
    return _fixtures()


def _values(scores: pd.DataFrame, task: str, model: str, metric: str) -> dict[int, float]:
    part = scores[(scores.task_id == task) & (scores.model == model) & (scores.metric == metric)]
    return dict(zip(part.sample_index, part.value, strict=True))


def _both(a: dict, b: dict) -> list[tuple]:
    return [k for k in sorted(a) if k in b and not math.isnan(a[k]) and not math.isnan(b[k])]


# ------------------------------------------------------------------ paired


def test_paired_has_one_row_per_task_then_the_pooled_row(frames):
    table = paired(frames["scores"], A, B)
    assert list(table.task_id) == ["arith", "qa", ALL_TASKS]
    assert set(table.model_a) == {A} and set(table.model_b) == {B}
    assert set(table.metric) == {"exact_match"}  # metric=None: each task's first metric
    assert list(table.columns[:3]) == ["model_a", "model_b", "task_id"]
    for column in ("n_pairs", "mean_a", "mean_b", "mean_diff", "ci_low", "ci_high", "stderr",
                   "n01", "n10", "mcnemar_p"):
        assert column in table.columns


def test_paired_numbers_match_a_hand_computation(frames):
    scores = frames["scores"]
    table = paired(scores, A, B, n_resamples=500, seed=3).set_index("task_id")
    for task in TASKS:
        a = _values(scores, task, A, "exact_match")
        b = _values(scores, task, B, "exact_match")
        keys = _both(a, b)
        row = table.loc[task]
        assert 0 < row.n_pairs == len(keys) < N_ITEMS  # failed samples (NaN) do not pair
        assert row.mean_a == pytest.approx(sum(a[k] for k in keys) / len(keys))
        assert row.mean_b == pytest.approx(sum(b[k] for k in keys) / len(keys))
        assert row.mean_diff == pytest.approx(sum(a[k] - b[k] for k in keys) / len(keys))
        assert row.mean_diff == pytest.approx(row.mean_a - row.mean_b)
        assert row.stderr == pytest.approx(stats.paired_difference(a, b).stderr)
        boot = stats.paired_bootstrap(a, b, n_resamples=500, seed=3)
        assert (row.ci_low, row.ci_high) == (boot.ci_low, boot.ci_high)
        assert row.ci_low < row.mean_diff < row.ci_high


def test_paired_mcnemar_counts_discordant_items(frames):
    scores = frames["scores"]
    table = paired(scores, A, B).set_index("task_id")
    for task in TASKS:
        a = _values(scores, task, A, "exact_match")
        b = _values(scores, task, B, "exact_match")
        keys = _both(a, b)
        n01 = sum(1 for k in keys if a[k] == 0 and b[k] == 1)
        n10 = sum(1 for k in keys if a[k] == 1 and b[k] == 0)
        row = table.loc[task]
        assert (row.n01, row.n10) == (n01, n10)
        assert row.mcnemar_p == stats.mcnemar_from_counts(n01, n10).p_value
    assert table.loc["arith"].mcnemar_p < 0.01  # gamma (0.9) vs alpha (0.45): a real gap
    assert str(table["n01"].dtype) == "Int64"


def test_paired_pooled_row_keys_items_by_task_and_index(frames):
    scores = frames["scores"]
    table = paired(scores, A, B, n_resamples=400).set_index("task_id")
    a = {(t, k): v for t in TASKS for k, v in _values(scores, t, A, "exact_match").items()}
    b = {(t, k): v for t in TASKS for k, v in _values(scores, t, B, "exact_match").items()}
    keys = _both(a, b)
    pooled = table.loc[ALL_TASKS]
    assert pooled.n_pairs == len(keys) == table.loc["arith"].n_pairs + table.loc["qa"].n_pairs
    assert pooled.mean_diff == pytest.approx(sum(a[k] - b[k] for k in keys) / len(keys))
    boot = stats.paired_bootstrap(a, b, n_resamples=400, seed=0)
    assert (pooled.ci_low, pooled.ci_high) == (boot.ci_low, boot.ci_high)
    assert pooled.n01 == table.loc["arith"].n01 + table.loc["qa"].n01


def test_paired_continuous_metric_has_no_mcnemar(frames):
    table = paired(frames["scores"], A, B, metric="f1")
    assert set(table.metric) == {"f1"}
    assert table["n01"].isna().all() and table["n10"].isna().all()
    assert table["mcnemar_p"].isna().all()
    assert table["ci_low"].notna().all()


def test_paired_is_antisymmetric_and_deterministic(frames):
    ab = paired(frames["scores"], A, B)
    ba = paired(frames["scores"], B, A)
    assert list(ab.mean_diff) == pytest.approx(list(-ba.mean_diff))
    assert list(ab.ci_low) == pytest.approx(list(-ba.ci_high))
    assert list(ab.n01) == list(ba.n10)
    pd.testing.assert_frame_equal(ab, paired(frames["scores"], A, B))
    other_seed = paired(frames["scores"], A, B, seed=1)
    assert list(other_seed.ci_low) != list(ab.ci_low)
    assert list(other_seed.mean_diff) == list(ab.mean_diff)


def test_paired_one_task_has_no_pooled_row(frames):
    table = paired(frames["scores"], A, B, task_id="qa")
    assert list(table.task_id) == ["qa"]


def test_paired_tasks_with_different_metrics_are_not_pooled(frames):
    scores = frames["scores"]
    # qa lists f1 first, so metric=None picks exact_match for arith and f1 for qa
    reordered = pd.concat([scores[scores.task_id == "arith"],
                           scores[(scores.task_id == "qa") & (scores.metric == "f1")],
                           scores[(scores.task_id == "qa") & (scores.metric == "exact_match")]])
    table = paired(reordered, A, B)
    assert list(zip(table.task_id, table.metric)) == [("arith", "exact_match"), ("qa", "f1")]


def test_paired_named_metric_skips_tasks_without_it(frames):
    scores = frames["scores"]
    no_f1_in_qa = scores[~((scores.task_id == "qa") & (scores.metric == "f1"))]
    table = paired(no_f1_in_qa, A, B, metric="f1")
    assert list(zip(table.task_id, table.metric)) == [("arith", "f1")]
    with pytest.raises(ValueError, match=r"unknown metric 'f1' for task 'qa'; available: "
                                         r"'exact_match'"):
        paired(no_f1_in_qa, A, B, metric="f1", task_id=["arith", "qa"])


def test_paired_task_without_overlap_gets_an_empty_row(frames):
    scores = frames["scores"]
    shifted = scores.copy()
    moved = (shifted.task_id == "qa") & (shifted.model == B)
    shifted.loc[moved, "sample_index"] += 1000
    table = paired(shifted, A, B).set_index("task_id")
    assert table.loc["qa"].n_pairs == 0 and math.isnan(table.loc["qa"].mean_diff)
    assert table.loc[ALL_TASKS].n_pairs == table.loc["arith"].n_pairs
    with pytest.raises(ValueError, match="no scored items in common in task 'qa'"):
        paired(shifted, A, B, task_id="qa")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model_a": "delta"}, r"unknown model 'delta'; available: 'alpha', 'beta"),
        ({"model_b": "gamma"}, r"two different models"),
        ({"task_id": "math"}, r"unknown task 'math'; available: 'arith', 'qa'"),
        ({"metric": "bleu"}, r"unknown metric 'bleu' in the scores frame; available: "
                             r"'exact_match', 'f1'"),
        ({"task_id": "qa", "metric": "bleu"}, r"unknown metric 'bleu' for task 'qa'"),
        ({"n_resamples": 0}, r"n_resamples"),
    ],
)
def test_paired_errors_name_what_is_available(frames, kwargs, message):
    args = {"model_a": A, "model_b": B, **kwargs}
    with pytest.raises(ValueError, match=message):
        paired(frames["scores"], args.pop("model_a"), args.pop("model_b"), **args)


def test_paired_rejects_bad_frames(frames):
    with pytest.raises(ValueError, match="missing column"):
        paired(frames["scores"].drop(columns=["value"]), A, B)
    with pytest.raises(TypeError, match="DataFrame"):
        paired([{"a": 1}], A, B)
    doubled = pd.concat([frames["scores"], frames["scores"].head(1)])
    with pytest.raises(ValueError, match="more than one row"):
        paired(doubled, "alpha", MODELS[1])


def test_paired_with_no_common_items_anywhere(frames):
    scores = frames["scores"].copy()
    scores.loc[scores.model == B, "sample_index"] += 1000
    with pytest.raises(ValueError, match="no scored items in common in any task"):
        paired(scores, A, B)


# ------------------------------------------------------------------ agreement


def test_agreement_table_shape_and_values(frames):
    scores, samples = frames["scores"], frames["samples"]
    table = agreement(scores, samples, [A, B])
    assert list(table.columns) == ["task_id", "sample_index", "metric", f"value:{A}",
                                   f"value:{B}", f"output:{A}", f"output:{B}", "agree", "flip"]
    assert len(table) == len(TASKS) * N_ITEMS  # every item has a row for both models
    assert list(table.task_id) == sorted(table.task_id)
    row = table[(table.task_id == "arith") & (table.sample_index == 7)].iloc[0]
    a = _values(scores, "arith", A, "exact_match")[7]
    assert row[f"value:{A}"] == a or (math.isnan(a) and math.isnan(row[f"value:{A}"]))
    sample = samples[(samples.task_id == "arith") & (samples.model == B)
                     & (samples.sample_index == 7)].iloc[0]
    assert row[f"output:{B}"] == sample.extracted_output


def test_agreement_flags_and_flips_match_mcnemar(frames):
    table = agreement(frames["scores"], frames["samples"], [A, B])
    both_scored = table[f"value:{A}"].notna() & table[f"value:{B}"].notna()
    assert table.loc[~both_scored, "agree"].isna().all()
    same = table[f"value:{A}"] == table[f"value:{B}"]
    assert (table.loc[both_scored, "agree"] == same[both_scored]).all()
    assert table.loc[~both_scored, "flip"].isna().all()
    pairs = paired(frames["scores"], A, B).set_index("task_id")
    for task in TASKS:
        kinds = table[table.task_id == task].flip.value_counts()
        assert kinds.get("a_only", 0) == pairs.loc[task].n10
        assert kinds.get("b_only", 0) == pairs.loc[task].n01
        assert kinds.sum() == pairs.loc[task].n_pairs
        assert set(kinds.index) <= {"both", "a_only", "b_only", "neither"}


def test_agreement_three_models_and_continuous_metrics_have_no_flip(frames):
    three = agreement(frames["scores"], None, list(MODELS), task_id="arith")
    assert three.flip.isna().all()
    assert three[[f"output:{m}" for m in MODELS]].isna().all().all()  # no samples frame
    values = three[[f"value:{m}" for m in MODELS]]
    complete = values.notna().all(axis=1)
    expected = values[complete].nunique(axis=1) == 1
    assert (three.loc[complete, "agree"] == expected).all()
    f1 = agreement(frames["scores"], frames["samples"], [A, B], metric="f1")
    assert f1.flip.isna().all() and set(f1.metric) == {"f1"}


@pytest.mark.parametrize(
    ("models", "message"),
    [
        (["alpha"], "two or more distinct models"),
        (["alpha", "alpha"], "two or more distinct models"),
        ("alpha", "two or more distinct models"),
        (["alpha", "omega"], "unknown model 'omega'; available"),
    ],
)
def test_agreement_rejects_bad_model_lists(frames, models, message):
    with pytest.raises(ValueError, match=message):
        agreement(frames["scores"], frames["samples"], models)


def test_agreement_without_shared_items(frames):
    scores = frames["scores"].copy()
    scores.loc[scores.model == B, "sample_index"] += 1000
    with pytest.raises(ValueError, match="share no items"):
        agreement(scores, frames["samples"], [A, B])
    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        agreement(frames["scores"], None, [A, B], metric="bleu")
