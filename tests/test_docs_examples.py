"""Every example in the README and the docs runs, page by page, offline, as pasted.

Each page's fenced ``python``, ``bash`` and ``console`` blocks run in order in one fresh
interpreter (a subprocess: `helpers/doc_page_runner.py`) started in a folder of its own that
holds a copy of ``examples/`` (so paths read as from the repository's root), with a fresh
``EVALNB_HOME``, no model keys and the Hugging Face Hub offline. Models are stand-ins the pages
start themselves (`evalnb.testing.LocalModelServer`); nothing but 127.0.0.1 is reached.
A block marked ``<!-- not run: reason -->`` is skipped and counted; the count and reasons are
printed at the end of this module's tests.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from helpers.doc_blocks import RUN, blocks

ROOT = Path(__file__).resolve().parent.parent
ALL_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PAGES = [page for page in ALL_PAGES if any(b.lang in RUN or b.file for b in blocks(page, ROOT))]  # pages with examples
RUNNER = Path(__file__).resolve().parent / "helpers" / "doc_page_runner.py"
_not_run: Counter[str] = Counter()
_ran: list[int] = []


def _page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.fixture(scope="module", autouse=True)
def _say_what_was_not_run(request: pytest.FixtureRequest):
    yield
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    lines = [f"docs examples: {sum(_ran)} blocks ran, {sum(_not_run.values())} marked not run"]
    lines += [f"  {count} x not run: {reason}" for reason, count in _not_run.most_common()]
    if reporter is None or capture is None:
        print("\n".join(lines))
        return
    with capture.global_and_fixture_disabled():  # shown in the progress output, not captured
        reporter.write_line("")
        for line in lines:
            reporter.write_line(line)


def _environment(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in {"OPENAI_API_KEY", "EVALNB_BASE_URL", "EVALNB_MODELS", "EVALNB_API_KEY", "RAY_ADDRESS"}}
    env.update(
        EVALNB_HOME=str(folder / ".evalnb"),
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(folder / ".hf"),
        PLOTLY_RENDERER="json",
    )
    return env


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_example_of_the_page_runs(page: Path, tmp_path: Path):
    found = blocks(page, ROOT)
    shown = [b for b in found if b.lang in RUN or b.file]
    for block in shown:
        if block.not_run:
            _not_run[block.not_run] += 1
    todo = [b for b in shown if not b.not_run]
    _ran.append(len([b for b in todo if not b.file]))
    if not todo:
        return  # every example of the page is marked not run (and counted)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    payload = json.dumps([{"where": b.where, "lang": b.lang, "code": b.code, "file": b.file} for b in todo])
    done = subprocess.run([sys.executable, str(RUNNER)], input=payload, capture_output=True, text=True,
                          cwd=tmp_path, env=_environment(tmp_path), timeout=280)
    assert done.returncode == 0, f"{_page_id(page)}:\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"


def test_the_runner_fails_on_a_broken_block_and_names_it(tmp_path: Path):
    """The check can fail: a block that raises stops the page with its place, later blocks unrun."""
    payload = json.dumps([
        {"where": "page.md:3", "lang": "python", "code": "x = 1\nx", "file": None},
        {"where": "page.md:9", "lang": "python", "code": "undefined_name + 1", "file": None},
        {"where": "page.md:12", "lang": "bash", "code": "touch reached", "file": None},
    ])
    done = subprocess.run([sys.executable, str(RUNNER)], input=payload, capture_output=True, text=True,
                          cwd=tmp_path, env=_environment(tmp_path), timeout=60)
    assert done.returncode == 1
    assert "FAILED: the block at page.md:9" in done.stderr and "NameError" in done.stderr
    assert "1\n" in done.stdout  # the first block's last expression was shown
    assert not (tmp_path / "reached").exists()


def test_the_runner_refuses_addresses_other_than_loopback(tmp_path: Path):
    code = "import socket\nsocket.create_connection(('192.0.2.1', 80), timeout=1)"
    payload = json.dumps([{"where": "page.md:1", "lang": "python", "code": code, "file": None}])
    done = subprocess.run([sys.executable, str(RUNNER)], input=payload, capture_output=True, text=True,
                          cwd=tmp_path, env=_environment(tmp_path), timeout=60)
    assert done.returncode == 1 and "run offline: refused a connection" in done.stderr


def test_a_console_block_must_print_what_the_page_shows(tmp_path: Path):
    ok = "$ echo hello\nhello\n$ echo $((6 * 7))\n42\n"
    wrong = "$ echo hello\nhullo\n"
    for code, status in ((ok, 0), (wrong, 1)):
        payload = json.dumps([{"where": "page.md:1", "lang": "console", "code": code, "file": None}])
        done = subprocess.run([sys.executable, str(RUNNER)], input=payload, capture_output=True, text=True,
                              cwd=tmp_path, env=_environment(tmp_path), timeout=60)
        assert done.returncode == status, done.stderr


def test_markers_are_read_and_a_not_run_marker_needs_its_reason(tmp_path: Path):
    page = tmp_path / "p.md"
    page.write_text("<!-- not run: needs a GPU -->\n```python\nx = 1\n```\n\n<!-- file: s.yaml -->\n```yaml\na: 1\n```\n"
                    "\n```python\ny = 2\n```\n")
    found = blocks(page, tmp_path)
    assert [(b.lang, b.not_run, b.file) for b in found] == [
        ("python", "needs a GPU", None), ("yaml", None, "s.yaml"), ("python", None, None)]
    page.write_text("<!-- not run: -->\n```python\nx = 1\n```\n")
    with pytest.raises(ValueError, match="needs its reason"):
        blocks(page, tmp_path)


def test_a_fence_without_a_language_is_refused_not_skipped(tmp_path: Path):
    page = tmp_path / "p.md"
    page.write_text("Run it:\n\n```\nevalnb run suite.yaml\n```\n")
    with pytest.raises(ValueError, match=r"p.md:3: a fence with no language"):
        blocks(page, tmp_path)
    page.write_text("```{toctree}\n:maxdepth: 1\n```\n\n```text\nplain\n```\n")  # directives name theirs
    assert [b.lang for b in blocks(page, tmp_path)] == ["{toctree}", "text"]


def test_the_quickstart_steps_each_show_their_output():
    """One cell per step, each ending in an expression, so pasted into Jupyter each shows something."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Quickstart\n(.*?)^## ", readme, re.S | re.M).group(1)
    steps = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(steps) >= 4
    for step in steps:
        tree = ast.parse(step)
        assert isinstance(tree.body[-1], ast.Expr), f"this Quickstart step shows nothing:\n{step}"
    assert "Suite.from_dict" in section and "LocalModelServer" in section and "evalnb.report" in section


def test_every_relative_link_of_the_readme_and_docs_is_in_the_repository():
    links = []
    for page in ALL_PAGES:
        text = page.read_text(encoding="utf-8")
        for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if not re.match(r"[a-z]+:", link):
                links.append((page, link))
    missing = [f"{_page_id(page)}: {link}" for page, link in links
               if not (page.parent / link).exists() or not (page.parent / link).resolve().is_relative_to(ROOT)]
    assert len(links) > 10 and missing == []
