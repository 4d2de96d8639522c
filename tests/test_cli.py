"""The `evalnb` command line: validate, preview, run, runs, show, export, exit codes.

Commands run in-process through `evalnb.cli.main` (capsys reads what they print); runs go to
a real `LocalModelServer` on 127.0.0.1 whose responder plants known right and wrong answers,
so the printed metrics are exact. One subprocess test runs the installed console script.
"""

from __future__ import annotations

import json
import math
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import evalnb
from evalnb import graders
from evalnb.cli import main
from evalnb.testing import Fault, LocalModelServer

QUESTIONS = {"1+1": "2", "2+2": "4", "3+3": "6", "4+4": "8", "5+5": "10"}
# What each model answers wrong (everything else it answers right).
WRONG = {"good": {"3+3"}, "bad": {"2+2", "3+3", "4+4", "5+5"}, "flaky": set()}


def _responder(body: dict, path: str):
    """Answer the last `Q: ...` of the prompt: right, or planted wrong, or a 400 for flaky 4+4."""
    prompt = body["input"] if path == "/v1/responses" else body["messages"][-1]["content"]
    question = re.findall(r"Q: (.+)\nA:", prompt)[-1]
    model = body["model"]
    if model == "flaky" and question == "4+4":
        return Fault(status=400)
    return "wrong" if question in WRONG.get(model, ()) else QUESTIONS[question]


def _suite_dict() -> dict:
    return {
        "schema_version": "2026-05-27",
        "tasks": [
            {
                "id": "arith",
                "type": "qa",
                "dataset": {"path": "data/arith.jsonl"},
                "prompt_template": "Q: {{q}}\nA:",
                "target_template": "{{a}}",
                "num_fewshot": 1,
                "grader": graders.spec("exact_match"),
            },
            {
                "id": "echo",
                "type": "classification",
                "dataset": {"path": "data/arith.jsonl"},
                "prompt_template": "Q: {{q}}\nA:",
                "target_template": "{{a}}",
                "choices": ["yes", "no"],
                "grader": graders.spec("exact_match"),
            },
        ],
    }


