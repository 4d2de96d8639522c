"""`Suite.validate()`: a manifest held against its data and code, every problem at once.

Real files in tmp_path and real sandbox workers; nothing calls a model (no server exists).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalnb.suite import Problem, Suite

GRADE = "def grade(sample, item):\n    return sample['extracted_output'] == item['target']\n"
CAPITALS = [{"country": "France", "capital": "Paris"}, {"country": "Japan", "capital": "Tokyo"}]


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def task(task_id: str = "capitals", **fields: Any) -> dict:
    out = {
        "id": task_id, "type": "qa", "dataset": {"path": "capitals.jsonl"},
        "prompt_template": "What is the capital of {{country}}?", "target_template": "{{capital}}",
        "grader": {"source": GRADE},
    }
    out.update(fields)
    return out


def suite(tmp_path: Path, *tasks: dict) -> Suite:
    write_jsonl(tmp_path / "capitals.jsonl", CAPITALS)
    return Suite.from_dict({"tasks": list(tasks)}, base_dir=tmp_path)


def test_a_misspelt_field_is_named_with_the_task_position_and_the_fields_there_are(tmp_path):
    s = suite(tmp_path, task(prompt_template="What is the capital of {{contry}}?"))
    (problem,) = s.validate()
    assert str(problem) == ("task 'capitals' (tasks[0]).prompt_template: field 'contry' is in no row; "
                            "fields are: country, capital")
    assert isinstance(problem, Problem)
    assert (problem.task_id, problem.position, problem.field) == ("capitals", 0, "prompt_template")
    assert problem.loc == "tasks[0].prompt_template"
    assert problem.as_dict()["msg"].startswith("field 'contry' is in no row")


def test_a_clean_suite_has_no_problems_and_validate_writes_nothing(tmp_path, home):
    s = suite(tmp_path, task(), task("second", prompt_template="{{country}}: {{row}}"))
    assert s.validate() == []
    assert not home.exists()  # no store, no cache: validation reads only


def test_a_value_missing_from_some_rows_is_fine_only_a_field_in_no_row_is_a_problem(tmp_path):
    write_jsonl(tmp_path / "mixed.jsonl", [{"q": "a", "hint": "h"}, {"q": "b"}])
    s = suite(tmp_path, task(dataset={"path": "mixed.jsonl"}, prompt_template="{{q}} {{hint}} {{extra.deep}}",
                             target_template="{{answr}}"))
    assert [(p.field, p.message.split(";")[0]) for p in s.validate()] == [
        ("prompt_template", "field 'extra.deep' is in no row"),
        ("target_template", "field 'answr' is in no row"),
    ]


def test_every_problem_of_every_task_comes_at_once(tmp_path):
    write_jsonl(tmp_path / "few.jsonl", [{"question": "x", "answer": "y"}])
    s = suite(
        tmp_path,
        task(prompt_template="{{contry}}"),
        task("no_file", dataset={"path": "missing.jsonl"}, grader={"source": "def grade(sample, item):\n    return (\n"}),
        task("capped", dataset={"path": "capitals.jsonl", "max_rows": 10}, grader={"source": "def grde(s, i):\n    return 1\n"}),
        task("shots", fewshot={"count": 1, "dataset": {"path": "few.jsonl"}, "example_template": "{{prompt}} {{answer}}"}),
        task("prep", preprocess={"source": "def transform(row):\n    return {**row, 'q': row['nope']}\n"}),
    )
    got = [(p.task_id, p.position, p.field) for p in s.validate()]
    assert got == [
        ("capitals", 0, "prompt_template"),
        ("no_file", 1, "dataset"),
        ("no_file", 1, "grader"),
        ("capped", 2, "dataset"),
        ("capped", 2, "grader"),
        ("shots", 3, "fewshot.dataset"),
        ("shots", 3, "fewshot.dataset"),
        ("shots", 3, "fewshot.example_template"),
        ("prep", 4, "preprocess"),
    ]
    text = "\n".join(map(str, s.validate()))
    assert "dataset file not found" in text and "missing.jsonl" in text
    assert "SyntaxError" in text and "(line 2)" in text
    assert "'capitals.jsonl' is a local file, but max_rows made the dataset a Hugging Face one" in text
    assert "needs grade(sample, item[, ctx]), but its code does not define it" in text
    assert "field 'country' is in no few-shot row; fields are: question, answer (prompt_template" in text
    assert "fewshot.example_template: field 'answer' is not one of: prompt, target" in text
    assert "the preprocessor failed on row 0: KeyError: 'nope'" in text


def test_rows_are_checked_after_the_preprocessor_and_an_empty_result_is_a_problem(tmp_path):
    adds = "def transform(row):\n    return {**row, 'question': 'Capital of ' + row['country'] + '?'}\n"
    drops = "def transform(row):\n    return None\n"
    s = suite(tmp_path, task(prompt_template="{{question}}", preprocess={"source": adds}),
              task("dropped", preprocess={"source": drops}))
    (problem,) = s.validate()  # 'question' exists once the preprocessor ran
    assert str(problem) == "task 'dropped' (tasks[1]).dataset: no rows to evaluate after the preprocessor"


def test_a_broken_preprocessor_is_reported_even_when_the_rows_do_not_load(tmp_path):
    s = suite(tmp_path, task(dataset={"path": "gone.jsonl"},
                             preprocess={"source": "def transform(row)\n    return row\n"}))
    assert [p.field for p in s.validate()] == ["dataset", "preprocess"]
    assert "failed to load: SyntaxError" in str(s.validate()[1])


def test_a_bad_row_anywhere_in_a_local_file_is_found(tmp_path):
    path = write_jsonl(tmp_path / "long.jsonl", [{"country": f"c{i}", "capital": "x"} for i in range(500)])
    with path.open("a") as f:
        f.write("{not json\n")
    (problem,) = suite(tmp_path, task(dataset={"path": "long.jsonl"})).validate()
    assert problem.field == "dataset" and "line 501: invalid JSON" in problem.message


def test_the_grader_is_loaded_but_never_called(tmp_path):
    marker = tmp_path / "graded"
    source = f"def grade(sample, item):\n    open({str(marker)!r}, 'w').write('called')\n    return 1\n"
    assert suite(tmp_path, task(grader={"source": source})).validate() == []
    assert not marker.exists()


def test_a_hugging_face_folder_is_checked_on_its_first_few_rows(tmp_path):
    from evalnb.suite.checks import HF_CHECK_ROWS

    root = tmp_path / "caps"
    root.mkdir()
    lines = ["country,capital"] + [f"c{i},x{i}" for i in range(HF_CHECK_ROWS)] + ["broken"]
    (root / "test.csv").write_text("\n".join(lines) + "\n")
    s = suite(tmp_path, task(dataset={"path": "caps", "split": "test"}, prompt_template="{{contry}}"))
    (problem,) = s.validate()  # the broken line after the first rows is not read: a few rows, fast
    assert str(problem) == ("task 'capitals' (tasks[0]).prompt_template: field 'contry' is in no row; "
                            "fields are: country, capital")
    flat = suite(tmp_path, task(dataset={"path": "caps/test.csv"}))  # the same file as a local file: all of it
    assert "line 7: 1 values but the header has 2 columns" in str(flat.validate()[0])


def test_a_grader_metric_id_not_among_the_metrics_is_a_problem_with_a_did_you_mean(tmp_path):
    s = suite(tmp_path, task(metrics=[{"id": "within_1pct"}], grader={"source": GRADE, "metric_id": "within_1pc"}))
    (problem,) = s.validate()
    assert problem.field == "grader"
    assert "metric_id 'within_1pc' is not among metrics (within_1pct)" in problem.message
    assert problem.message.endswith("did you mean 'within_1pct'?")


def test_score_names_written_in_the_graders_source_are_held_against_the_metrics(tmp_path):
    source = ("def grade(sample, item):\n"
              "    ok = sample['extracted_output'] == item['target']\n"
              "    return {'scores': {'acc': ok, 'accuracy': ok}}\n")
    s = suite(tmp_path, task(metrics=[{"id": "accuracy"}], grader={"source": source}))
    (problem,) = s.validate()
    assert problem.message == ("the grader returns the score 'acc' (line 3), which is not among metrics (accuracy); "
                               "did you mean 'accuracy'?")


def test_names_that_line_up_and_a_default_metric_id_are_not_problems(tmp_path):
    source = "def grade(sample, item):\n    return {'scores': {'accuracy': 1}}\n"
    s = suite(tmp_path, task(metrics=[{"id": "accuracy"}], grader={"source": source}),
              task("second", metrics=[{"id": "em"}], grader={"source": GRADE, "metric_id": "em"}))
    assert s.validate() == []


def test_a_grader_whose_scores_are_built_at_run_time_is_not_held_to_its_literals(tmp_path):
    """A shared grader (an imported lm-eval task's) returns computed names for this task and a
    literal {'acc': ...} only in a branch for another kind of task: validate cannot tell, so it
    says nothing (the run warns if a stray name really comes back)."""
    source = ("def grade(sample, item):\n"
              "    if item.get('choices'):\n"
              "        return {'scores': {'acc': 1.0}}\n"
              "    scores = {'exact_match.' + name: 1.0 for name in ('strict', 'flexible')}\n"
              "    return {'scores': scores}\n")
    s = suite(tmp_path, task(metrics=[{"id": "exact_match.strict"}, {"id": "exact_match.flexible"}],
                             grader={"source": source}))
    assert s.validate() == []
