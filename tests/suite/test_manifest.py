"""The suite manifest schema: forms, defaults, every limit at both edges, and its errors."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from evalnb.errors import ManifestError
from evalnb.suite.manifest import (
    SCHEMA_VERSION,
    TASK_TYPES,
    FewshotSpec,
    FileDataset,
    GraderSpec,
    HuggingFaceDataset,
    LocalDataset,
    MetricSpec,
    OutputExtraction,
    Task,
    dataset_kind,
)
from evalnb.suite import Suite

FIXTURES = Path(__file__).parents[1] / "fixtures" / "manifests"
GRADE = "def grade(sample, item):\n    return 1.0\n"


def make_task(**fields: Any) -> dict[str, Any]:
    task = {
        "id": "t",
        "type": "qa",
        "dataset": {"path": "data/x.jsonl"},
        "prompt_template": "Q: {{q}}",
        "grader": {"source": GRADE},
    }
    task.update(fields)
    return task


def make_suite(*tasks: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"tasks": list(tasks) or [make_task()], **fields}


def errors_of(manifest: Any) -> dict[str, str]:
    with pytest.raises(ManifestError) as info:
        Suite.from_dict(manifest)
    return {e["loc"]: e["msg"] for e in info.value.errors}


def set_at(manifest: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``manifest`` with the dotted ``path`` (list indices as numbers) set."""
    manifest = copy.deepcopy(manifest)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node: Any = manifest
    for part in parents:
        node = node[part]
    node[last] = value
    return manifest


def full_manifest() -> dict[str, Any]:
    return json.loads((FIXTURES / "full_suite.json").read_text())


