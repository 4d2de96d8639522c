"""Rows written in the manifest (``dataset: {rows: [...]}``) and the ``type`` default.

Inline rows are an evalnb extension for task and few-shot datasets: held to a file's row rules,
in the JSON Schema, part of the version, round-tripping through to_dict/from_dict and YAML. The
gateway manifests in tests/fixtures load exactly as before (their versions are pinned here).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

import evalnb
from evalnb.errors import DatasetError, ManifestError
from evalnb.suite import Suite
from evalnb.suite.datasets import MAX_ROWS, InlineDataset

FIXTURES = Path(__file__).parents[1] / "fixtures" / "manifests"
ROOT = Path(__file__).resolve().parents[2]
GRADE = "def grade(sample, item):\n    return sample['extracted_output'] == item['target']\n"
ROWS = [{"text": f"review {i}", "label": "positive" if i % 2 else "negative", "meta": {"n": i}} for i in range(30)]


def manifest(rows=ROWS, **task):
    return {"tasks": [{"id": "sentiment", "dataset": {"rows": copy.deepcopy(rows)},
                       "prompt_template": "{{text}} ({{meta.n}})", "target_template": "{{label}}",
                       "grader": {"source": GRADE}, **task}]}


def problems(data) -> dict[str, str]:
    with pytest.raises(ManifestError) as info:
        Suite.from_dict(data)
    return {e["loc"]: e["msg"] for e in info.value.errors}


def test_rows_render_into_items_and_fewshot_examples():
    shots = {"rows": [{"text": "great", "label": "positive"}, {"text": "awful", "label": "negative"}]}
    suite = Suite.from_dict(manifest(fewshot={"count": 2, "dataset": shots}))
    task = suite.task("sentiment")
    assert isinstance(task.dataset, InlineDataset) and isinstance(task.fewshot.dataset, InlineDataset)
    items = suite.items("sentiment")
    assert len(items) == 30
    assert items[3].prompt == "great ()\npositive\n\nawful ()\nnegative\n\nreview 3 (3)"  # no meta.n: ""
    assert items[3].target == "positive" and items[3].row == ROWS[3]


def test_loaded_rows_are_copies_the_suite_never_changes():
    suite = Suite.from_dict(manifest())
    items = suite.items("sentiment")
    items[0].row["text"] = "changed"
    items[0].row["meta"]["n"] = 99
    assert suite.task("sentiment").dataset.rows[0] == ROWS[0]


def test_type_defaults_to_custom_and_is_always_written_out():
    suite = Suite.from_dict(manifest())
    assert suite.task("sentiment").type == "custom"
    assert suite.to_dict()["tasks"][0]["type"] == "custom"  # what the gateway (which requires it) reads
    assert Suite.from_dict(manifest(type="custom")).version == suite.version  # the default is the value
    assert Suite.from_dict(manifest(type="qa")).version != suite.version
    wrong = problems(manifest(type="sentimnt"))
    assert "must be one of" in wrong["tasks[0].type"] and "sentimnt" in wrong["tasks[0].type"]
    assert "leave it out for 'custom' (the gateway requires it" in wrong["tasks[0].type"]  # says where it is required


def test_round_trips_through_dict_yaml_and_a_file(tmp_path):
    data = manifest(fewshot={"count": 1, "dataset": {"rows": [{"text": "a\nb  ", "label": "x: y"}]}})
    suite = Suite.from_dict(data)
    assert Suite.from_dict(suite.to_dict()) == suite
    text = suite.to_yaml()
    assert "rows:" in text and "review 29" in text
    (tmp_path / "suite.yaml").write_text(text, encoding="utf-8")
    again = Suite.from_file(tmp_path / "suite.yaml")
    assert again == suite and again.version == suite.version
    (tmp_path / "suite.json").write_text(json.dumps(suite.to_dict()), encoding="utf-8")
    assert Suite.from_file(tmp_path / "suite.json").version == suite.version


def test_version_is_stable_and_changes_when_a_row_does():
    base = Suite.from_dict(manifest()).version
    reordered = [dict(reversed(list(row.items()))) for row in ROWS]
    assert Suite.from_dict(manifest(rows=reordered)).version == base  # key order is not content
    assert Suite.from_dict(manifest()).version == base
    changed = copy.deepcopy(ROWS)
    changed[17]["meta"]["n"] = 170
    assert Suite.from_dict(manifest(rows=changed)).version != base
    assert Suite.from_dict(manifest(rows=ROWS[:29])).version != base
    assert Suite.from_dict(manifest(rows=ROWS[1:] + ROWS[:1])).version != base  # row order is content


def test_gateway_manifests_load_unchanged():
    pinned = {  # versions computed before inline rows existed
        "full_suite.json": "d950fd01d9e670ccd87b66651be960320e8afbdc7e4bf03f9d3fba246eec46d5",
        "small_suite.json": "a263c59f41eddc08133d42dea1cd8f5d8d21649cc1b91cb9202438ecba0a7007",
        "small_suite.yaml": "a263c59f41eddc08133d42dea1cd8f5d8d21649cc1b91cb9202438ecba0a7007",
    }
    for name, version in pinned.items():
        assert Suite.from_file(FIXTURES / name).version == version, name


def test_json_schema_has_inline_rows_for_tasks_and_fewshot():
    schema = Suite.json_schema()
    inline = schema["$defs"]["InlineDataset"]
    assert inline["required"] == ["rows"] and inline["additionalProperties"] is False
    rows = inline["properties"]["rows"]
    assert rows["minItems"] == 1 and rows["maxItems"] == MAX_ROWS == 1_000_000
    assert rows["items"] == {"type": "object"} and "evalnb extension" in rows["description"]
    text = json.dumps(schema)
    refs = [json.dumps(schema["$defs"][name]["properties"]["dataset"]) for name in ("Task", "FewshotSpec")]
    assert all("#/$defs/InlineDataset" in ref for ref in refs) and "InlineDataset" in text
    assert "type" not in schema["$defs"]["Task"]["required"]
    assert "gateway requires it" in schema["$defs"]["Task"]["properties"]["type"]["description"]


@pytest.mark.parametrize(
    "dataset, loc, words",
    [
        ({"rows": []}, "tasks[0].dataset.rows", "must have at least 1 item(s) (found 0)"),
        ({"rows": "a.jsonl"}, "tasks[0].dataset.rows", 'must be a list (found "a.jsonl")'),
        ({"rows": [{"text": "ok"}, ["text", "no"]]}, "tasks[0].dataset.rows[1]", "not a JSON object (found list)"),
        ({"rows": [None]}, "tasks[0].dataset.rows[0]", "not a JSON object (found null)"),
        ({"rows": [{"text": {1, 2}}]}, "tasks[0].dataset.rows[0]",
         "field 'text' must be a string, number, boolean, null, list or object (found set)"),
        ({"rows": [{"meta": {"n": [1, float("nan")]}}]}, "tasks[0].dataset.rows[0]", "field 'meta.n.1' must be"),
        ({"rows": [{1: "one"}]}, "tasks[0].dataset.rows[0]", "field names must be strings (found 1)"),
        ({"rows": [{"text": "x"}], "format": "jsonl"}, "tasks[0].dataset.format",
         "unknown field; an inline dataset takes only rows"),
    ],
)
def test_bad_rows_name_the_task_the_field_and_the_row(dataset, loc, words):
    data = manifest()
    data["tasks"][0]["dataset"] = dataset
    found = problems(data)
    assert words in found[loc], found


def test_every_bad_row_is_reported_at_once_with_the_other_problems():
    data = manifest(rows=[{"text": "ok"}, 3, {"text": object()}, "four"])
    data["tasks"][0]["promt_template"] = "x"
    found = problems(data)
    assert set(found) == {"tasks[0].dataset.rows[1]", "tasks[0].dataset.rows[2]", "tasks[0].dataset.rows[3]",
                          "tasks[0].promt_template"}


def test_too_many_rows_is_the_file_datasets_limit():
    found = problems(manifest(rows=[{"text": "x"}] * (MAX_ROWS + 1)))
    assert found == {"tasks[0].dataset.rows": f"must have at most {MAX_ROWS} items (found {MAX_ROWS + 1})"}


def test_fewshot_rows_are_checked_the_same_way():
    found = problems(manifest(fewshot={"count": 1, "dataset": {"rows": [{"text": "x"}, 7]}}))
    assert found == {"tasks[0].fewshot.dataset.rows[1]": "not a JSON object (found int)"}
    found = problems(manifest(fewshot={"count": 1, "dataset": {"rows": []}}))
    assert "tasks[0].fewshot.dataset.rows" in found


def test_validate_reads_inline_rows_like_a_file():
    data = manifest(prompt_template="{{txt}}")
    found = Suite.from_dict(data).validate()
    assert [str(p) for p in found] == [
        "task 'sentiment' (tasks[0]).prompt_template: field 'txt' is in no row; fields are: text, label, meta"
    ]


def test_a_plain_dict_declaration_is_checked_by_the_loader():
    from evalnb.data.loaders import load_rows

    assert load_rows({"rows": [{"a": 1}, {"a": 2}]}, task_id="t", limit=1) == [{"a": 1}]
    with pytest.raises(DatasetError, match=r"task 't': dataset.rows\[1\]: not a JSON object \(found str\)"):
        load_rows({"rows": [{"a": 1}, "b"]}, task_id="t")


def _python_block(text: str, marker: str) -> str:
    return re.search(re.escape(marker) + r".*?```python\n(.*?)```", text, re.S).group(1)


def test_the_manifest_page_from_dict_example_runs_as_pasted(tmp_path, monkeypatch, capsys):
    """docs/manifests.md ("Writing a manifest", the README's section before the docs site)."""
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "home"))
    for name in ("EVALNB_BASE_URL", "EVALNB_MODELS"):
        monkeypatch.delenv(name, raising=False)
    block = _python_block((ROOT / "docs" / "manifests.md").read_text(encoding="utf-8"), "The same kind of task from Python")
    assert '"rows"' in block and "LocalModelServer" in block
    scope: dict = {}
    exec(compile(block, "docs/manifests.md", "exec"), scope)  # noqa: S102 - our own documentation
    result = scope["result"]
    assert result.status == "completed"
    row = result.metrics.iloc[0]
    assert row["n"] == 3 and row["mean"] == 1.0
    assert scope["suite"].task("sentiment").type == "custom"


def test_the_docs_page_examples_run_as_pasted(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "docs" / "tasks.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 2
    scope: dict = {}
    for block in blocks:
        exec(compile(block, "docs/tasks.md", "exec"), scope)  # noqa: S102 - our own documentation
    assert scope["suite"].task("sentiment").type == "custom"
    assert evalnb.Suite.from_file(tmp_path / "sentiment.yaml") == scope["suite"]
