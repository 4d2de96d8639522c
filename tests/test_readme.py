"""The README's examples stay true: its manifest loads and its code blocks are valid Python."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

import evalnb

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def test_the_manifest_example_loads():
    block = re.search(r"## Writing a manifest.*?```yaml\n(.*?)```", README, re.S).group(1)
    suite = evalnb.Suite.from_dict(yaml.safe_load(block))
    task = suite.task("belebele_en")
    assert task.effective_fewshot.count == 3 and task.extraction.type == "regex"


def test_the_preprocessor_example_is_a_valid_preprocess_spec():
    block = re.search(r"A preprocessor normalises.*?```yaml\n(.*?)```", README, re.S).group(1)
    spec = yaml.safe_load(block)["preprocess"]
    suite = evalnb.Suite.from_dict({"tasks": [{
        "id": "t", "type": "qa", "dataset": {"path": "x.jsonl"}, "prompt_template": "{{question}}",
        "preprocess": spec, "grader": {"source": "def grade(s, i):\n    return 1\n"},
    }]})
    assert suite.task("t").preprocess.contract == "row"


def test_every_python_block_parses():
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert len(blocks) >= 3
    for block in blocks:
        # top-level `await` is notebook syntax; wrap so the rest is still checked
        ast.parse(block.replace("await ", ""))


def test_the_cli_section_shows_the_real_validate_message(tmp_path, monkeypatch, capsys):
    import json

    from evalnb.cli import main

    block = re.search(r"```console\n\$ evalnb validate suite\.yaml\n(.*?)\$ echo \$\?\n(\d+)\n```", README, re.S)
    shown, code = block.group(1).splitlines(), int(block.group(2))
    rows = [{"country": "France", "capital": "Paris"}, {"country": "Japan", "capital": "Tokyo"}]
    (tmp_path / "capitals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "suite.yaml").write_text(
        "tasks:\n  - id: capitals\n    type: qa\n    dataset: {path: capitals.jsonl}\n"
        "    prompt_template: 'What is the capital of {{contry}}?'\n    target_template: '{{capital}}'\n"
        "    grader: {source: \"def grade(sample, item):\\n    return sample['extracted_output'] == item['target']\\n\"}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "home"))
    assert main(["validate", "suite.yaml"]) == code == 1
    assert capsys.readouterr().err.splitlines() == shown


def test_every_relative_link_of_the_readme_is_in_the_repository():
    root = Path(__file__).resolve().parent.parent
    # markdown links, and documents named in backticks (`../shared/SPEC.md` was one; `../.env` in
    # the text is an example of a refused path, not a document)
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README) + re.findall(r"`(\.\./[^`\s]+\.md)`", README)
    relative = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert "docs/SPEC.md" in relative
    outside = [link for link in relative if not (root / link).resolve().is_relative_to(root)]
    missing = [link for link in relative if not (root / link).exists()]
    assert outside == [] and missing == []  # a clone has every file the README points to