def reorder(value: Any) -> Any:
    """The same JSON value with every object's keys in reverse order."""
    if isinstance(value, dict):
        return {k: reorder(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reorder(v) for v in value]
    return value


def assert_contained(given: Any, canonical: Any, where: str = "") -> None:
    """Everything the author wrote is in the canonical form, unchanged."""
    if isinstance(given, dict):
        assert isinstance(canonical, dict), where
        for key, value in given.items():
            if key == "num_fewshot":
                assert canonical["fewshot"]["count"] == value, where
                continue
            assert key in canonical, f"{where}.{key} missing"
            assert_contained(value, canonical[key], f"{where}.{key}")
    elif isinstance(given, list):
        assert isinstance(canonical, list) and len(given) == len(canonical), where
        for i, (a, b) in enumerate(zip(given, canonical)):
            assert_contained(a, b, f"{where}[{i}]")
    else:
        assert given == canonical and type(given) is type(canonical), where


# --- the full manifest ------------------------------------------------------------------------


def test_full_manifest_loads_unchanged():
    manifest = full_manifest()
    suite = Suite.from_dict(manifest)
    assert sorted(t.type for t in suite.tasks) == sorted(TASK_TYPES)
    assert_contained(manifest, suite.to_dict())


def test_full_manifest_fields_are_read():
    suite = Suite.from_dict(full_manifest())
    belebele = suite.task("belebele_eng")
    assert isinstance(belebele.dataset, HuggingFaceDataset)
    assert belebele.dataset.name == "eng_Latn" and belebele.dataset.max_rows == 200
    assert belebele.dataset.dataset_kwargs == {"trust_remote_code": False}
    assert belebele.fewshot == FewshotSpec(count=3)
    assert belebele.extraction.pattern == "Answer:\\s*([A-D])" and belebele.extraction.flags == "i"
    sentiment = suite.task("sentiment.v2")
    assert isinstance(sentiment.dataset, FileDataset) and sentiment.dataset.format == "jsonl"
    assert isinstance(sentiment.fewshot.dataset, LocalDataset)
    assert sentiment.preprocess.timeout_seconds == 30 and sentiment.preprocess.contract == "row"
    assert [m.aggregation for m in sentiment.metrics] == ["mean", "none"]
    assert sentiment.grader.contract == "batch" and sentiment.grader.max_model_calls == 0
    gsm = suite.task("gsm8k-mini")
    assert gsm.dataset.data_files == {"test": "https://example.com/gsm8k/test.jsonl"}
    assert gsm.fewshot.dataset.split == "train"  # a few-shot HF dataset defaults to train
    assert suite.task("squad_qa").preprocess.file_id == "file_pre1"
    assert suite.task("paraphrase_similarity").extraction.group == "answer"
    assert suite.metadata == {"owner": "eval-team", "revision": 3, "public": True, "threshold": 0.75, "notes": None}


def test_to_dict_round_trips_and_is_json():
    suite = Suite.from_dict(full_manifest())
    canonical = suite.to_dict()
    assert json.loads(json.dumps(canonical)) == canonical
    again = Suite.from_dict(canonical)
    assert again == suite
    assert again.to_dict() == canonical
    assert again.version == suite.version


def test_to_dict_fills_defaults_and_folds_aliases():
    canonical = Suite.from_dict(make_suite(make_task(num_fewshot=2, dataset={"path": "org/ds"}))).to_dict()
    task = canonical["tasks"][0]
    assert canonical["schema_version"] == SCHEMA_VERSION
    assert "num_fewshot" not in task
    assert task["fewshot"] == {
        "count": 2,
        "example_template": "{{prompt}}\n{{target}}",
        "separator": "\n\n",
        "strategy": "first",
        "seed": 0,
    }
    assert task["dataset"] == {"source": "huggingface", "path": "org/ds", "split": "test"}
    assert task["output_extraction"] == {"type": "none"}
    assert task["grader"] == {
        "type": "python",
        "contract": "sample",
        "model_access": "none",
        "metric_id": "score",
        "source": GRADE,
        "timeout_seconds": 120,
        "max_model_calls": 64,
    }


# --- version ----------------------------------------------------------------------------------


def test_version_is_sha256_hex():
    version = Suite.from_dict(make_suite()).version
    assert re.fullmatch(r"[0-9a-f]{64}", version)


def test_version_of_any_string():
    for text in ("naïve ✓", "emoji 🙂", "nul\x00"):
        suite = Suite.from_dict(make_suite(make_task(prompt_template=text)))
        assert re.fullmatch(r"[0-9a-f]{64}", suite.version)
    assert Suite.from_dict(make_suite(make_task(prompt_template="é"))).version != Suite.from_dict(make_suite(make_task(prompt_template="e"))).version


def test_version_ignores_key_order():
    manifest = full_manifest()
    assert Suite.from_dict(reorder(manifest)).version == Suite.from_dict(manifest).version


@pytest.mark.parametrize(
    "left, right",
    [
        ({"num_fewshot": 3}, {"fewshot": {"count": 3}}),
        ({"num_fewshot": 3, "fewshot": {"strategy": "random"}}, {"fewshot": {"count": 3, "strategy": "random"}}),
        ({}, {"output_extraction": {"type": "none"}}),
        ({"output_extraction": {"type": "take_first"}}, {"output_extraction": {"type": "take_first", "lines": 1}}),
        ({"output_extraction": {"type": "regex", "pattern": "(a)"}}, {"output_extraction": {"type": "regex", "pattern": "(a)", "group": 1, "flags": ""}}),
        ({"output_extraction": {"type": "regex", "pattern": "a", "flags": "mi"}}, {"output_extraction": {"type": "regex", "pattern": "a", "flags": "im"}}),
        ({"dataset": {"path": "org/ds"}}, {"dataset": {"source": "huggingface", "path": "org/ds", "split": "test"}}),
        ({"grader": {"source": GRADE}}, {"grader": {"type": "python", "source": GRADE, "model_access": "none", "metric_id": "score"}}),
        ({"grader": {"contract": "model_backed", "file_id": "f"}}, {"grader": {"contract": "model_backed", "file_id": "f", "model_access": "mka1"}}),
        ({}, {"metrics": [], "metadata": {}}),
    ],
)
def test_version_equal_for_equal_meaning(left, right):
    a = Suite.from_dict(make_suite(make_task(**left)))
    b = Suite.from_dict(make_suite(make_task(**right)))
    assert a.version == b.version
    assert a == b


def test_version_equal_with_explicit_schema_version():
    assert Suite.from_dict(make_suite()).version == Suite.from_dict(make_suite(schema_version=SCHEMA_VERSION)).version


@pytest.mark.parametrize(
    "path, value",
    [
        ("tasks.0.prompt_template", "Q:  {{q}}"),
        ("tasks.0.id", "t2"),
        ("tasks.0.name", "a name"),
        ("tasks.0.dataset.path", "data/y.jsonl"),
        ("tasks.0.grader.timeout_seconds", 121),
        ("tasks.0.grader.source", GRADE + "\n"),
        ("tasks.0.metadata", {"k": "v"}),
        ("tasks.0.metadata", {"k": 1}),
        ("tasks.0.num_fewshot", 1),
        ("tasks.0.choices", ["A"]),
        ("metadata", {"k": "v"}),
    ],
)
def test_version_changes_with_content(path, value):
    base = make_suite()
    assert Suite.from_dict(set_at(base, path, value)).version != Suite.from_dict(base).version


def test_version_changes_with_task_order_and_count():
    a, b = make_task(id="a"), make_task(id="b")
    versions = {Suite.from_dict(make_suite(*tasks)).version for tasks in ([a], [a, b], [b, a])}
    assert len(versions) == 3


# --- schema_version and top level -------------------------------------------------------------


def test_schema_version_defaults():
    assert Suite.from_dict(make_suite()).schema_version == "2026-05-27"


@pytest.mark.parametrize("value", ["2025-01-01", "2026-05-28", "", 20260527, None])
def test_schema_version_other_values_rejected(value):
    errors = errors_of(make_suite(schema_version=value))
    assert "2026-05-27" in errors["schema_version"]


@pytest.mark.parametrize("value", [None, [], "tasks", 5, [make_suite()]])
def test_non_dict_manifest_is_a_manifest_error(value):
    with pytest.raises(ManifestError, match="must be an object"):
        Suite.from_dict(value)


def test_manifest_error_is_a_value_error_with_error_dicts():
    with pytest.raises(ValueError) as info:
        Suite.from_dict(make_suite(make_task(type="essay")))
    (error,) = info.value.errors
    assert set(error) == {"loc", "msg", "type"}
    assert error["loc"] == "tasks[0].type" and error["type"] == "literal_error"
    assert "'essay'" not in error["msg"] and '"essay"' in error["msg"]
    assert "tasks[0].type:" in str(info.value)


# --- limits at both edges ---------------------------------------------------------------------


@pytest.mark.parametrize("count, ok", [(0, False), (1, True), (100, True), (101, False)])
def test_tasks_per_suite(count, ok):
    manifest = make_suite(*[make_task(id=f"t{i}") for i in range(count)]) if count else {"tasks": []}
    if ok:
        assert len(Suite.from_dict(manifest).tasks) == count
    else:
        msg = errors_of(manifest)["tasks"]
        assert ("at least 1" if count == 0 else "at most 100") in msg and f"found {count}" in msg


LIMITS = [
    # (dotted path on make_suite(), value, ok, words in the message)
    ("tasks.0.num_fewshot", 0, True, ""),
    ("tasks.0.num_fewshot", 100, True, ""),
    ("tasks.0.num_fewshot", 101, False, "at most 100"),
    ("tasks.0.num_fewshot", -1, False, "at least 0"),
    ("tasks.0.fewshot", {"count": 0}, True, ""),
    ("tasks.0.fewshot", {"count": 100}, True, ""),
    ("tasks.0.fewshot", {"count": 101}, False, "at most 100"),
    ("tasks.0.grader.timeout_seconds", 1, True, ""),
    ("tasks.0.grader.timeout_seconds", 600, True, ""),
    ("tasks.0.grader.timeout_seconds", 0, False, "at least 1"),
    ("tasks.0.grader.timeout_seconds", 601, False, "at most 600"),
    ("tasks.0.grader.max_model_calls", 0, True, ""),
    ("tasks.0.grader.max_model_calls", 500, True, ""),
    ("tasks.0.grader.max_model_calls", -1, False, "at least 0"),
    ("tasks.0.grader.max_model_calls", 501, False, "at most 500"),
    ("tasks.0.preprocess", {"source": "x", "timeout_seconds": 1}, True, ""),
    ("tasks.0.preprocess", {"source": "x", "timeout_seconds": 600}, True, ""),
    ("tasks.0.preprocess", {"source": "x", "timeout_seconds": 0}, False, "at least 1"),
    ("tasks.0.preprocess", {"source": "x", "timeout_seconds": 601}, False, "at most 600"),
    ("tasks.0.dataset", {"path": "org/ds", "max_rows": 1}, True, ""),
    ("tasks.0.dataset", {"path": "org/ds", "max_rows": 1_000_000}, True, ""),
    ("tasks.0.dataset", {"path": "org/ds", "max_rows": 0}, False, "at least 1"),
    ("tasks.0.dataset", {"path": "org/ds", "max_rows": 1_000_001}, False, "at most 1000000"),
    ("tasks.0.output_extraction", {"type": "take_first", "lines": 1}, True, ""),
    ("tasks.0.output_extraction", {"type": "take_first", "lines": 0}, False, "at least 1"),
    ("tasks.0.metadata", {"k" * 64: "v"}, True, ""),
    ("tasks.0.metadata", {"k" * 65: "v"}, False, "at most 64 characters (found 65)"),
    ("tasks.0.metadata", {"k": "v" * 512}, True, ""),
    ("tasks.0.metadata", {"k": "v" * 513}, False, "at most 512 characters (found 513)"),
    ("tasks.0.metadata", {"k": int("9" * 512)}, True, ""),
    ("tasks.0.metadata", {"k": int("9" * 513)}, False, "at most 512 characters (found 513)"),
    ("metadata", {"k" * 64: "v" * 512}, True, ""),
    ("metadata", {"k" * 65: "v"}, False, "at most 64 characters (found 65)"),
    ("metadata", {"k": "v" * 513}, False, "at most 512 characters (found 513)"),
]


@pytest.mark.parametrize("path, value, ok, words", LIMITS, ids=[f"{p}={str(v)[:30]}" for p, v, *_ in LIMITS])
def test_limits_at_both_edges(path, value, ok, words):
    manifest = set_at(make_suite(), path, value)
    if ok:
        Suite.from_dict(manifest)
        return
    errors = errors_of(manifest)
    assert len(errors) == 1
    ((loc, msg),) = errors.items()
    assert loc.startswith(re.sub(r"\.(\d+)", r"[\1]", path))
    assert words in msg


def test_limit_message_names_rule_and_found_value():
    errors = errors_of(set_at(make_suite(), "tasks.0.grader.timeout_seconds", 601))
    assert errors == {"tasks[0].grader.timeout_seconds": "must be at most 600 (found 601)"}


@pytest.mark.parametrize("task_id", ["a", "A.b-c_9", "x" * 200, "1.0"])
def test_task_id_charset_ok(task_id):
    assert Suite.from_dict(make_suite(make_task(id=task_id))).tasks[0].id == task_id


@pytest.mark.parametrize("task_id", ["", "a b", "a/b", "é", "a:b", "tab\t"])
def test_task_id_charset_rejected(task_id):
    assert "tasks[0].id" in errors_of(make_suite(make_task(id=task_id)))


@pytest.mark.parametrize("metric_id, ok", [("acc.v1-x_2", True), ("acc v1", False), ("", False)])
def test_metric_id_charset(metric_id, ok):
    manifest = make_suite(make_task(metrics=[{"id": metric_id}]))
    if ok:
        assert Suite.from_dict(manifest).tasks[0].metrics[0].id == metric_id
    else:
        assert "tasks[0].metrics[0].id" in errors_of(manifest)


def test_grader_metric_id_charset():
    errors = errors_of(make_suite(make_task(grader={"source": GRADE, "metric_id": "a b"})))
    assert "letters, digits" in errors["tasks[0].grader.metric_id"]


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_every_task_type_accepted(task_type):
    assert Suite.from_dict(make_suite(make_task(type=task_type))).tasks[0].type == task_type


def test_metadata_values_are_json_scalars():
    suite = Suite.from_dict(make_suite(metadata={"s": "x", "i": 1, "f": 2.5, "b": False, "n": None}))
    assert suite.metadata == {"s": "x", "i": 1, "f": 2.5, "b": False, "n": None}
    errors = errors_of(make_suite(metadata={"tags": ["a"], "obj": {"a": 1}}))
    assert set(errors) == {"metadata.tags", "metadata.obj"}
    assert "string, number, boolean or null" in errors["metadata.tags"]


# --- unknown keys and many errors at once -----------------------------------------------------


@pytest.mark.parametrize(
    "manifest, loc, suggestion",
    [
        (make_suite(make_task(promt_template="x")), "tasks[0].promt_template", "prompt_template"),
        ({"task": [make_task()]}, "task", "tasks"),
        (make_suite(make_task(grader={"source": GRADE, "timeout": 5})), "tasks[0].grader.timeout", "timeout_seconds"),
        (make_suite(make_task(dataset={"path": "org/ds", "spilt": "test"})), "tasks[0].dataset.spilt", "split"),
        (make_suite(make_task(fewshot={"count": 1, "seperator": "-"})), "tasks[0].fewshot.seperator", "separator"),
        (make_suite(make_task(output_extraction={"type": "regex", "pattern": "a", "flag": "i"})), "tasks[0].output_extraction.flag", "flags"),
        (make_suite(make_task(metrics=[{"id": "a", "agregation": "mean"}])), "tasks[0].metrics[0].agregation", "aggregation"),
        (make_suite(make_task(preprocess={"source": "x", "contrct": "row"})), "tasks[0].preprocess.contrct", "contract"),
        (make_suite(make_task(numfewshot=1)), "tasks[0].numfewshot", "num_fewshot"),
    ],
)
def test_unknown_key_suggests_the_intended_one(manifest, loc, suggestion):
    errors = errors_of(manifest)
    assert errors[loc] == f"unknown field; did you mean {suggestion}?"


def test_unknown_key_without_close_match_lists_the_fields():
    errors = errors_of(make_suite(make_task(zzz=1)))
    assert errors["tasks[0].zzz"].startswith("unknown field; expected one of: id, name, type")


def test_unknown_key_on_a_file_dataset():
    errors = errors_of(make_suite(make_task(dataset={"file_id": "f", "path": "x.jsonl"})))
    assert errors == {"tasks[0].dataset.path": "unknown field; a dataset has either file_id or path, not both"}


def test_a_local_file_may_name_its_encoding_and_an_unknown_one_is_a_manifest_error():
    suite = Suite.from_dict(make_suite(make_task(dataset={"path": "x.csv", "encoding": "latin-1"})))
    assert suite.tasks[0].dataset.encoding == "latin-1"
    assert suite.to_dict()["tasks"][0]["dataset"] == {"path": "x.csv", "encoding": "latin-1"}
    plain = Suite.from_dict(make_suite(make_task(dataset={"path": "x.csv"})))
    assert "encoding" not in plain.to_dict()["tasks"][0]["dataset"]  # unset: the version stays as before
    errors = errors_of(make_suite(make_task(dataset={"path": "x.csv", "encoding": "latin-9x"})))
    assert errors == {"tasks[0].dataset.encoding": "unknown encoding 'latin-9x' (e.g. utf-8, latin-1, cp1252, utf-16)"}
    errors = errors_of(make_suite(make_task(dataset={"path": "x.csv", "encodng": "latin-1"})))
    assert "tasks[0].dataset.encodng" in errors and "encoding" in errors["tasks[0].dataset.encodng"]
    schema = Suite.json_schema()["$defs"]["LocalDataset"]["properties"]["encoding"]
    assert "evalnb extension" in schema["description"]


def test_every_problem_is_reported_at_once():
    manifest = {
        "schema_version": "1999",
        "tasks": [
            make_task(id="a", promt_template="x", grader={"timeout_seconds": 0}),
            make_task(id="a", type="essay", num_fewshot=2, fewshot={"count": 3}),
            make_task(id="b", metrics=[{"id": "m"}, {"id": "m"}], dataset={"path": "json"}),
            make_task(id="c c", output_extraction={"type": "regex", "pattern": "("}),
        ],
        "metadata": {"x" * 65: 1},
    }
    with pytest.raises(ManifestError) as info:
        Suite.from_dict(manifest)
    locs = [e["loc"] for e in info.value.errors]
    expected = {
        "schema_version",
        "tasks[0].promt_template",
        "tasks[0].grader.timeout_seconds",
        "tasks[0].grader",
        "tasks[1].type",
        "tasks[1].num_fewshot",
        "tasks[1].id",
        "tasks[2].metrics[1].id",
        "tasks[2].dataset.data_files",
        "tasks[3].id",
        "tasks[3].output_extraction.pattern",
        "metadata." + "x" * 65,
    }
    assert set(locs) == expected and len(locs) == len(expected)
    assert f"invalid manifest ({len(expected)} problems)" in str(info.value)


def test_a_bad_dataset_gives_one_clear_error_not_union_branches():
    errors = errors_of(make_suite(make_task(dataset={"path": "org/ds", "max_rows": "ten"})))
    assert errors == {"tasks[0].dataset.max_rows": 'must be an integer (found "ten")'}
    errors = errors_of(make_suite(make_task(dataset="data/x.jsonl")))
    assert list(errors) == ["tasks[0].dataset"]
    assert "file_id" in errors["tasks[0].dataset"] and '(found "data/x.jsonl")' in errors["tasks[0].dataset"]


@pytest.mark.parametrize("dataset", [{}, {"format": 1, "file": "x"}, {"name_": "x"}, None, [], 3])
def test_dataset_without_a_recognisable_form(dataset):
    errors = errors_of(make_suite(make_task(dataset=dataset)))
    assert list(errors) == ["tasks[0].dataset"] or all(loc.startswith("tasks[0].dataset") for loc in errors)


def test_duplicate_task_ids():
    errors = errors_of(make_suite(make_task(id="a"), make_task(id="b"), make_task(id="a")))
    assert errors == {"tasks[2].id": "duplicate task id 'a' (first used at tasks[0])"}


def test_duplicate_metric_ids():
    errors = errors_of(make_suite(make_task(metrics=[{"id": "acc"}, {"id": "f1"}, {"id": "acc"}])))
    assert errors == {"tasks[0].metrics[2].id": "duplicate metric id 'acc' (first used at metrics[0])"}


def test_same_metric_id_in_two_tasks_is_fine():
    Suite.from_dict(make_suite(make_task(id="a", metrics=[{"id": "acc"}]), make_task(id="b", metrics=[{"id": "acc"}])))


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("prompt_template", "", "must not be empty"),
        ("prompt_template", 5, "must be a string (found 5)"),
        ("choices", "A,B", "must be a list"),
        ("choices", ["A", 1], "must be a string"),
        ("grader", "python", "must be an object"),
        ("metrics", {"id": "a"}, "must be a list"),
        ("num_fewshot", "3", 'must be an integer (found "3")'),
        ("num_fewshot", True, "must be an integer"),
    ],
)
def test_field_type_errors(field, value, words):
    errors = errors_of(make_suite(make_task(**{field: value})))
    assert any(words in msg for msg in errors.values()), errors


