"""What a run tells you besides its scores: missing fields, unscored samples, grader output,
the question alone, the run's name, and `load_run("latest")`.

Runs go to a real LocalModelServer (planted answers: model ``good`` always right); suites are
JSONL files in tmp_path.
"""

from __future__ import annotations

import math
import warnings

import pytest

import evalnb
from evalnb import Model
from evalnb.errors import MissingFieldWarning
from helpers.runner_kit import rows

pytestmark = pytest.mark.usefixtures("evalnb_home")


def _row(result, task: str, model: str = "good", metric: str = "score") -> dict:
    m = result.metrics
    (row,) = m[(m.task_id == task) & (m.model == model) & (m.metric == metric)].to_dict("records")
    return row


# ---- a field missing from every row -----------------------------------------------------------


def test_a_field_no_row_has_is_a_loud_warning_on_the_terminal_and_counted(make_suite, model_server, capsys):
    suite = make_suite({"t": rows(6)}, t={"prompt_template": "{{q}} (hint: {{hnt}})"})
    server = model_server()
    result = evalnb.run(suite, [Model("good", base_url=server.base_url)], progress="text")
    err = capsys.readouterr().err
    assert ("evalnb: warning: task 't' (tasks[0]).prompt_template: field 'hnt' is in no row; fields are: q, a; "
            'it renders as "" in all 6 prompts') in err
    assert result.status == "completed"
    assert _row(result, "t")["n_missing_field"] == 6


def test_the_warning_shows_in_the_notebook_panel(make_suite, model_server, widget_displays):
    suite = make_suite({"t": rows(3)}, t={"target_template": "{{answer}}"})
    server = model_server()
    evalnb.run(suite, [Model("good", base_url=server.base_url)], progress=True)
    (panel,) = widget_displays
    assert "field &#x27;answer&#x27; is in no row" in panel.warnings.value
    assert "field &#x27;answer&#x27; is in no row" in panel.static_html()  # the exported view too


def test_without_a_display_it_is_a_python_warning(make_suite, model_server):
    suite = make_suite({"t": rows(3)}, t={"prompt_template": "{{question}}"})
    server = model_server()
    with pytest.warns(MissingFieldWarning, match="field 'question' is in no row"):
        evalnb.run(suite, [Model("good", base_url=server.base_url)], progress=False)


def test_a_value_missing_from_some_rows_is_counted_but_not_warned(make_suite, model_server):
    data = [{**r, "hint": "h"} if i % 2 else r for i, r in enumerate(rows(6))]
    suite = make_suite({"t": data}, t={"prompt_template": "{{q}} {{hint}}"})
    server = model_server()
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingFieldWarning)
        result = evalnb.run(suite, [Model("good", base_url=server.base_url)], progress=False)
    assert _row(result, "t")["n_missing_field"] == 3  # rows 0, 2, 4 rendered hint as ""


# ---- not scored, and what the grader printed -------------------------------------------------


PRINTING = """
def grade(sample, item):
    n = int(item["target"])
    print(f"grading {n}: got {sample['extracted_output']!r}")
    if n == 3:
        raise ValueError("three is not allowed")
    if n % 2:
        return None          # not scored
    return sample["extracted_output"] == item["target"]
"""


def test_unscored_samples_are_counted_and_grader_output_is_kept_even_when_it_raised(make_suite, model_server):
    suite = make_suite({"t": rows(6)}, t={"grader": {"source": PRINTING}})
    server = model_server()
    result = evalnb.run(suite, [Model("good", base_url=server.base_url)], progress=False)
    row = _row(result, "t")
    assert (row["n"], row["n_failed"], row["n_unscored"]) == (3, 1, 2)  # 0 2 4 scored; 3 failed; 1 5 None
    assert row["mean"] == 1.0
    s = result.samples.set_index("sample_index")
    assert s.loc[3, "status"] == "failed" and "three is not allowed" in s.loc[3, "error"]
    assert s.loc[3, "log"] == "grading 3: got '3'\n"
    assert s.loc[1, "log"] == "grading 1: got '1'\n" and math.isnan(s.loc[1, "score"])
    assert list(s["log"]) == [f"grading {i}: got '{i}'\n" for i in range(6)]
    # reopened from the store: the same
    again = evalnb.load_run(result.run_id).samples.set_index("sample_index")
    assert again.loc[3, "log"] == "grading 3: got '3'\n"


# ---- the question without its few-shot examples -----------------------------------------------


def test_prompt_is_the_full_prompt_and_prompt_text_the_question_alone(make_suite, model_server):
    suite = make_suite({"t": rows(4)}, t={"fewshot": {"count": 2, "separator": "\n---\n"}})
    server = model_server()
    result = evalnb.run(suite, [Model("good", base_url=server.base_url)], progress=False)
    s = result.samples.set_index("sample_index")
    items = suite.items("t")
    for item in items:
        assert s.loc[item.index, "prompt"] == item.prompt and s.loc[item.index, "prompt"].count("---") == 2
        assert s.loc[item.index, "prompt_text"] == item.question == item.row["q"]
    sent = {r.body["input"] for r in server.requests}
    assert sent == {i.prompt for i in items}  # the model still gets the few-shot prompt


# ---- run names, runs() and load_run("latest") -------------------------------------------------


def test_a_run_has_a_name_listed_with_the_suite_version(make_suite, model_server):
    suite = make_suite({"t": rows(2)})
    server = model_server()
    first = evalnb.run(suite, [Model("good", base_url=server.base_url)], progress=False)
    named = evalnb.run(suite, [Model("good", base_url=server.base_url)], name="v2: neutral defined",
                       reuse=False, progress=False)
    table = evalnb.runs()
    assert list(table["run_id"]) == [named.run_id, first.run_id]
    assert list(table["name"]) == ["v2: neutral defined", None]
    assert set(table["suite_version"]) == {suite.version}
    assert named.name == "v2: neutral defined" and first.name is None
    assert "v2: neutral defined" in named.summary() and "v2: neutral defined" in named._repr_html_()
    with pytest.raises(ValueError, match="run name"):
        evalnb.run(suite, [Model("good", base_url=server.base_url)], name="", progress=False)


def test_load_run_latest_is_the_newest_run(make_suite, model_server):
    with pytest.raises(KeyError, match="no runs"):
        evalnb.load_run("latest")
    suite = make_suite({"t": rows(2)})
    server = model_server()
    evalnb.run(suite, [Model("good", base_url=server.base_url)], progress=False)
    newest = evalnb.run(suite, [Model("good", base_url=server.base_url)], reuse=False, progress=False)
    latest = evalnb.load_run("latest")
    assert latest.run_id == newest.run_id and len(latest.samples) == 2
