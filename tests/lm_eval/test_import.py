"""Importing lm-eval tasks: YAML paths with include and !function, groups and tags, the CLI,
and clear errors for what does not map."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalnb import Suite
from evalnb.cli import main
from evalnb.errors import LmEvalImportError, ManifestError

pytestmark = pytest.mark.usefixtures("evalnb_home")


def _write_task(folder: Path) -> Path:
    """A custom task: a template file included by the task file, a !function hook in utils.py."""
    (folder / "data").mkdir(parents=True)
    rows = [{"q": f"What is {i} + {i}?", "a": str(2 * i), "options": [str(2 * i), str(i)], "k": i % 2}
            for i in range(4)]
    (folder / "data" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "utils.py").write_text(
        "def process_docs(dataset):\n"
        "    return dataset.map(lambda d: {'question': d['q'].upper()})\n"
    )
    (folder / "_template.yaml").write_text(
        "output_type: multiple_choice\n"
        "test_split: test\n"
        "process_docs: !function utils.process_docs\n"
        "doc_to_text: \"{{question}}\\nAnswer:\"\n"
        "doc_to_choice: \"{{options}}\"\n"
        "doc_to_target: 0\n"
        "description: \"Sums.\\n\\n\"\n"
    )
    task = folder / "my_sums.yaml"
    task.write_text(f"include: _template.yaml\ntask: my_sums\ndataset_path: {folder / 'data'}\n")
    return task


def test_a_task_yaml_with_include_and_a_function_hook_imports_and_renders(tmp_path: Path) -> None:
    suite = Suite.from_lm_eval(_write_task(tmp_path / "t"))
    task = suite.task("my_sums")
    assert task.type == "multiple_choice" and task.description == "{{lm_eval.description}}"
    assert "dataset.map(lambda d" in task.preprocess.source
    items = suite.items("my_sums")
    assert items[1].prompt == "Sums.\n\nWHAT IS 1 + 1?\nAnswer:"
    assert items[1].continuations == (" 2", " 1") and items[1].target == "0"


def test_the_cli_writes_a_manifest_that_loads_back_equal(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _write_task(tmp_path / "t")
    out = tmp_path / "suite.yaml"
    assert main(["import-lm-eval", str(path), "-o", str(out), "--num-fewshot", "0"]) == 0
    assert "1 task (my_sums)" in capsys.readouterr().out
    loaded, imported = Suite.from_file(out), Suite.from_lm_eval(path, num_fewshot=0)
    # the data folder is written relative to the manifest (a manifest file names only its own files)
    assert loaded.task("my_sums").dataset.path == "t/data"
    assert [i.prompt for i in loaded.items("my_sums")] == [i.prompt for i in imported.items("my_sums")]
    assert [i.target for i in loaded.items("my_sums")] == [i.target for i in imported.items("my_sums")]
    assert main(["import-lm-eval", str(path), "-o", str(tmp_path / "suite.json")]) == 0
    assert Suite.from_file(tmp_path / "suite.json") == Suite.from_file(out)
    # data outside the manifest's folder stays absolute, with a note on how to load it
    elsewhere = tmp_path / "elsewhere" / "suite.yaml"
    elsewhere.parent.mkdir()
    assert main(["import-lm-eval", str(path), "-o", str(elsewhere)]) == 0
    assert "--allow-paths-outside" in capsys.readouterr().err
    with pytest.raises(ManifestError, match="allow_paths_outside"):
        Suite.from_file(elsewhere)
    assert Suite.from_file(elsewhere, allow_paths_outside=True).items("my_sums")[1].prompt == imported.items("my_sums")[1].prompt


def test_what_does_not_map_is_a_clear_error_naming_task_and_field(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    base = _write_task(folder)
    cases = {
        "fewshot_config:\n  sampler: balanced\nnum_fewshot: 1\n": "fewshot_config.sampler 'balanced'",
        "metric_list:\n  - metric: bleu\n": "metric 'bleu' is not supported",
        "use_prompt: promptsource:x\n": "use_prompt",
        "output_type: weird\n": "output_type 'weird'",
    }
    for extra, words in cases.items():
        bad = folder / "bad.yaml"
        bad.write_text(base.read_text() + extra)
        with pytest.raises(LmEvalImportError, match="my_sums") as info:
            Suite.from_lm_eval(bad)
        assert words in str(info.value)
    with pytest.raises(LmEvalImportError, match="not found"):
        Suite.from_lm_eval(folder / "missing.yaml")
    (folder / "hook.yaml").write_text("task: x\ndataset_path: d\ntest_split: t\nprocess_docs: !function nope.f\n")
    with pytest.raises(LmEvalImportError, match="nope.py not found"):
        Suite.from_lm_eval(folder / "hook.yaml")


def test_registry_names_tags_and_groups_expand_to_their_tasks() -> None:
    suite = Suite.from_lm_eval(["ai2_arc", "boolq"])  # a tag (two tasks) and a task
    assert [t.id for t in suite.tasks] == ["arc_challenge", "arc_easy", "boolq"]
    mmlu = Suite.from_lm_eval("mmlu")  # a group of groups
    assert len(mmlu.tasks) == 57 and mmlu.task("mmlu_anatomy").fewshot is None
    assert Suite.from_lm_eval("mmlu_anatomy", num_fewshot=5).task("mmlu_anatomy").fewshot.strategy == "first"
    with pytest.raises(LmEvalImportError, match="not an lm-eval task"):
        Suite.from_lm_eval("no_such_task_anywhere")
    gsm8k = Suite.from_lm_eval("gsm8k").task("gsm8k")
    assert [m.id for m in gsm8k.metrics] == ["exact_match.strict-match", "exact_match.flexible-extract"]
    assert gsm8k.fewshot.count == 5 and gsm8k.fewshot.strategy == "random" and gsm8k.fewshot.seed == 1234


def test_the_extensions_are_in_the_json_schema_and_checked() -> None:
    from evalnb.errors import ManifestError

    schema = json.dumps(Suite.json_schema())
    assert '"loglikelihood"' in schema and '"description"' in schema and "LoglikelihoodSpec" in schema
    task = {"id": "t", "type": "multiple_choice", "dataset": {"path": "d.jsonl"}, "prompt_template": "{{q}}",
            "grader": {"type": "python", "source": "def grade(s, i): return 1"}}
    plain = Suite.from_dict({"tasks": [task]})
    assert "loglikelihood" not in plain.to_dict()["tasks"][0]  # a gateway manifest stays as it was
    with pytest.raises(ManifestError, match="continuations"):
        Suite.from_dict({"tasks": [{**task, "loglikelihood": {"type": "multiple_choice"}}]})
    with_choices = Suite.from_dict({"tasks": [{**task, "choices": ["yes", "no"], "loglikelihood": {}}]})
    assert with_choices.tasks[0].loglikelihood.delimiter == " "


def test_items_of_a_task_with_static_choices_get_delimited_continuations(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"q": "Is it?", "a": "1"}\n')
    suite = Suite.from_dict({"tasks": [{
        "id": "t", "type": "multiple_choice", "dataset": {"path": "d.jsonl"}, "prompt_template": "{{q}}\nAnswer:",
        "target_template": "{{a}}", "description": "Yes or no.\n\n", "choices": ["yes", "no"],
        "loglikelihood": {"delimiter": " "}, "grader": {"type": "python", "source": "def grade(s, i): return 1"}}]},
        base_dir=tmp_path)
    (item,) = suite.items("t")
    assert item.prompt == "Yes or no.\n\nIs it?\nAnswer:" and item.question == "Is it?\nAnswer:"
    assert item.continuations == (" yes", " no") and item.as_grader_item()["continuations"] == [" yes", " no"]


def test_two_tasks_with_their_own_utils_py_keep_their_own_hooks(tmp_path: Path) -> None:
    """One sandbox worker runs both tasks' preprocessors: each must get its own utils module."""
    first = _write_task(tmp_path / "a")
    second = _write_task(tmp_path / "b")
    (tmp_path / "b" / "utils.py").write_text(
        "def process_docs(dataset):\n"
        "    return dataset.map(lambda d: {'question': d['q'].lower() + '!'})\n"
    )
    second.write_text(second.read_text().replace("task: my_sums", "task: my_sums_b"))
    suite = Suite.from_lm_eval([first, second])
    assert suite.items("my_sums")[1].prompt == "Sums.\n\nWHAT IS 1 + 1?\nAnswer:"
    assert suite.items("my_sums_b")[1].prompt == "Sums.\n\nwhat is 1 + 1?!\nAnswer:"
    assert suite.items("my_sums")[2].prompt == "Sums.\n\nWHAT IS 2 + 2?\nAnswer:"


def test_hf_scheme_data_files_become_https_urls() -> None:
    task = Suite.from_lm_eval("arithmetic_2da").task("arithmetic_2da")
    files = task.dataset.dataset_kwargs["data_files"]
    assert "https://huggingface.co/datasets/EleutherAI/arithmetic/resolve/main/data/two_digit_addition.jsonl" in json.dumps(files)
    assert task.loglikelihood.type == "loglikelihood" and [m.id for m in task.metrics] == ["acc"]