def test_required_task_fields():
    errors = errors_of({"tasks": [{}]})
    for field in ("id", "dataset", "prompt_template", "grader"):
        assert errors[f"tasks[0].{field}"] == "required field is missing"
    assert "tasks[0].type" not in errors  # a label: defaults to "custom" (tests/suite/test_inline_rows.py)


# --- datasets ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dataset, kind",
    [
        ({"file_id": "file-abc123"}, FileDataset),
        ({"file_id": "f", "format": "csv"}, FileDataset),
        ({"path": "data/x.jsonl"}, LocalDataset),
        ({"path": "data/X.CSV"}, LocalDataset),
        ({"path": "/abs/rows.json"}, LocalDataset),
        ({"path": "rows.ndjson"}, LocalDataset),
        ({"path": "data/rows.txt", "format": "jsonl"}, LocalDataset),
        ({"path": "facebook/belebele"}, HuggingFaceDataset),
        ({"path": "data/local_hf_folder"}, HuggingFaceDataset),
        ({"path": "data/x.jsonl", "split": "train"}, HuggingFaceDataset),
        ({"source": "huggingface", "path": "data/x.jsonl"}, HuggingFaceDataset),
        ({"path": "json", "data_files": "https://example.com/x.jsonl"}, HuggingFaceDataset),
    ],
)
def test_dataset_discrimination(dataset, kind):
    task = Suite.from_dict(make_suite(make_task(dataset=dataset))).tasks[0]
    assert type(task.dataset) is kind
    assert dataset_kind(dataset) == {FileDataset: "file", LocalDataset: "local", HuggingFaceDataset: "huggingface"}[kind]
    assert dataset_kind(task.dataset) == dataset_kind(dataset)


