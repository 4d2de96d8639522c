"""A hostile lm-eval task folder reads no file of the caller's (issue 31 item 3).

The caller's project holds ``settings.py`` (a secret in it) and ``extra.yaml``. A task folder
someone sent names them: ``!function /abs/settings.x`` on a key nothing uses (which would copy
``settings.py`` into the manifest, and a hook could put it in a prompt), ``include:
/abs/extra.yaml``, and the same through ``..`` and ``~``. Each is refused naming the field;
the control, ``allow_paths_outside=True``, shows the secret reaching the manifest. Importing
runs none of the task's Python in the caller.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalnb import Suite
from evalnb.cli import main
from evalnb.errors import LmEvalImportError

pytestmark = pytest.mark.usefixtures("evalnb_home")

SECRET = "caller-settings-secret-5f1c"


def _world(tmp_path: Path) -> tuple[Path, Path]:
    """The caller's project (settings.py, extra.yaml) and a received task folder beside it."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "settings.py").write_text(f"KEY = {SECRET!r}\ndef x(doc):\n    return KEY\n")
    (project / "extra.yaml").write_text(f"description: {SECRET}\n")
    task = tmp_path / "received"
    (task / "data").mkdir(parents=True)
    (task / "data" / "test.jsonl").write_text(json.dumps({"q": "1+1", "a": "2"}) + "\n")
    marker = tmp_path / "task-python-ran"
    (task / "utils.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\ndef keep(doc):\n    return doc\n")
    return project, task


def _task_yaml(task: Path, line: str) -> Path:
    path = task / "hostile.yaml"
    path.write_text(f"task: hostile\noutput_type: generate_until\ntest_split: test\ndataset_path: {task / 'data'}\n"
                    f"doc_to_text: \"{{{{q}}}}\"\ndoc_to_target: \"{{{{a}}}}\"\nunused: !function utils.keep\n{line}\n")
    return path


def _lines(project: Path, tmp_path: Path, monkeypatch) -> dict[str, tuple[str, str]]:
    monkeypatch.setenv("HOME", str(project))  # so ~ is the caller's project
    return {
        "absolute function": (f"settings_hook: !function {project / 'settings'}.x", "!function"),
        "dotdot function": ("settings_hook: !function ../project/settings.x", "!function"),
        "home function": ("settings_hook: !function ~/settings.x", "!function"),
        "absolute include": (f"include: {project / 'extra.yaml'}", "include:"),
        "dotdot include": ("include: ../project/extra.yaml", "include:"),
        "home include": ("include: ~/extra.yaml", "include:"),
    }


@pytest.mark.parametrize("attack", ["absolute function", "dotdot function", "home function",
                                    "absolute include", "dotdot include", "home include"])
def test_a_task_folder_naming_files_outside_it_is_refused_naming_the_field(tmp_path, monkeypatch, attack):
    project, task = _world(tmp_path)
    line, field = _lines(project, tmp_path, monkeypatch)[attack]
    path = _task_yaml(task, line)
    with pytest.raises(LmEvalImportError) as caught:
        Suite.from_lm_eval(str(path))
    message = str(caught.value)
    assert field in message and ("absolute" in message or "leaves the task's folder" in message
                                 or "starts with ~" in message), message
    assert "allow_paths_outside=True" in message and SECRET not in message
    assert not (tmp_path / "task-python-ran").exists()


@pytest.mark.parametrize("attack", ["absolute function", "absolute include"])
def test_control_with_paths_allowed_out_the_callers_file_reaches_the_manifest(tmp_path, monkeypatch, attack):
    project, task = _world(tmp_path)
    line, _ = _lines(project, tmp_path, monkeypatch)[attack]
    if attack == "absolute include":  # an include is merged only where the file's own keys do not win
        line += "\n"
    suite = Suite.from_lm_eval(str(_task_yaml(task, line)), allow_paths_outside=True)
    assert SECRET in json.dumps(suite.to_dict())
    assert not (tmp_path / "task-python-ran").exists()  # still no task Python ran in the caller


def test_the_cli_refuses_it_too_and_lets_it_out_on_request(tmp_path, monkeypatch, capsys):
    project, task = _world(tmp_path)
    path = _task_yaml(task, f"settings_hook: !function {project / 'settings'}.x")
    assert main(["import-lm-eval", str(path)]) == 1
    assert "!function" in capsys.readouterr().err
    assert main(["import-lm-eval", str(path), "--allow-paths-outside"]) == 0
    assert SECRET in capsys.readouterr().out


def test_files_inside_the_task_folder_still_import(tmp_path):
    _, task = _world(tmp_path)
    (task / "sub").mkdir()
    (task / "sub" / "base.yaml").write_text("description: \"Sums.\\n\\n\"\n")
    suite = Suite.from_lm_eval(str(_task_yaml(task, "include: sub/base.yaml")))
    assert suite.tasks[0].id == "hostile"


# --- a group's .yaml members and a task's local dataset folder (issue 31 item 3, second pass) ---

ROW_SECRET = "caller-private-row-7d2e"