def _write_suite(folder: Path, manifest: dict | None = None, name: str = "suite.json") -> Path:
    (folder / "data").mkdir(parents=True, exist_ok=True)
    rows = [{"q": q, "a": a} for q, a in QUESTIONS.items()]
    (folder / "data" / "arith.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = folder / name
    path.write_text(json.dumps(manifest if manifest is not None else _suite_dict()))
    return path


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A fresh evalnb home, no OpenAI key, a wide terminal."""
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("COLUMNS", "250")
    return tmp_path


@pytest.fixture
def suite_file(env) -> Path:
    return _write_suite(env)


@pytest.fixture
def server():
    with LocalModelServer(_responder) as s:
        yield s


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _run_id(out: str) -> str:
    match = re.search(r"run_id: (eval_run_[0-9a-f]{32})", out)
    assert match, out
    return match.group(1)


def _metric_line(out: str, task: str, model: str) -> str:
    lines = [ln for ln in out.splitlines() if ln.split()[:3] == [task, model, "exact_match"]]
    assert len(lines) == 1, out
    return lines[0]


# ---- entry points ---------------------------------------------------------------------------


def test_console_script_help_starts_without_pandas(tmp_path):
    script = Path(sys.executable).with_name("evalnb")
    cmd = [str(script), "--help"] if script.exists() else [sys.executable, "-m", "evalnb", "--help"]
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for command in ("validate", "preview", "run", "runs", "show", "export"):
        assert command in proc.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "evalnb.cli" in imported  # the import-time report works, so the next check means something
    assert not {m for m in imported if m.split(".")[0] in ("pandas", "numpy", "datasets", "plotly", "ipywidgets")}


def test_python_dash_m_evalnb_runs_the_cli(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["evalnb", "--version"])
    with pytest.raises(SystemExit) as exc:
        runpy.run_module("evalnb", run_name="__main__")
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"evalnb {evalnb.__version__}"


@pytest.mark.parametrize(
    "args",
    [[], ["validate"], ["bogus"], ["preview", "x.json", "--index", "-1"], ["preview", "x.json", "--limit", "0"],
     ["run", "x.json"], ["run", "x.json", "--model", "m", "--concurrency", "0"],
     ["run", "x.json", "--model", "m", "--api", "completion"], ["run", "x.json", "--model", "m", "--generation", "{"],
     ["run", "x.json", "--model", "m", "--generation", "[1, 2]"], ["export", "r", "--format", "xlsx"]],
)
def test_usage_errors_exit_2(args, capsys):
    code, out, err = _run(capsys, *args)
    assert code == 2
    assert "usage:" in err


# ---- validate -------------------------------------------------------------------------------


def test_validate_prints_a_one_line_summary(suite_file, capsys):
    code, out, err = _run(capsys, "validate", suite_file)
    assert code == 0 and err == ""
    version = evalnb.Suite.from_file(suite_file).version
    assert out.count("\n") == 1
    assert version[:12] in out and version[:13] not in out
    assert "arith (qa, local dataset)" in out and "echo (classification, local dataset)" in out


def test_validate_schema_only_reads_yaml_with_a_huggingface_dataset_without_loading_it(env, capsys):
    path = env / "s.yaml"
    path.write_text(
        "tasks:\n  - id: hf\n    type: multiple_choice\n    dataset: {path: facebook/belebele, name: eng_Latn}\n"
        "    prompt_template: '{{question}}'\n    grader: {source: 'def grade(s, i): return 1'}\n"
    )
    code, out, _ = _run(capsys, "validate", "--schema-only", path)  # no rows read: no network
    assert code == 0
    assert "valid (schema only)" in out and "1 task: hf (multiple_choice, huggingface dataset)" in out


def test_validate_catches_a_misspelt_field_a_broken_grader_and_a_missing_file(env, capsys):
    manifest = _suite_dict()
    manifest["tasks"][0]["prompt_template"] = "Q: {{question}}\nA:"
    manifest["tasks"][1]["grader"] = {"source": "def grade(sample, item):\n    return (\n"}
    manifest["tasks"].append({**manifest["tasks"][1], "id": "gone", "dataset": {"path": "data/gone.jsonl"},
                              "grader": graders.spec("exact_match")})
    path = _write_suite(env, manifest)
    assert evalnb.Suite.from_file(path)  # the schema is fine: only the data and the code are not
    code, out, err = _run(capsys, "validate", path)
    assert code == 1 and out == ""
    assert err.splitlines() == [
        f"evalnb: {path}: a run would fail (3 problems)",
        "task 'arith' (tasks[0]).prompt_template: field 'question' is in no row; fields are: q, a",
        "task 'echo' (tasks[1]).grader: the grader failed to load: SyntaxError: '(' was never closed (line 2)",
        f"task 'gone' (tasks[2]).dataset: dataset file not found: {env / 'data' / 'gone.jsonl'}",
    ]


def test_validate_lists_every_problem_and_exits_1(env, capsys):
    manifest = _suite_dict()
    manifest["tasks"][0].update(id="bad id!", type="nope")
    manifest["tasks"][1]["grader"]["timeout_seconds"] = 601
    path = _write_suite(env, manifest)
    with pytest.raises(evalnb.ManifestError) as expected:
        evalnb.Suite.from_file(path)
    code, out, err = _run(capsys, "validate", path)
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines[0] == f"evalnb: {path}: invalid manifest (3 problems)"
    assert lines[1:] == [f"{e['loc']}: {e['msg']}" for e in expected.value.errors]
    assert {line.split(":")[0] for line in lines[1:]} == {"tasks[0].id", "tasks[0].type", "tasks[1].grader.timeout_seconds"}


def test_validate_honours_offline_mode_and_sends_nothing_to_the_hub(env):
    path = env / "s.yaml"
    path.write_text(
        "tasks:\n  - id: hub\n    type: qa\n    dataset: {path: evalnb-tests/not-cached}\n"
        "    prompt_template: '{{question}}'\n    grader: {source: 'def grade(s, i): return 1'}\n"
    )
    with LocalModelServer() as hub:  # stands in for the hub: counts what reaches it
        environ = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
        environ.update(HF_HUB_OFFLINE="1", HF_ENDPOINT=hub.base_url.rsplit("/v1", 1)[0], HF_HOME=str(env / "hf"))
        proc = subprocess.run([sys.executable, "-m", "evalnb", "validate", str(path)], env=environ,
                              capture_output=True, text=True, timeout=120)
        assert hub.request_count == 0
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == f"evalnb: {path}: a run would fail (1 problem)"
    assert lines[1].startswith("task 'hub' (tasks[0]).dataset: dataset 'evalnb-tests/not-cached': cannot load")
    assert lines[1].endswith("(offline mode is on: only datasets already in the cache load)")


def test_validate_bad_json_missing_file_and_folder_exit_1(env, capsys):
    bad = env / "bad.json"
    bad.write_text('{"tasks": [}')
    code, _, err = _run(capsys, "validate", bad)
    assert code == 1 and "invalid JSON at line 1" in err
    code, _, err = _run(capsys, "validate", env / "nope.json")
    assert code == 1 and err.strip() == f"evalnb: {env / 'nope.json'}: no such file"
    code, _, err = _run(capsys, "validate", env)
    assert code == 1 and "not a file" in err


# ---- preview --------------------------------------------------------------------------------


def test_preview_shows_examples_prompt_target_and_row(suite_file, capsys):
    code, out, err = _run(capsys, "preview", suite_file)
    assert code == 0 and err == ""
    assert out.splitlines() == [
        "=== task arith (qa), item 0 ===",
        "--- example 1 (row 1) ---",  # row 0 is the evaluated row, so it is left out
        "Q: 2+2", "A:", "4",
        "--- prompt (row 0) ---",
        "Q: 1+1", "A:",
        "--- target ---",
        "2",
        "--- row ---",
        "{", '  "q": "1+1",', '  "a": "2"', "}",
    ]


def test_preview_task_index_limit_and_raw(suite_file, capsys):
    code, out, _ = _run(capsys, "preview", suite_file, "--task", "echo", "--index", "3", "--limit", "5")
    assert code == 0
    assert re.findall(r"=== task echo \(classification\), item (\d) ===", out) == ["3", "4"]  # the last is 4
    assert "--- choices ---\nyes\nno\n" in out and "example" not in out
    code, out, _ = _run(capsys, "preview", suite_file, "--index", "2", "--raw")
    item = evalnb.Suite.from_file(suite_file).items("arith")[2]
    assert code == 0
    assert f"--- prompt (exactly as sent) ---\n{item.prompt}\n--- target ---\n6\n" in out


def test_preview_out_of_range_and_unknown_task_exit_1(suite_file, capsys):
    code, out, err = _run(capsys, "preview", suite_file, "--index", "4")
    assert code == 0 and "item 4 ===" in out
    code, out, err = _run(capsys, "preview", suite_file, "--index", "5")
    assert code == 1 and out == ""
    assert "task 'arith' has 5 item(s) (indexes 0-4); --index 5 is out of range" in err
    code, _, err = _run(capsys, "preview", suite_file, "--task", "nope")
    assert code == 1 and "no task 'nope'" in err and "arith, echo" in err


# ---- run --------------------------------------------------------------------------------------


def test_run_prints_exact_metrics_and_the_run_id(suite_file, server, capsys):
    code, out, err = _run(capsys, "run", suite_file, "--model", f"good@{server.base_url}",
                          "--model", f"bad@{server.base_url}", "--concurrency", "25")
    assert code == 0, err
    run_id = _run_id(out)
    assert run_id[-8:] in err and "completed" in err  # the progress line went to stderr
    assert out.splitlines()[0].split() == ["task", "model", "metric", "n", "n_failed", "n_unscored", "mean", "95%", "CI"]
    expected = evalnb.load_run(run_id).metrics.set_index(["task_id", "model"])
    for task in ("arith", "echo"):
        for model, mean in (("good", "0.8000"), ("bad", "0.2000")):
            line = _metric_line(out, task, model)
            assert line.split()[3:7] == ["5", "0", "0", mean]
            row = expected.loc[(task, model)]
            assert f"[{row['ci_low']:.4f}, {row['ci_high']:.4f}]" in line
            assert 0 < row["ci_low"] < float(mean) < row["ci_high"] < 1
    assert f"run_id: {run_id}  status: completed  samples: 20  failed: 0" in out
    assert {r.path for r in server.requests} == {"/v1/responses"}


def test_a_failed_sample_exits_1_unless_allowed(suite_file, server, capsys):
    args = ["run", suite_file, "--model", f"flaky@{server.base_url}", "--task", "arith", "--no-progress"]
    code, out, err = _run(capsys, *args)
    assert code == 1
    assert _metric_line(out, "arith", "flaky").split()[3:7] == ["4", "1", "0", "1.0000"]
    assert "failed: 1" in out
    assert "1 sample(s) failed" in err and "arith / flaky #3" in err and "400" in err
    assert "[evalnb" not in err  # --no-progress
    code, out, _ = _run(capsys, *args, "--allow-failures")
    assert code == 0
    assert _metric_line(out, "arith", "flaky").split()[3:7] == ["4", "1", "0", "1.0000"]


def test_api_applies_to_every_model(suite_file, server, capsys):
    code, _, err = _run(capsys, "run", suite_file, "--model", f"good@{server.base_url}",
                        "--model", f"bad@{server.base_url}", "--api", "chat", "--task", "echo")
    assert code == 0, err
    assert len(server.requests) == 10
    assert {r.path for r in server.requests} == {"/v1/chat/completions"}


def test_each_model_may_set_its_own_api_and_label_to_compare_one_models_two_endpoints(suite_file, server, capsys):
    code, out, err = _run(capsys, "run", suite_file, "--task", "arith", "--no-progress",
                          "--model", f"good@{server.base_url},api=chat,label=good-chat",
                          "--model", f"good,base_url={server.base_url},label=good-responses")
    assert code == 0, err
    assert sorted(r.path for r in server.requests).count("/v1/chat/completions") == 5
    assert sorted(r.path for r in server.requests).count("/v1/responses") == 5
    assert _metric_line(out, "arith", "good-chat").split()[3:7] == _metric_line(out, "arith", "good-responses").split()[3:7]
    run = evalnb.load_run(_run_id(out), store=evalnb.store.Store(Path(os.environ["EVALNB_HOME"]) / "evalnb.sqlite"))
    assert [(m["label"], m["api"]) for m in run.run["models"]] == [("good-chat", "chat"), ("good-responses", "responses")]


@pytest.mark.parametrize("spec, message", [
    ("m,api=completion", "api must be responses, chat or completions, got 'completion'"),
    ("m,lable=x", "'lable=x' is not one of api=..., label=..., base_url=..., api_key_env=..."),
    ("m@http://127.0.0.1:9/v1,base_url=http://127.0.0.1:8/v1", "give the base URL once"),
    ("m,label=a,label=b", "label= is given twice"),
])
def test_a_bad_per_model_option_is_an_error_naming_it(suite_file, capsys, spec, message):
    code, out, err = _run(capsys, "run", suite_file, "--model", spec)
    assert code == 1 and out == "" and message in err and f"--model {spec}" in err


def test_keys_come_from_the_named_environment_variable_only(suite_file, server, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-leak")
    model = f"good@{server.base_url}"
    code, _, err = _run(capsys, "run", suite_file, "--model", model, "--task", "echo", "--max-samples", "1")
    assert code == 0, err
    assert [r.headers.get("authorization") for r in server.requests] == [None]  # not an OpenAI host
    server.reset()
    monkeypatch.setenv("LOCAL_KEY", "sk-local-1234")
    code, _, err = _run(capsys, "run", suite_file, "--model", model, "--api-key-env", "LOCAL_KEY",
                        "--task", "echo", "--max-samples", "1", "--no-reuse")
    assert code == 0, err
    assert [r.headers.get("authorization") for r in server.requests] == ["Bearer sk-local-1234"]
    server.reset()
    code, out, err = _run(capsys, "run", suite_file, "--model", model, "--api-key-env", "UNSET_KEY_VAR")
    assert code == 1 and out == ""
    assert "environment variable UNSET_KEY_VAR is not set" in err and "good at http://127.0.0.1" in err
    assert server.requests == []


def test_generation_task_and_max_samples_reach_the_run(suite_file, server, capsys, env):
    gen = env / "gen.json"
    gen.write_text('{"temperature": 0, "max_output_tokens": 7}')
    code, out, err = _run(capsys, "run", suite_file, "--model", f"good@{server.base_url}", "--task", "echo",
                          "--max-samples", "2", "--generation", f"@{gen}")
    assert code == 0, err
    assert [r.body["temperature"] for r in server.requests] == [0, 0]
    assert all(r.body["max_output_tokens"] == 7 for r in server.requests)
    assert _metric_line(out, "echo", "good").split()[3:7] == ["2", "0", "0", "1.0000"]
    assert not [ln for ln in out.splitlines() if ln.startswith("arith")]


def test_run_rejects_bad_input_before_any_call(suite_file, server, capsys, env):
    base = ["run", suite_file, "--model", f"good@{server.base_url}"]
    code, _, err = _run(capsys, *base, "--concurrency", "26")
    assert code == 1 and "concurrency must be an integer from 1 to 25" in err
    code, _, err = _run(capsys, *base, "--task", "nope")
    assert code == 1 and "unknown task(s) ['nope']" in err
    code, _, err = _run(capsys, "run", suite_file, "--model", "m@ftp://example.com/v1")
    assert code == 1 and "base_url must be an http(s) URL" in err
    manifest = _suite_dict()
    manifest["tasks"][0]["type"] = "nope"
    code, _, err = _run(capsys, "run", _write_suite(env, manifest, "bad.json"), "--model", f"good@{server.base_url}")
    assert code == 1 and "invalid manifest (1 problem)\ntasks[0].type: must be one of" in err
    assert server.requests == []


def test_a_task_that_cannot_start_fails_the_run_with_exit_1(env, server, capsys):
    manifest = _suite_dict()
    manifest["tasks"][0]["dataset"]["path"] = "data/missing.jsonl"
    path = _write_suite(env, manifest)
    code, out, err = _run(capsys, "run", path, "--model", f"good@{server.base_url}", "--allow-failures")
    assert code == 1  # refused before it starts (tests/runner/test_run_refused.py): no run, no call
    assert out == "" and server.request_count == 0
    assert "task 'arith' (tasks[0]).dataset: dataset file not found" in err and err.count("missing.jsonl") == 1


# ---- runs, show, export -----------------------------------------------------------------------


@pytest.fixture
def two_runs(suite_file, server, capsys) -> tuple[str, str]:
    code1, out1, _ = _run(capsys, "run", suite_file, "--model", f"good@{server.base_url}", "--no-progress")
    code2, out2, _ = _run(capsys, "run", suite_file, "--model", f"flaky@{server.base_url}", "--task", "arith",
                          "--no-progress")
    assert (code1, code2) == (0, 1)
    return _run_id(out1), _run_id(out2)


def test_runs_lists_newest_first_with_counts(two_runs, capsys):
    first, second = two_runs
    code, out, err = _run(capsys, "runs")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["run_id", "status", "created", "(UTC)", "suite", "models", "done/planned", "failed",
                                "name"]
    assert [ln.split()[0] for ln in lines[2:]] == [second, first]
    version = evalnb.load_run(first).run["suite_version"]
    assert lines[2].split()[4:] == [version[:12], "flaky", "5/5", "1"]
    assert lines[3].split()[4:] == [version[:12], "good", "10/10", "0"]
    code, out, err = _run(capsys, "runs", "--limit", "1")
    assert code == 0 and len(out.splitlines()) == 3 and second in out and first not in out
    assert "--limit 0" in err


def test_runs_in_an_empty_home_creates_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("EVALNB_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, "runs")
    assert code == 0 and out == "" and "no runs in" in err
    assert not (tmp_path / ".evalnb").exists()
    code, _, err = _run(capsys, "show", "latest")
    assert code == 1 and "no evalnb store at" in err


def test_home_option_before_or_after_the_command(two_runs, env, capsys, monkeypatch):
    home = os.environ["EVALNB_HOME"]
    monkeypatch.setenv("EVALNB_HOME", str(env / "elsewhere"))
    code, out, _ = _run(capsys, "--home", home, "runs")
    assert code == 0 and two_runs[0] in out
    code, out, _ = _run(capsys, "runs", "--home", home)
    assert code == 0 and two_runs[0] in out
    assert os.environ["EVALNB_HOME"] == str(env / "elsewhere")  # restored after the command


def test_show_prints_metrics_and_samples_fitted_to_the_terminal(two_runs, capsys, monkeypatch):
    run_id = two_runs[1]
    code, out, _ = _run(capsys, "show", run_id[-8:])  # the suffix the progress line shows
    assert code == 0
    assert f"run      {run_id}" in out and "status   completed (5 samples, 1 failed)" in out
    assert _metric_line(out, "arith", "flaky").split()[3:7] == ["4", "1", "0", "1.0000"]
    assert "extracted" not in out and "index" not in out  # no samples without --samples

    code, out, _ = _run(capsys, "show", run_id, "--samples")
    table = out[out.index("task   model  index"):].splitlines()
    assert table[2].split() == ["arith", "flaky", "0", "completed", '"2"', "exact_match=1"]
    failed = [ln for ln in table if " failed " in ln]
    assert len(failed) == 1 and failed[0].split()[:5] == ["arith", "flaky", "3", "failed", "-"]
    assert "HTTP 400" in failed[0]

    monkeypatch.setenv("COLUMNS", "60")
    code, out, _ = _run(capsys, "show", "latest", "--samples", "--failed", "--limit", "1")
    table = out[out.index("task   model  index"):].splitlines()
    assert code == 0 and len(table) == 3
    assert max(len(ln) for ln in table) <= 60 and table[2].endswith("…")


def test_a_named_run_its_grader_output_and_its_missing_fields_show_in_the_cli(env, server, capsys):
    manifest = _suite_dict()
    del manifest["tasks"][1]
    manifest["tasks"][0]["prompt_template"] = "Q: {{q}}\nA:{{hnt}}"
    manifest["tasks"][0]["grader"] = {"source": (
        "def grade(sample, item):\n"
        "    print('comparing', repr(sample['extracted_output']), 'with', repr(item['target']))\n"
        "    if item['target'] == '6':\n"
        "        raise ValueError('six')\n"
        "    return sample['extracted_output'] == item['target']\n"
    )}
    path = _write_suite(env, manifest)
    code, out, err = _run(capsys, "run", path, "--model", f"good@{server.base_url}", "--name", "v2: neutral defined",
                          "--allow-failures")
    assert code == 0, err
    assert "warning: task 'arith' (tasks[0]).prompt_template: field 'hnt' is in no row" in err
    assert "note: task arith, model good: 5 prompt(s) had a template field their row lacks" in out
    code, out, _ = _run(capsys, "runs")
    assert out.splitlines()[2].endswith("v2: neutral defined")
    code, out, _ = _run(capsys, "show", "latest", "--samples", "--failed")
    assert "name     v2: neutral defined" in out
    assert "--- grader output of arith / good #2 ---\ncomparing 'wrong' with '6'\n" in out  # good is planted wrong on 3+3
    code, out, _ = _run(capsys, "show", "latest", "--samples")
    assert out.count("--- grader output of") == 1  # only the failed sample's output is printed


def test_show_and_export_unknown_or_ambiguous_run_exit_1(two_runs, capsys):
    code, out, err = _run(capsys, "show", "eval_run_" + "0" * 32)
    assert code == 1 and out == "" and "unknown run 'eval_run_000" in err and "evalnb runs" in err
    code, _, err = _run(capsys, "export", "eval_run_", "--format", "csv")
    assert code == 1 and "ambiguous" in err
    code, _, err = _run(capsys, "show", "abc")  # too short to match by prefix
    assert code == 1 and "unknown run" in err


def _normalised(frame: pd.DataFrame) -> list[dict]:
    """Samples as plain values: the text columns as str or None, scores as float or None, rows as dicts."""
    out = []
    for r in frame.to_dict("records"):
        row = {}
        for k in ("task_id", "model", "status", "prompt", "target", "output_text", "extracted_output"):
            v = r[k]
            row[k] = None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
        row["sample_index"] = int(r["sample_index"])
        score = r["exact_match"]
        row["exact_match"] = None if score is None or math.isnan(score) else float(score)
        row["dataset_row"] = json.loads(r["dataset_row"]) if isinstance(r["dataset_row"], str) else r["dataset_row"]
        out.append(row)
    return out


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_export_round_trips_the_samples(two_runs, fmt, env, capsys, monkeypatch):
    run_id = two_runs[1]
    monkeypatch.chdir(env)
    code, out, _ = _run(capsys, "export", run_id, "--format", fmt)
    path = env / f"{run_id}.samples.{fmt}"
    assert code == 0 and out.strip() == f"wrote 5 samples rows to {path.name}"
    text_columns = {c: str for c in ("target", "output_text", "extracted_output", "prompt")}
    if fmt == "jsonl":
        back = pd.read_json(path, lines=True, dtype=False)
    elif fmt == "csv":
        back = pd.read_csv(path, dtype=text_columns)
    else:
        back = pd.read_parquet(path)
    expected = evalnb.load_run(run_id).samples
    assert list(back.columns) == list(expected.columns)
    assert _normalised(back) == _normalised(expected)
    assert _normalised(back)[3]["status"] == "failed" and _normalised(back)[3]["extracted_output"] is None


def test_export_metrics_to_an_inferred_format_and_to_stdout(two_runs, env, capsys):
    run_id = two_runs[0]
    target = env / "out" / "m.csv"
    target.parent.mkdir()
    code, out, _ = _run(capsys, "export", run_id[:16], "--what", "metrics", "-o", target)
    assert code == 0 and "wrote 2 metrics rows" in out
    back = pd.read_csv(target)
    expected = evalnb.load_run(run_id).metrics
    assert back[["task_id", "model", "metric", "n"]].values.tolist() == expected[["task_id", "model", "metric", "n"]].values.tolist()
    assert back["mean"].tolist() == pytest.approx(expected["mean"].tolist()) == [0.8, 0.8]
    code, out, err = _run(capsys, "export", run_id, "-o", "-")
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(records) == 10 and "wrote 10 samples rows to stdout" in err
    assert records[0]["dataset_row"] == {"q": "1+1", "a": "2"} and records[0]["exact_match"] == 1.0
    code, _, err = _run(capsys, "export", run_id, "--format", "parquet", "-o", "-")
    assert code == 1 and "parquet cannot go to stdout" in err


# ---- cost and budgets -------------------------------------------------------------------------


@pytest.fixture
def priced_server():
    with LocalModelServer(_responder, usage={"input_tokens": 100, "output_tokens": 10}) as s:
        yield s


def test_run_with_prices_prints_the_cost_and_show_breaks_it_down(suite_file, priced_server, capsys):
    url = priced_server.base_url
    code, out, err = _run(capsys, "run", suite_file, "--model", f"good@{url}", "--model", f"bad@{url}",
                          "--price", "good=1000,2000", "--allow-failures")
    assert code == 0, err
    each = (100 * 1000 + 10 * 2000) / 1e6  # bad has no price: not counted
    assert f"cost: ${10 * each:.4f} (some calls had no price: not counted)" in out
    code, out, err = _run(capsys, "show", _run_id(out))
    assert code == 0, err
    lines = [ln.split() for ln in out.splitlines()]
    assert ["arith", "good", "candidate", "good", "5", "0", "500", "50", f"${5 * each:.4f}"] in lines
    assert ["arith", "bad", "candidate", "bad", "5", "0", "500", "50", "-"] in lines


def test_run_max_cost_usd_stops_with_exit_1_and_resume_continues(suite_file, priced_server, capsys):
    url = priced_server.base_url
    # per call: at most (ceil(len(prompt)/4) x 1000 + 5 x 2000) / 1e6; really 0.12 (100 input tokens billed)
    code, out, err = _run(capsys, "run", suite_file, "--model", f"good@{url}", "--price", "good=1000,2000",
                          "--generation", '{"max_output_tokens": 5}', "--max-cost-usd", "0.5", "--concurrency", "1")
    assert code == 1
    run_id = _run_id(out)
    assert f"status: stopped" in out and "max_cost_usd=0.5" in err and f"evalnb resume {run_id}" in err
    made = priced_server.request_count
    assert 0 < made < 10
    stored = evalnb.load_run(run_id)
    assert stored.status == "stopped" and len(stored.samples) == made
    code, out, err = _run(capsys, "resume", run_id, "--max-cost-usd", "100")
    assert code == 0, err
    assert "status: completed" in out and priced_server.request_count == 10
    code, out, _ = _run(capsys, "runs")
    assert run_id in out and "completed" in out


def test_bad_price_and_budget_flags_exit_before_any_call(suite_file, priced_server, capsys):
    url = priced_server.base_url
    code, _, err = _run(capsys, "run", suite_file, "--model", f"good@{url}", "--price", "nobody=1,2")
    assert code == 1 and "--price nobody=...: no model of that name (models: good)" in err
    code, _, err = _run(capsys, "run", suite_file, "--model", f"good@{url}", "--price", "good=-1,2")
    assert code == 1 and "finite number >= 0" in err
    code, _, err = _run(capsys, "run", suite_file, "--model", f"good@{url}", "--price", "good=1")
    assert code == 2 and "NAME=INPUT,OUTPUT" in err
    code, _, err = _run(capsys, "run", suite_file, "--model", f"good@{url}", "--max-cost-usd", "-3")
    assert code == 2 and "must be a number of USD >= 0" in err
    code, _, err = _run(capsys, "run", suite_file, "--model", f"good@{url}", "--price", "good=1,2",
                        "--max-cost-usd", "1")
    assert code == 1 and "no max_output_tokens" in err
    assert priced_server.request_count == 0


# ---- provider batches ------------------------------------------------------------------------


def test_run_with_executor_batch_at_the_batch_price_then_cancel_lists_its_batches(suite_file, priced_server, capsys,
                                                                                  monkeypatch):
    monkeypatch.setenv("EVALNB_BATCH_POLL_S", "0.05")
    url = priced_server.base_url
    code, out, err = _run(capsys, "run", suite_file, "--model", f"good@{url}", "--price", "good=1000,2000",
                          "--batch-discount", "0.5", "--executor", "batch", "--allow-failures")
    assert code == 0, err
    assert priced_server.uploads == 1 and priced_server.calls("/v1/responses") == 0
    each = (100 * 1000 + 10 * 2000) / 1e6 * 0.5
    assert f"cost: ${10 * each:.4f}" in out
    run_id = _run_id(out)
    code, out, err = _run(capsys, "cancel", run_id)
    assert code == 0, err
    (batch_id,) = priced_server.batches
    assert f"{batch_id}  good  completed" in out  # finished already: nothing to cancel
    code, out, err = _run(capsys, "run", suite_file, "--model", f"good@{url}", "--batch-discount", "0.5")
    assert code == 1 and "--batch-discount needs --price" in err
    code, _, err = _run(capsys, "run", suite_file, "--model", f"good@{url}", "--price", "good=1,2",
                        "--batch-discount", "2")
    assert code == 2 and "factor in (0, 1]" in err


# ---- global flags across hosts (issue 31 item 7) ------------------------------------------------


def test_the_readme_example_of_two_hosts_and_one_key_flag_is_refused_with_the_per_model_form(suite_file, capsys,
                                                                                              monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", "sk-vllm-0123456789abcdef")
    code, out, err = _run(capsys, "run", suite_file, "--model", "gpt-4.1-mini", "--model",
                          "qwen@http://127.0.0.1:9/v1", "--api", "chat", "--api-key-env", "VLLM_API_KEY")
    assert code == 1 and out == ""
    assert "--api-key-env is given once but would apply to models on 2 hosts" in err, err
    assert "api.openai.com" in err and "127.0.0.1:9" in err
    assert "--model qwen@http://localhost:8000/v1,api=chat,api_key_env=VLLM_API_KEY,label=qwen" in err


@pytest.mark.parametrize("protected", [True, False], ids=["refused", "control"])
def test_a_key_flag_given_once_never_reaches_a_second_host(suite_file, capsys, monkeypatch, protected):
    """Two servers (two ports of 127.0.0.1: two hosts); the key meant for one must not reach the other."""
    monkeypatch.setenv("LOCAL_KEY", "sk-local-0123456789abcdef")
    if not protected:  # the control: without the check the flag applies to both, and the key travels
        monkeypatch.setattr("evalnb.cli._check_global_flags", lambda given: None)
    with LocalModelServer(_responder) as mine, LocalModelServer(_responder) as other:
        code, _, err = _run(capsys, "run", suite_file, "--task", "echo", "--max-samples", "1", "--no-progress",
                            "--model", f"good@{mine.base_url}", "--model", f"bad@{other.base_url}",
                            "--api-key-env", "LOCAL_KEY")
        sent = [r.headers.get("authorization") for r in other.requests]
    if protected:
        assert code == 1 and "given once but would apply to models on 2 hosts" in err, err
        assert sent == [] and mine.requests == []
    else:
        assert sent == ["Bearer sk-local-0123456789abcdef"]


def test_a_key_flag_given_once_holds_for_models_on_one_host_and_per_model_keys_go_to_their_own(
        suite_file, server, capsys, monkeypatch):
    monkeypatch.setenv("LOCAL_KEY", "sk-local-0123456789abcdef")
    monkeypatch.setenv("OTHER_KEY", "sk-other-0123456789abcdef")
    code, _, err = _run(capsys, "run", suite_file, "--task", "echo", "--max-samples", "1", "--no-progress",
                        "--model", f"good@{server.base_url}", "--model", f"bad@{server.base_url}",
                        "--api-key-env", "LOCAL_KEY")
    assert code == 0, err
    assert {r.headers.get("authorization") for r in server.requests} == {"Bearer sk-local-0123456789abcdef"}
    with LocalModelServer(_responder) as other:
        server.reset()
        code, _, err = _run(capsys, "run", suite_file, "--task", "echo", "--max-samples", "1", "--no-progress",
                            "--no-reuse", "--model", f"good@{server.base_url},api_key_env=LOCAL_KEY",
                            "--model", f"bad@{other.base_url},api=chat,api_key_env=OTHER_KEY")
        assert code == 0, err
        assert [r.headers.get("authorization") for r in server.requests] == ["Bearer sk-local-0123456789abcdef"]
        assert [r.headers.get("authorization") for r in other.requests] == ["Bearer sk-other-0123456789abcdef"]
    code, _, err = _run(capsys, "run", suite_file, "--task", "echo", "--max-samples", "1", "--no-progress",
                        "--no-reuse", "--model", "good", "--base-url", server.base_url, "--api-key-env", "LOCAL_KEY")
    assert code == 0, err