def test_dataset_kind_of_non_datasets():
    assert dataset_kind({}) is None
    assert dataset_kind("x.jsonl") is None
    assert dataset_kind(None) is None


@pytest.mark.parametrize("fmt, ok", [("jsonl", True), ("csv", True), ("parquet", False), ("JSONL", False)])
def test_dataset_format(fmt, ok):
    manifest = make_suite(make_task(dataset={"file_id": "f", "format": fmt}))
    if ok:
        assert Suite.from_dict(manifest).tasks[0].dataset.format == fmt
    else:
        assert "'jsonl' or 'csv'" in errors_of(manifest)["tasks[0].dataset.format"]


def test_hf_source_must_be_huggingface():
    errors = errors_of(make_suite(make_task(dataset={"source": "kaggle", "path": "x/y"})))
    assert errors == {"tasks[0].dataset.source": "must be 'huggingface' (found \"kaggle\")"}


def test_split_defaults_test_for_task_and_train_for_fewshot():
    task = Suite.from_dict(
        make_suite(make_task(dataset={"path": "org/ds"}, fewshot={"count": 1, "dataset": {"path": "org/ds"}}))
    ).tasks[0]
    assert task.dataset.split == "test"
    assert task.fewshot.dataset.split == "train"
    explicit = Suite.from_dict(
        make_suite(make_task(dataset={"path": "org/ds", "split": "dev"}, fewshot={"count": 1, "dataset": {"path": "org/ds", "split": "validation"}}))
    ).tasks[0]
    assert explicit.dataset.split == "dev" and explicit.fewshot.dataset.split == "validation"
    assert HuggingFaceDataset(path="org/ds").split is None  # built in Python: the loader decides