def _callers_task(project: Path) -> Path:
    """The caller's own lm-eval task elsewhere: its hook reads settings.py, its rows are private."""
    (project / "priv").mkdir()
    (project / "priv" / "test.jsonl").write_text(json.dumps({"q": ROW_SECRET, "a": "x"}) + "\n")
    path = project / "mytask.yaml"
    path.write_text(f"task: mine\noutput_type: generate_until\ntest_split: test\ndataset_path: {project / 'priv'}\n"
                    "doc_to_text: \"{{q}}\"\ndoc_to_target: \"{{a}}\"\nhook: !function settings.x\n")
    return path


@pytest.mark.parametrize("member", ["absolute", "dotdot", "home"])
def test_a_groups_yaml_member_outside_its_folder_is_refused_naming_task(tmp_path, monkeypatch, member):
    project, task = _world(tmp_path)
    mine = _callers_task(project)
    monkeypatch.setenv("HOME", str(project))
    monkeypatch.chdir(task)  # a relative member was once opened from the working directory
    given = {"absolute": str(mine), "dotdot": "../project/mytask.yaml", "home": "~/mytask.yaml"}[member]
    group = task / "group.yaml"
    group.write_text(f"group: g\ntask:\n  - {given}\n")
    with pytest.raises(LmEvalImportError) as caught:
        Suite.from_lm_eval(str(group))
    message = str(caught.value)
    assert "task:" in message and "allow_paths_outside=True" in message and SECRET not in message
    assert ("is absolute" in message) if member == "absolute" else True
    assert ("leaves the task's folder" in message) if member == "dotdot" else True
    assert ("starts with ~" in message) if member == "home" else True


@pytest.mark.parametrize("member", ["absolute", "dotdot"])
def test_control_with_paths_allowed_out_a_groups_member_brings_the_callers_files(tmp_path, monkeypatch, member):
    project, task = _world(tmp_path)
    mine = _callers_task(project)
    monkeypatch.chdir(tmp_path)  # not the group's folder: members resolve against the group YAML
    given = {"absolute": str(mine), "dotdot": "../project/mytask.yaml"}[member]
    group = task / "group.yaml"
    group.write_text(f"group: g\ntask:\n  - {given}\n")
    suite = Suite.from_lm_eval(str(group), allow_paths_outside=True)
    assert SECRET in json.dumps(suite.to_dict())


def test_a_groups_member_inside_its_folder_resolves_against_the_group_yaml(tmp_path, monkeypatch):
    _, task = _world(tmp_path)
    (task / "sub").mkdir()
    (task / "sub" / "one.yaml").write_text("task: one\noutput_type: generate_until\ntest_split: test\n"
                                           "dataset_path: ../data\ndoc_to_text: \"{{q}}\"\ndoc_to_target: \"{{a}}\"\n")
    (task / "group.yaml").write_text("group: g\ntask:\n  - sub/one.yaml\n")
    monkeypatch.chdir(tmp_path)  # elsewhere: the member is found beside the group YAML all the same
    suite = Suite.from_lm_eval(str(task / "group.yaml"))
    assert [t.id for t in suite.tasks] == ["one"]
    assert [i.prompt for i in suite.items("one")] == ["1+1"]  # sub/../data: still in the task's folder


def _data_task(task: Path, dataset_path: str) -> Path:
    path = task / "t.yaml"
    path.write_text(f"task: t\noutput_type: generate_until\ntest_split: test\ndataset_path: {dataset_path}\n"
                    "doc_to_text: \"{{q}}\"\ndoc_to_target: \"{{a}}\"\n")
    return path


@pytest.mark.parametrize("where", ["absolute", "dotdot", "home"])
def test_a_local_dataset_path_outside_the_task_folder_is_refused_naming_it(tmp_path, monkeypatch, where):
    project, task = _world(tmp_path)
    _callers_task(project)
    monkeypatch.setenv("HOME", str(project))
    given = {"absolute": str(project / "priv"), "dotdot": "../project/priv", "home": "~/priv"}[where]
    with pytest.raises(LmEvalImportError) as caught:
        Suite.from_lm_eval(str(_data_task(task, given)))
    message = str(caught.value)
    assert "dataset_path" in message and "allow_paths_outside=True" in message and ROW_SECRET not in message


def test_control_with_paths_allowed_out_the_callers_rows_become_prompts(tmp_path):
    project, task = _world(tmp_path)
    _callers_task(project)
    suite = Suite.from_lm_eval(str(_data_task(task, str(project / "priv"))), allow_paths_outside=True)
    assert [i.prompt for i in suite.items("t")] == [ROW_SECRET]


def test_a_hub_name_and_a_local_folder_inside_the_task_folder_still_import(tmp_path, monkeypatch):
    _, task = _world(tmp_path)
    hub = Suite.from_lm_eval(str(_data_task(task, "allenai/ai2_arc")))
    assert hub.tasks[0].dataset.path == "allenai/ai2_arc"
    monkeypatch.chdir(tmp_path)  # a relative folder is read from the task YAML's folder
    local = Suite.from_lm_eval(str(_data_task(task, "data")))
    assert [i.prompt for i in local.items("t")] == ["1+1"]
