"""A manifest read from a file cannot read your files: local paths stay inside its folder.

Issue 21: ``dataset: {path: "../.env", format: csv}`` sent the file's lines to the model
server and a ``ghp_`` token into the store. Loaded from a file (``Suite.from_file``,
``evalnb run suite.yaml``), a local dataset or few-shot path that is absolute, starts with
``~`` or leaves the manifest's folder (``..``, a symlink) is refused naming the field, unless
the caller allows it; ``Suite.from_dict`` (the caller's own code) names any path as before.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import evalnb
from evalnb.cli import main
from evalnb.errors import ManifestError
from evalnb.suite import Suite
from evalnb.testing import LocalModelServer

GRADER = 'def grade(sample, item):\n    return 1\n'
TOKENS = {"GITHUB": "ghp_" + "A1b2C3d4E5" * 4, "FINE": "github_pat_11AAAAAAA0" + "x1Y2z3" * 10,
          "HF": "hf_" + "QwErTyUiOp" * 4, "AWS": "AKIA" + "IOSFODNN7EXAMPL1", "OPENAI": "sk-" + "proj" * 8}  # fmt: skip


def _write(folder: Path, dataset: dict, fewshot: dict | None = None) -> Path:
    task = {"id": "t", "type": "qa", "dataset": dataset, "prompt_template": "{{q}}", "grader": {"source": GRADER},
            "metrics": [{"id": "score"}]}  # fmt: skip
    if fewshot is not None:
        task["fewshot"] = {"count": 1, "dataset": fewshot}
    path = folder / "suite.json"
    path.write_text(json.dumps({"tasks": [task]}))
    return path


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """tmp/.env (a secret next to the project) and tmp/project/{suite, data/rows.jsonl}."""
    (tmp_path / ".env").write_text("q\n" + "\n".join(f"{k}={v}" for k, v in TOKENS.items()) + "\n")
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "rows.jsonl").write_text(json.dumps({"q": "2+2?", "target": "4"}) + "\n")
    return project


@pytest.mark.parametrize("given, reason", [
    ("../.env", "leaves the manifest's folder"),
    ("data/../../.env", "leaves the manifest's folder"),
    ("/etc/passwd", "is an absolute path"),
    ("~/.netrc", "starts with ~"),
])  # fmt: skip
def test_a_path_out_of_the_folder_is_refused_naming_the_field(layout, given, reason):
    path = _write(layout, {"path": given, "format": "csv"})
    with pytest.raises(ManifestError) as caught:
        Suite.from_file(path)
    (error,) = caught.value.errors
    assert error["loc"] == "tasks[0].dataset.path" and reason in error["msg"] and "allow_paths_outside" in error["msg"]


def test_few_shot_and_hugging_face_folders_are_held_to_the_same_rule(layout):
    outside = layout.parent / "hf_folder"
    outside.mkdir()
    path = _write(layout, {"path": "data/rows.jsonl"}, fewshot={"path": "../hf_folder", "split": "train"})
    with pytest.raises(ManifestError) as caught:
        Suite.from_file(path)
    assert [e["loc"] for e in caught.value.errors] == ["tasks[0].fewshot.dataset.path"]
    # a hub id is not a path: it stays allowed
    path = _write(layout, {"path": "data/rows.jsonl"}, fewshot={"path": "org/name", "split": "train"})
    assert Suite.from_file(path).tasks[0].fewshot.dataset.path == "org/name"


def test_a_symlink_that_leads_out_is_refused(layout):
    (layout / "data" / "innocent.csv").symlink_to(layout.parent / ".env")
    with pytest.raises(ManifestError, match="leaves the manifest's folder"):
        Suite.from_file(_write(layout, {"path": "data/innocent.csv"}))


def test_paths_inside_the_folder_load_as_before(layout):
    for given in ("data/rows.jsonl", "./data/rows.jsonl", "data/../data/rows.jsonl"):
        suite = Suite.from_file(_write(layout, {"path": given}))
        assert [item.prompt for item in suite.items("t")] == ["2+2?"]


def test_the_caller_may_allow_it_and_a_dict_may_name_any_path(layout):
    path = _write(layout, {"path": "../.env", "format": "csv"})
    allowed = Suite.from_file(path, allow_paths_outside=True)
    assert len(allowed.items("t")) == len(TOKENS)
    built = Suite.from_dict(json.loads(path.read_text()), base_dir=layout)
    assert len(built.items("t")) == len(TOKENS)


def test_evalnb_run_refuses_before_any_model_call_and_the_flag_allows_it(layout, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + "k" * 20)
    path = _write(layout, {"path": "../.env", "format": "csv"})
    with LocalModelServer(lambda body: "4") as server:
        code = main(["run", str(path), "--model", f"m@{server.base_url}", "--api", "chat"])
        err = capsys.readouterr().err
        assert code != 0 and "tasks[0].dataset.path: '../.env' leaves the manifest's folder" in err, err
        assert server.request_count == 0
        assert main(["validate", "--schema-only", "--allow-paths-outside", str(path)]) == 0
        assert main(["run", str(path), "--model", f"m@{server.base_url}", "--api", "chat",
                     "--allow-paths-outside"]) == 0
        assert server.request_count == len(TOKENS)
    # what was allowed still leaves no token of a known shape in the store
    stored = b"".join(p.read_bytes() for p in (tmp_path / "home").rglob("evalnb.sqlite*"))
    assert stored and not [name for name, token in TOKENS.items() if token.encode() in stored]


def test_the_store_masks_known_token_shapes(layout, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "home"))
    rows = layout / "data" / "tokens.jsonl"
    rows.write_text("".join(json.dumps({"q": f"my {name} key is {token}", "target": token}) + "\n"
                            for name, token in TOKENS.items()))  # fmt: skip
    suite = Suite.from_dict({"tasks": [{"id": "t", "type": "qa", "dataset": {"path": str(rows)},
                                        "prompt_template": "{{q}}", "grader": {"source": GRADER},
                                        "metrics": [{"id": "score"}]}]})  # fmt: skip
    with LocalModelServer(lambda body: "echo " + json.dumps(body)[:400]) as server:
        evalnb.run(suite, [evalnb.Model("m", base_url=server.base_url, api="chat", api_key="sk-x" + "y" * 20)],
                   progress=False)  # fmt: skip
    (db,) = (tmp_path / "home").rglob("evalnb.sqlite")
    with sqlite3.connect(db) as conn:  # read through SQLite too: WAL pages are part of the store
        text = "".join(str(row) for table in ("samples",) for row in conn.execute(f"select * from {table}"))
    stored = text.encode() + b"".join(p.read_bytes() for p in (tmp_path / "home").rglob("evalnb.sqlite*"))
    assert not [name for name, token in TOKENS.items() if token.encode() in stored]
    assert b"[redacted]" in stored