@pytest.mark.parametrize(
    "dataset",
    [
        {"path": "json", "data_files": "https://example.com/x.jsonl"},
        {"path": "csv", "data_files": ["http://example.com/a.csv", "https://example.com/b.csv"]},
        {"path": "json", "data_files": {"train": "https://example.com/t.jsonl", "test": ["https://example.com/a.jsonl"]}},
        {"path": "json", "dataset_kwargs": {"data_files": {"validation": "https://example.com/v.jsonl"}}},
        {"path": "org/ds", "data_files": {"train": "data/*.parquet"}},  # repo-relative patterns
    ],
)
def test_data_files_accepted(dataset):
    Suite.from_dict(make_suite(make_task(dataset=dataset)))


@pytest.mark.parametrize(
    "dataset, loc, words",
    [
        ({"path": "json"}, "tasks[0].dataset.data_files", "required when path is 'json'"),
        ({"path": "csv", "dataset_kwargs": {}}, "tasks[0].dataset.data_files", "required when path is 'csv'"),
        ({"path": "json", "data_files": "file:///etc/passwd"}, "tasks[0].dataset.data_files", "http(s) URLs"),
        ({"path": "json", "data_files": {"test": "data/t.jsonl"}}, "tasks[0].dataset.data_files", "http(s) URLs"),
        ({"path": "json", "data_files": "https://"}, "tasks[0].dataset.data_files", "http(s) URLs"),
        ({"path": "json", "dataset_kwargs": {"data_files": "ftp://e.com/x"}}, "tasks[0].dataset.dataset_kwargs.data_files", "http(s) URLs"),
        ({"path": "json", "dataset_kwargs": {"data_files": 5}}, "tasks[0].dataset.dataset_kwargs.data_files", "must be a URL"),
        ({"path": "json", "data_files": 5}, "tasks[0].dataset.data_files", "must be a URL, a list of URLs or a mapping"),
    ],
)
def test_data_files_rejected(dataset, loc, words):
    errors = errors_of(make_suite(make_task(dataset=dataset)))
    assert words in errors[loc]


# --- few-shot ---------------------------------------------------------------------------------


def test_num_fewshot_is_shorthand_for_fewshot_count():
    short = Suite.from_dict(make_suite(make_task(num_fewshot=5))).tasks[0]
    long = Suite.from_dict(make_suite(make_task(fewshot={"count": 5}))).tasks[0]
    assert short == long and short.fewshot.count == 5 and short.num_fewshot is None


def test_num_fewshot_fills_count_of_an_expanded_fewshot():
    task = Suite.from_dict(make_suite(make_task(num_fewshot=2, fewshot={"strategy": "random", "seed": 3}))).tasks[0]
    assert (task.fewshot.count, task.fewshot.strategy, task.fewshot.seed) == (2, "random", 3)


def test_num_fewshot_and_fewshot_count_may_agree():
    assert Suite.from_dict(make_suite(make_task(num_fewshot=2, fewshot={"count": 2}))).tasks[0].fewshot.count == 2


def test_num_fewshot_and_fewshot_count_must_not_disagree():
    errors = errors_of(make_suite(make_task(num_fewshot=2, fewshot={"count": 3})))
    assert errors == {"tasks[0].num_fewshot": "num_fewshot (2) and fewshot.count (3) disagree; give one of them"}


def test_num_fewshot_out_of_range_is_reported_at_num_fewshot():
    errors = errors_of(make_suite(make_task(num_fewshot=101)))
    assert errors == {"tasks[0].num_fewshot": "must be at most 100 (found 101)"}


def test_effective_fewshot_resolves_defaults():
    task = Suite.from_dict(make_suite(make_task(num_fewshot=2, target_template="{{a}}"))).tasks[0]
    spec = task.effective_fewshot
    assert spec.count == 2 and spec.dataset is None
    assert spec.prompt_template == "Q: {{q}}" and spec.target_template == "{{a}}"
    assert (spec.strategy, spec.seed, spec.separator, spec.example_template) == ("first", 0, "\n\n", "{{prompt}}\n{{target}}")
    assert task.fewshot.prompt_template is None  # the manifest itself is untouched


def test_effective_fewshot_keeps_own_templates():
    task = Suite.from_dict(
        make_suite(make_task(fewshot={"count": 1, "prompt_template": "P", "target_template": "", "separator": "##"}))
    ).tasks[0]
    spec = task.effective_fewshot
    assert (spec.prompt_template, spec.target_template, spec.separator) == ("P", "", "##")


@pytest.mark.parametrize("fields", [{}, {"num_fewshot": 0}, {"fewshot": {"count": 0, "strategy": "random"}}])
def test_effective_fewshot_none_without_examples(fields):
    assert Suite.from_dict(make_suite(make_task(**fields))).tasks[0].effective_fewshot is None


def test_fewshot_strategy_values():
    assert "'first' or 'random'" in errors_of(make_suite(make_task(fewshot={"count": 1, "strategy": "best"})))["tasks[0].fewshot.strategy"]


# --- preprocess and grader --------------------------------------------------------------------


@pytest.mark.parametrize("spec_key", ["grader", "preprocess"])
@pytest.mark.parametrize("code, found", [({}, "neither"), ({"source": "x", "file_id": "f"}, "both")])
def test_exactly_one_of_source_and_file_id(spec_key, code, found):
    errors = errors_of(make_suite(make_task(**{spec_key: code})))
    msg = errors[f"tasks[0].{spec_key}"]
    assert "exactly one of source" in msg and msg.endswith(f"found {found}")


def test_empty_source_is_not_code():
    errors = errors_of(make_suite(make_task(grader={"source": ""})))
    assert errors["tasks[0].grader.source"] == "must not be empty"


