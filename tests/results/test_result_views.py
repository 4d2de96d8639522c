"""RunResult as a researcher meets it: metrics for every score key, cheap repr, compare, paired, browse."""

from __future__ import annotations

import pytest

import evalnb
from helpers.runner_kit import rows

pytestmark = pytest.mark.usefixtures("evalnb_home")

JUDGED = (
    "def grade(sample, item):\n"
    "    ok = sample['extracted_output'] == item['target']\n"
    "    return {'scores': {'judged': ok, 'length': len(sample['output_text'] or '')}}\n"
)


def _models(server):
    return [evalnb.Model("good", base_url=server.base_url), evalnb.Model("okay", base_url=server.base_url)]


def test_metrics_cover_score_keys_the_manifest_does_not_declare(make_suite, model_server):
    server = model_server()
    suite = make_suite({"t": rows(10)}, t={"grader": {"source": JUDGED}})
    result = evalnb.run(suite, _models(server), progress=False)
    m = result.metrics.set_index(["model", "metric"])
    assert set(result.metrics["metric"]) == {"judged", "length"}  # no empty default "score" row
    assert m.loc[("good", "judged"), "mean"] == 1.0
    assert m.loc[("okay", "judged"), "mean"] == pytest.approx(0.8)
    assert m.loc[("okay", "judged"), "n"] == 10


def test_declared_metrics_are_the_only_ones_aggregated(make_suite, model_server):
    server = model_server()
    suite = make_suite({"t": rows(5)}, t={"grader": {"source": JUDGED}, "metrics": [{"id": "judged"}]})
    result = evalnb.run(suite, _models(server), progress=False)
    assert set(result.metrics["metric"]) == {"judged"}  # SPEC 7: declared metrics say what counts
    assert "length" in result.samples.columns  # the other score is still on every sample


def test_repr_is_one_line_and_str_is_the_report(make_suite, model_server):
    server = model_server()
    result = evalnb.run(make_suite({"t": rows(5)}), _models(server), progress=False)
    text = repr(result)
    assert text.startswith("<RunResult eval_run_") and "\n" not in text and "status=completed" in text
    report = str(result)
    assert "good" in report and "okay" in report and "score" in report


def test_compare_paired_and_browse_from_a_run(make_suite, model_server):
    server = model_server()
    result = evalnb.run(make_suite({"t": rows(20)}), _models(server), progress=False)
    fig = result.compare()
    assert {trace.name for trace in fig.data} == {"good", "okay"}
    paired = result.paired("good", "okay")
    row = paired.iloc[0]
    assert row["n_pairs"] == 20 and row["mean_diff"] == pytest.approx(0.2)
    assert row["n10"] + row["n01"] == 4  # the four items only "okay" gets wrong
    widget = result.browse(filter="disagreements")
    assert len(widget.pages) == 4
    assert "ITEM-4" in widget.page_html.value


def test_suite_html_lists_every_task_and_escapes_templates(make_suite):
    suite = make_suite(
        {"a": rows(3), "b": rows(3)},
        a={"prompt_template": "<b>{{q}}</b> & more", "num_fewshot": 2},
        b={"output_extraction": {"type": "number"}, "metrics": [{"id": "acc"}]},
    )
    page = suite._repr_html_()
    assert suite.version[:16] in page and "2 tasks" in page
    assert page.count("<tr>") == 3  # header + one per task
    assert "&lt;b&gt;{{q}}&lt;/b&gt; &amp; more" in page and "<b>{{q}}" not in page
    assert "2 (first)" in page and "number" in page and "acc" in page
    assert "<script" not in page
    assert str(suite).splitlines()[1].startswith("  a [qa]")
