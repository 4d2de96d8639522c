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