def test_preprocess_defaults():
    spec = Suite.from_dict(make_suite(make_task(preprocess={"source": "def transform(row): return row"}))).tasks[0].preprocess
    assert (spec.type, spec.contract, spec.timeout_seconds) == ("python", "row", 120)


@pytest.mark.parametrize("field, value", [("type", "javascript"), ("contract", "rows")])
def test_preprocess_vocabularies(field, value):
    assert f"tasks[0].preprocess.{field}" in errors_of(make_suite(make_task(preprocess={"source": "x", field: value})))


@pytest.mark.parametrize(
    "grader, execution, access",
    [
        ({"source": GRADE}, "per_sample", "none"),
        ({"contract": "batch", "source": "def grade_batch(samples):\n    return 1\n"}, "aggregate", "none"),
        ({"contract": "model_backed", "source": GRADE}, "per_sample", "mka1"),
        ({"contract": "model_backed", "source": "async def grade(s, i, ctx):\n    return 1\n"}, "per_sample", "mka1"),
        ({"contract": "model_backed", "source": "def grade_batch(samples, ctx):\n    return 1\n"}, "aggregate", "mka1"),
        ({"contract": "model_backed", "source": "def helper():\n    def grade(): pass\n"}, "aggregate", "mka1"),
        ({"contract": "model_backed", "file_id": "f"}, None, "mka1"),
        ({"contract": "model_backed", "file_id": "f", "execution": "aggregate", "model_access": "none"}, "aggregate", "none"),
        ({"contract": "sample", "source": GRADE, "execution": "aggregate", "model_access": "mka1"}, "aggregate", "mka1"),
    ],
)
def test_grader_effective_execution_and_model_access(grader, execution, access):
    spec = Suite.from_dict(make_suite(make_task(grader=grader))).tasks[0].grader
    assert spec.effective_execution == execution
    assert spec.effective_model_access == access
    assert spec.model_access == access  # filled in at validation


def test_grader_execution_for_unseen_code():
    spec = GraderSpec(contract="model_backed", file_id="f")
    assert spec.execution_for(GRADE) == "per_sample"
    assert spec.execution_for("def grade_batch(samples):\n    pass\n") == "aggregate"
    assert spec.execution_for("def grade(:\n") == "per_sample"  # syntax error: the line still says so


def test_grader_defaults():
    spec = Suite.from_dict(make_suite()).tasks[0].grader
    assert (spec.type, spec.contract, spec.metric_id, spec.timeout_seconds, spec.max_model_calls) == (
        "python",
        "sample",
        "score",
        120,
        64,
    )
    assert spec.execution is None


@pytest.mark.parametrize("field, value", [("type", "lua"), ("contract", "pairwise"), ("execution", "batch"), ("model_access", "openai")])
def test_grader_vocabularies(field, value):
    assert f"tasks[0].grader.{field}" in errors_of(make_suite(make_task(grader={"source": GRADE, field: value})))


# --- metrics ----------------------------------------------------------------------------------


def test_metric_defaults():
    (metric,) = Suite.from_dict(make_suite(make_task(metrics=[{"id": "accuracy"}]))).tasks[0].metrics
    assert metric == MetricSpec(id="accuracy", aggregation="mean", higher_is_better=True, description=None)


@pytest.mark.parametrize(
    "fields, expected",
    [
        ({}, ["score"]),
        ({"grader": {"source": GRADE, "metric_id": "em"}}, ["em"]),
        ({"metrics": [{"id": "a"}, {"id": "b"}]}, ["a", "b"]),
        ({"grader": {"contract": "batch", "source": "def grade_batch(s):\n    return 1\n"}}, []),
        ({"grader": {"contract": "model_backed", "file_id": "f"}}, ["score"]),
    ],
)
def test_effective_metrics(fields, expected):
    task = Suite.from_dict(make_suite(make_task(**fields))).tasks[0]
    assert [m.id for m in task.effective_metrics] == expected


# --- output extraction ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, expected",
    [
        ({"type": "none"}, {"type": "none"}),
        ({"type": "number"}, {"type": "number"}),
        ({"type": "take_first"}, {"type": "take_first", "lines": 1}),
        ({"type": "take_first", "lines": 3}, {"type": "take_first", "lines": 3}),
        ({"type": "regex", "pattern": "Answer:\\s*([A-D])", "group": 1, "flags": "i"}, {"type": "regex", "pattern": "Answer:\\s*([A-D])", "group": 1, "flags": "i"}),
        ({"type": "regex", "pattern": "\\d+"}, {"type": "regex", "pattern": "\\d+", "group": 0, "flags": ""}),
        ({"type": "regex_last", "pattern": "(?P<n>\\d+)", "group": "n", "flags": "xsmi"}, {"type": "regex_last", "pattern": "(?P<n>\\d+)", "group": "n", "flags": "imsx"}),
        ({"type": "regex", "pattern": "(a)(b)", "group": "2", "flags": "ii"}, {"type": "regex", "pattern": "(a)(b)", "group": "2", "flags": "i"}),
        ({"type": "label_set", "labels": ["yes", "no"]}, {"type": "label_set", "labels": ["yes", "no"], "case_sensitive": False}),
        ({"type": "label_set", "labels": ["A"], "case_sensitive": True}, {"type": "label_set", "labels": ["A"], "case_sensitive": True}),
    ],
)
def test_every_extraction_type(spec, expected):
    task = Suite.from_dict(make_suite(make_task(output_extraction=spec))).tasks[0]
    assert task.extraction.model_dump(exclude_none=True) == expected


def test_extraction_defaults_to_none():
    task = Suite.from_dict(make_suite()).tasks[0]
    assert task.extraction == OutputExtraction(type="none")


