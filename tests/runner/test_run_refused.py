"""A run that `Suite.validate()` rejects never starts; one that fails before its first sample says why.

`evalnb.run`, `evalnb.arun` and `evalnb run` run the suite's checks on the tasks they will run,
before any model call, request or store write, and raise every problem at once: a
`ManifestError` (a metric-name typo, a grader that does not load, ...) or a `DatasetError` (only
dataset problems: a missing file). A template field in no row stays a warning.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from helpers.runner_kit import EXACT, rows

import evalnb
from evalnb.errors import DatasetError, ManifestError, MissingFieldWarning

pytestmark = pytest.mark.usefixtures("evalnb_home")

TYPO = {"metrics": [{"id": "accuracy"}], "grader": {"source": EXACT, "metric_id": "acuracy"}}


def _nothing_happened(server, home):
    assert server.request_count == 0  # the server saw no request at all
    assert not (home / "evalnb.sqlite").exists()  # no store written: no run, no suite version


def test_a_metric_typo_raises_before_any_request_or_store_write(make_suite, model_server, evalnb_home):
    server = model_server()
    suite = make_suite({"t": rows(30)}, t=TYPO)
    assert any("did you mean 'accuracy'" in p.message for p in suite.validate())
    with pytest.raises(ManifestError) as info:
        evalnb.run(suite, [evalnb.Model("good", base_url=server.base_url)], progress=False)
    [error] = info.value.errors
    assert error["loc"] == "tasks[0].grader" and error["task_id"] == "t"
    assert "metric_id 'acuracy' is not among metrics (accuracy)" in error["msg"] and "did you mean 'accuracy'" in error["msg"]
    assert "task 't' (tasks[0].grader): metric_id 'acuracy'" in str(info.value)
    _nothing_happened(server, evalnb_home)


def test_a_missing_dataset_file_raises_a_dataset_error_before_anything(make_suite, model_server, evalnb_home, tmp_path):
    server = model_server()
    suite = make_suite({"t": rows(3)})
    (tmp_path / "data" / "t.jsonl").unlink()
    with pytest.raises(DatasetError) as info:
        evalnb.run(suite, [evalnb.Model("good", base_url=server.base_url)], progress=False)
    assert "task 't' (tasks[0]).dataset: dataset file not found:" in str(info.value)
    assert str(tmp_path / "data" / "t.jsonl") in str(info.value)
    _nothing_happened(server, evalnb_home)


def test_every_problem_of_every_task_is_raised_at_once_by_arun(make_suite, model_server, evalnb_home, tmp_path):
    server = model_server()
    suite = make_suite({"a": rows(3), "b": rows(3), "c": rows(3)}, a=TYPO,
                       c={"grader": {"source": "def grde(sample, item):\n    return 1\n"}})
    (tmp_path / "data" / "b.jsonl").unlink()
    with pytest.raises(ManifestError) as info:
        asyncio.run(evalnb.arun(suite, [evalnb.Model("good", base_url=server.base_url)], progress=False))
    found = {(e["task_id"], e["loc"]) for e in info.value.errors}
    assert found == {("a", "tasks[0].grader"), ("b", "tasks[1].dataset"), ("c", "tasks[2].grader")}
    _nothing_happened(server, evalnb_home)


def test_only_the_tasks_the_run_runs_are_checked(make_suite, model_server, evalnb_home):
    server = model_server()
    suite = make_suite({"ok": rows(3), "broken": rows(3)}, broken=TYPO)
    result = evalnb.run(suite, [evalnb.Model("good", base_url=server.base_url)], task_ids=["ok"], progress=False)
    assert result.status == "completed" and len(result.samples) == 3
    assert (evalnb_home / "evalnb.sqlite").exists()  # where a refused run would have written


def test_a_field_in_no_row_stays_a_warning(make_suite, model_server):
    server = model_server()
    suite = make_suite({"t": rows(3)}, t={"target_template": "{{answer}}"})
    with pytest.warns(MissingFieldWarning, match="answer"):
        result = evalnb.run(suite, [evalnb.Model("good", base_url=server.base_url)], progress=False)
    assert result.status == "completed" and server.request_count == 3


def test_the_cli_refuses_too_and_says_each_problem_once(tmp_path, model_server, evalnb_home, capsys):
    from evalnb.cli import main
    from helpers.runner_kit import manifest

    server = model_server()
    data = manifest(tmp_path, {"t": rows(3)}, t=TYPO)
    (tmp_path / "suite.json").write_text(json.dumps(data), encoding="utf-8")
    code = main(["run", str(tmp_path / "suite.json"), "--model", f"good@{server.base_url}"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("metric_id 'acuracy' is not among metrics") == 1, err
    assert "did you mean 'accuracy'" in err
    _nothing_happened(server, evalnb_home)


def test_a_run_that_fails_before_its_first_sample_says_why(make_suite, model_server, capsys):
    """A judge-needing grader without judge_model passes the checks but cannot start: the reason
    is on the progress line and in the repr (not just ``0/0 ... failed``)."""
    server = model_server()
    judge = "def grade(sample, item, ctx):\n    return ctx.responses_create(model='auto', input='x') is not None\n"
    suite = make_suite({"t": rows(3)}, t={"grader": {"source": judge, "contract": "model_backed"}})
    result = evalnb.run(suite, [evalnb.Model("good", base_url=server.base_url)], progress="text")
    err = capsys.readouterr().err
    assert result.status == "failed" and server.request_count == 0
    assert "judge" in result.run["error"]
    final = [line for line in err.splitlines() if line.startswith("evalnb: why:")]
    assert final and "judge" in final[-1], err
    assert "judge" in repr(result) and "status=failed" in repr(result)


def test_extra_scores_beside_a_counted_one_do_not_stop_a_run(make_suite, model_server):
    server = model_server()
    source = ("def grade(sample, item):\n"
              "    return {'scores': {'accuracy': sample['extracted_output'] == item['target'], 'length': 3}}\n")
    suite = make_suite({"t": rows(3)}, t={"metrics": [{"id": "accuracy"}], "grader": {"source": source}})
    assert [p.kind for p in suite.validate()] == ["extra_score"]  # validate() still says so
    result = evalnb.run(suite, [evalnb.Model("good", base_url=server.base_url)], progress=False)
    assert result.status == "completed" and set(result.metrics["metric"]) == {"accuracy"}