@pytest.mark.parametrize(
    "spec, loc, words",
    [
        ({"type": "none", "pattern": "x"}, "pattern", "not a parameter of type 'none' (it takes no parameters)"),
        ({"type": "number", "lines": 2}, "lines", "not a parameter of type 'number'"),
        ({"type": "take_first", "labels": ["a"]}, "labels", "(it takes lines)"),
        ({"type": "label_set", "labels": ["a"], "pattern": "a"}, "pattern", "it takes labels, case_sensitive"),
        ({"type": "regex", "pattern": "a", "case_sensitive": True}, "case_sensitive", "it takes pattern, group, flags"),
        ({"type": "regex"}, "pattern", "required for type 'regex'"),
        ({"type": "regex_last", "pattern": ""}, "pattern", "must not be empty"),
        ({"type": "regex", "pattern": "("}, "pattern", "invalid regex"),
        ({"type": "regex", "pattern": "a" * 1001}, "pattern", "1001 characters"),
        ({"type": "regex", "pattern": "a", "flags": "g"}, "flags", "i, m, s and x"),
        ({"type": "regex", "pattern": "a", "flags": "I"}, "flags", "i, m, s and x"),
        ({"type": "regex", "pattern": "(a)", "group": 2}, "group", "group 2 does not exist; the pattern has 1 group(s)"),
        ({"type": "regex", "pattern": "(a)", "group": "3"}, "group", "group 3 does not exist"),
        ({"type": "regex", "pattern": "(?P<x>a)", "group": "y"}, "group", "no group named 'y'"),
        ({"type": "regex", "pattern": "(a)", "group": -1}, "group", "must be a group number (>= 0) or a group name"),
        ({"type": "label_set"}, "labels", "required for type 'label_set'"),
        ({"type": "label_set", "labels": []}, "labels", "at least 1 item"),
        ({"type": "label_set", "labels": ["a", ""]}, "labels[1]", "must not be empty"),
        ({"type": "label_set", "labels": ["a"], "case_sensitive": "no"}, "case_sensitive", "true or false"),
        ({"type": "json"}, "type", "must be one of 'none', 'take_first'"),
    ],
)
def test_extraction_errors(spec, loc, words):
    errors = errors_of(make_suite(make_task(output_extraction=spec)))
    assert words in errors[f"tasks[0].output_extraction.{loc}"], errors


def test_regex_pattern_of_1000_characters_is_fine():
    Suite.from_dict(make_suite(make_task(output_extraction={"type": "regex", "pattern": "a" * 1000})))


# --- files ------------------------------------------------------------------------------------


def test_from_file_json_sets_base_dir_and_keeps_relative_paths():
    suite = Suite.from_file(FIXTURES / "full_suite.json")
    assert suite.base_dir == FIXTURES.resolve()
    fewshot_dataset = suite.task("sentiment.v2").fewshot.dataset
    assert fewshot_dataset.path == "data/sentiment_train.jsonl"
    assert (suite.base_dir / fewshot_dataset.path).is_file()
    assert suite == Suite.from_dict(full_manifest())  # base_dir is not part of the manifest
    assert suite.version == Suite.from_dict(full_manifest()).version


def test_from_file_yaml_equals_json_and_keeps_yaml_scalars_json_like():
    from_yaml = Suite.from_file(FIXTURES / "small_suite.yaml")
    from_json = Suite.from_file(str(FIXTURES / "small_suite.json"))
    assert from_yaml == from_json and from_yaml.version == from_json.version
    assert from_yaml.schema_version == "2026-05-27"  # an unquoted YAML date stays a string
    assert from_yaml.tasks[0].choices == ["yes", "no"]  # yes/no stay strings
    assert (from_yaml.base_dir / from_yaml.tasks[0].dataset.path).is_file()


def test_from_file_yml_suffix(tmp_path):
    (tmp_path / "suite.yml").write_text("tasks:\n  - id: t\n    type: qa\n    dataset: {path: rows.csv}\n    prompt_template: Q\n    grader: {file_id: g}\n    metadata: {flag: true, n: 2}\n")
    suite = Suite.from_file(tmp_path / "suite.yml")
    assert suite.base_dir == tmp_path.resolve()
    assert suite.tasks[0].metadata == {"flag": True, "n": 2}


def test_from_dict_base_dir():
    suite = Suite.from_dict(make_suite(), base_dir="/some/where")
    assert suite.base_dir == Path("/some/where")
    assert Suite.from_dict(make_suite()).base_dir is None
    assert Suite.from_dict(suite).base_dir == Path("/some/where")
    assert Suite.from_dict(suite, base_dir="/else").base_dir == Path("/else")
    assert suite.base_dir == Path("/some/where")  # the original is untouched


def test_from_file_bad_json_names_the_line(tmp_path):
    path = tmp_path / "suite.json"
    path.write_text('{\n  "tasks": [\n    {"id": "t",,}\n  ]\n}\n')
    with pytest.raises(ManifestError) as info:
        Suite.from_file(path)
    (error,) = info.value.errors
    assert "invalid JSON at line 3" in error["msg"] and str(path) in error["msg"]


def test_from_file_bad_yaml_names_the_line(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text("tasks:\n  - id: t\n    type: [qa\n")
    with pytest.raises(ManifestError) as info:
        Suite.from_file(path)
    assert re.search(r"invalid YAML at line \d+", info.value.errors[0]["msg"])


def test_from_file_validation_errors(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text("tasks:\n  - id: t\n    type: qa\n    promt_template: x\n")
    errors = errors_of_file(path)
    assert errors["tasks[0].promt_template"] == "unknown field; did you mean prompt_template?"


def errors_of_file(path: Path) -> dict[str, str]:
    with pytest.raises(ManifestError) as info:
        Suite.from_file(path)
    return {e["loc"]: e["msg"] for e in info.value.errors}


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "just text\n"])
def test_from_file_yaml_that_is_not_an_object(tmp_path, text):
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    with pytest.raises(ManifestError, match="must be an object"):
        Suite.from_file(path)


def test_from_file_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        Suite.from_file(tmp_path / "nope.json")


def test_from_file_unsupported_suffix(tmp_path):
    path = tmp_path / "suite.toml"
    path.write_text("x = 1")
    with pytest.raises(ManifestError, match="unsupported manifest file type '.toml'"):
        Suite.from_file(path)


# --- the rest of the surface ------------------------------------------------------------------


def test_task_lookup():
    suite = Suite.from_dict(make_suite(make_task(id="a"), make_task(id="b")))
    assert suite.task("b").id == "b"
    with pytest.raises(KeyError, match="'zzz'.*a, b"):
        suite.task("zzz")


def test_json_schema_describes_the_manifest():
    schema = Suite.json_schema()
    assert isinstance(schema, dict)
    json.dumps(schema)
    task_props = schema["$defs"]["Task"]["properties"]
    for field in ("id", "type", "dataset", "prompt_template", "target_template", "choices", "fewshot", "num_fewshot", "preprocess", "output_extraction", "metrics", "grader", "metadata"):
        assert field in task_props
    assert set(schema["$defs"]["Task"]["required"]) == {"id", "dataset", "prompt_template", "grader"}  # type: a label, "custom"
    assert schema["properties"]["tasks"]["maxItems"] == 100
    assert schema["$defs"]["GraderSpec"]["properties"]["timeout_seconds"]["maximum"] == 600


def test_models_are_frozen():
    suite = Suite.from_dict(make_suite())
    with pytest.raises(ValidationError):
        suite.tasks[0].prompt_template = "changed"
    with pytest.raises(ValidationError):
        suite.schema_version = "x"


def test_models_can_be_built_in_python():
    task = Task(
        id="t",
        type="qa",
        dataset=LocalDataset(path="x.jsonl"),
        prompt_template="Q",
        grader=GraderSpec(source=GRADE),
        num_fewshot=2,
    )
    assert task.fewshot.count == 2 and task.grader.model_access == "none"
    suite = Suite.from_dict({"tasks": [task]})
    assert suite.tasks[0] == task
    with_spec = Task(
        id="t",
        type="qa",
        dataset=HuggingFaceDataset(path="org/ds"),
        prompt_template="Q",
        grader=GraderSpec(contract="model_backed", file_id="g"),
        fewshot=FewshotSpec(strategy="random"),
        num_fewshot=4,
    )
    assert (with_spec.fewshot.count, with_spec.fewshot.strategy) == (4, "random")
    assert with_spec.dataset.split is None and with_spec.grader.model_access == "mka1"
    with pytest.raises(ValidationError):
        Task(id="t", type="qa", dataset={"path": "x.jsonl"}, prompt_template="Q", grader={"source": "x", "file_id": "y"})


def test_items_delegates_to_prepare(tmp_path):
    pytest.importorskip("evalnb.data.loaders")
    (tmp_path / "rows.jsonl").write_text('{"q": "2+2", "a": "4"}\n{"q": "3+3", "a": "6"}\n')
    suite = Suite.from_dict(make_suite(make_task(dataset={"path": "rows.jsonl"}, target_template="{{a}}")), base_dir=tmp_path)
    items = suite.items("t", limit=1)
    assert [(i.prompt, i.target) for i in items] == [("Q: 2+2", "4")]


# ---- data_files hosts refused before any row is loaded ---------------------------------------
@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/x.jsonl", "http://2130706433/x.jsonl", "http://0x7f.1/x.jsonl",
        "http://localhost:8000/x.jsonl", "http://api.localhost/x.jsonl", "https://10.1.2.3/x.jsonl",
        "http://169.254.169.254/latest/meta-data", "http://[::1]/x", "http://[::ffff:192.168.0.1]/x",
        "http://127。0。0。1/x", "http://0/x", "http://[fe80::1]/x",
    ],
)
def test_a_data_files_url_on_an_unsafe_host_is_refused_naming_the_field(url):
    dataset = {"path": "json", "data_files": {"train": "https://hub.example/ok.jsonl", "test": url}}
    errors = errors_of(make_suite(make_task(dataset=dataset)))
    assert list(errors) == ["tasks[0].dataset.data_files.test"], errors
    assert "only public hosts are allowed" in errors["tasks[0].dataset.data_files.test"]


def test_unsafe_hosts_are_found_in_lists_and_in_dataset_kwargs():
    dataset = {"path": "csv", "dataset_kwargs": {"data_files": ["https://hub.example/a.csv", "http://10.0.0.1/b.csv"]}}
    errors = errors_of(make_suite(make_task(dataset=dataset)))
    assert list(errors) == ["tasks[0].dataset.dataset_kwargs.data_files[1]"], errors


def test_a_public_host_name_passes_the_schema_it_is_resolved_at_load():
    dataset = {"path": "json", "data_files": "https://huggingface.example/d/x.jsonl"}
    suite = Suite.from_dict(make_suite(make_task(dataset=dataset)))
    assert suite.tasks[0].dataset.data_files == "https://huggingface.example/d/x.jsonl"


def test_a_builtin_grader_is_named_in_yaml_and_expands_to_its_source(tmp_path):
    import evalnb.graders as graders

    path = tmp_path / "suite.yaml"
    path.write_text("tasks:\n  - id: t\n    type: qa\n    dataset: {path: x.jsonl}\n    prompt_template: 'Q: {{q}}'\n"
                    "    metrics: [{id: f1}]\n    grader: {builtin: token_f1, timeout_seconds: 30}\n")
    suite = Suite.from_file(path)
    grader = suite.tasks[0].grader
    assert (grader.contract, grader.metric_id, grader.timeout_seconds) == ("sample", "f1", 30)
    assert grader.source == graders.source("token_f1")
    # the canonical form is the pasted grader: same version, and nothing a gateway would not know
    pasted = Suite.from_dict(make_suite(make_task(dataset={"path": "x.jsonl"}, metrics=[{"id": "f1"}],
                                                  grader=graders.spec("token_f1", timeout_seconds=30))))
    assert suite.version == pasted.version
    assert "builtin" not in suite.to_dict()["tasks"][0]["grader"]
    judge = Suite.from_dict(make_suite(make_task(grader={"builtin": "llm_judge"}))).tasks[0].grader
    assert (judge.contract, judge.effective_model_access, judge.metric_id) == ("model_backed", "mka1", "judge_score")
    schema = Suite.json_schema()["$defs"]["GraderSpec"]["properties"]["builtin"]
    assert "token_f1" in json.dumps(schema) and "evalnb extension" in schema["description"]


def test_a_builtin_grader_that_cannot_be_expanded_is_a_manifest_error_naming_why():
    assert errors_of(make_suite(make_task(grader={"builtin": "token_f2"}))) == {
        "tasks[0].grader.builtin": "must be one of 'embedding_similarity', 'exact_match', 'llm_judge', 'macro_f1', "
                                   "'multiple_choice', 'normalized_exact_match', 'numeric_tolerance' or 'token_f1' "
                                   '(found "token_f2")'}
    assert errors_of(make_suite(make_task(grader={"builtin": "exact_match", "source": GRADE}))) == {
        "tasks[0].grader.builtin": "builtin names the grader's code, and so does source; give one"}
    (message,) = errors_of(make_suite(make_task(grader={"builtin": "llm_judge", "metric_id": "x"}))).values()
    assert message.startswith("builtin 'llm_judge': this grader's source returns the score 'judge_score'")
    assert "evalnb.graders.source('llm_judge')" in message


def test_a_suites_repr_is_one_short_line_not_a_pydantic_dump():
    suite = Suite.from_dict(make_suite(make_task(), make_task(id="u", type="math")))
    text = repr(suite)
    assert text == f"<evalnb.Suite {suite.version[:12]}: 2 tasks: t (qa), u (math)>"
    assert "GraderSpec" not in text and GRADE not in text
    many = Suite.from_dict(make_suite(*[make_task(id=f"t{i}") for i in range(12)]))
    assert repr(many).endswith("t7 (qa), ... (4 more)>") and len(repr(many)) < 200
