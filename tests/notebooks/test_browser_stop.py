"""The progress panel's Stop button, clicked in a real JupyterLab (headless Chromium).

A small notebook is built in a temporary workspace: a LocalModelServer that answers "42"
after 0.2 s, a 60-item suite graded 1.0, and model ``m`` (chat API). Cells are run one at a
time with Shift+Enter.

(A) Background run: ``task = asyncio.ensure_future(evalnb.arun(...))`` returns at once and
    the panel shows in that cell's output. Once the panel counts some samples, clicking Stop
    (``.evalnb-progress button``) makes ``await task`` return status ``cancelled`` with
    0 < samples < 60.

(B) Blocking run: ``result = evalnb.run(...)``. While the cell blocks, the kernel's main
    thread waits on the run's helper thread and does not read comm messages, so a Stop click
    is only queued: it cannot stop this run. The notebook's interrupt
    (Kernel > Interrupt) does: ``evalnb.run`` turns the KeyboardInterrupt into cancelling the
    run, saves what finished, and raises KeyboardInterrupt naming the run and how to resume it;
    the next cell reads the partial result back with ``evalnb.load_run("latest")`` (status
    ``cancelled``). This test clicks Stop (harmless), then asserts the interrupt path.

Skipped only when ``/usr/bin/chromium`` is missing outside CI; in CI (``CI`` set) it must run.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
TOTAL = 60
sys.path.insert(0, str(ROOT / "scripts"))
from execute_notebooks import notebook_env  # noqa: E402
from helpers.jupyterlab import CHROMIUM, open_lab_notebook, serve_jupyterlab  # noqa: E402

if not CHROMIUM.exists() and not os.environ.get("CI"):
    pytest.skip("no /usr/bin/chromium (install: apt-get install chromium); required in CI", allow_module_level=True)

pytestmark = pytest.mark.timeout(180)

SETUP = f'''\
import asyncio, json, os, pathlib, tempfile
tmp = pathlib.Path(tempfile.mkdtemp(prefix="evalnb-stop-"))
os.environ["EVALNB_HOME"] = str(tmp / "home_a")
import evalnb
from evalnb.testing import LocalModelServer
server = LocalModelServer(latency=0.2).start()
data = tmp / "data"
data.mkdir()
(data / "t.jsonl").write_text("".join(json.dumps({{"q": f"question {{i}}", "a": "42"}}) + "\\n" for i in range({TOTAL})))
suite = evalnb.Suite.from_dict({{"tasks": [{{
    "id": "t", "type": "qa", "dataset": {{"path": "t.jsonl"}},
    "prompt_template": "{{{{q}}}}", "target_template": "{{{{a}}}}",
    "grader": {{"source": "def grade(sample, item):\\n    return 1.0\\n"}},
}}]}}, base_dir=data)
model = evalnb.Model("m", base_url=server.base_url, api="chat")
print("READY")
'''
CELLS = [
    SETUP,
    # (A) a background task: the cell returns at once
    "task = asyncio.ensure_future(evalnb.arun(suite, [model], concurrency=2))",
    'result = await task\nprint("STATUS_A", result.status, len(result.samples))',
    # (B) a blocking run, in a fresh store so nothing from (A) is reused
    'os.environ["EVALNB_HOME"] = str(tmp / "home_b")\n'
    "result = evalnb.run(suite, [model], concurrency=2)\n"
    'print("RETURNED" + "_B")',  # the marker is not in the source a traceback quotes
    'result = evalnb.load_run("latest")\nprint("STATUS_B", result.status, len(result.samples))',
]


@pytest.fixture
def jupyterlab(tmp_path):
    """JupyterLab on 127.0.0.1 over a workspace holding ``stop.ipynb``; yields (url, token)."""
    root = tmp_path / "lab"
    root.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "stop.ipynb")
    with serve_jupyterlab(tmp_path, root, notebook_env()) as served:
        yield served


def _done(panel) -> tuple[int, int] | None:
    m = re.search(r"(\d+)/(\d+) samples", panel.inner_text())
    return (int(m.group(1)), int(m.group(2))) if m else None


def _wait_for_progress(panel, *, timeout: float = 30) -> tuple[int, int]:
    """Until the panel counts at least one finished sample; returns (done, total)."""
    deadline = time.monotonic() + timeout
    while True:
        got = _done(panel) if panel.count() else None
        if got and got[0] > 0:
            return got
        assert time.monotonic() < deadline, f"no progress shown: {panel.all_inner_texts()}"
        time.sleep(0.1)


def test_stop_button_and_interrupt_cancel_runs_in_jupyterlab(jupyterlab):
    from playwright.sync_api import expect

    url, token = jupyterlab
    expect.set_options(timeout=30_000)
    with open_lab_notebook(url, token, "stop.ipynb") as (page, notebook):
        cells = notebook.locator(".jp-CodeCell")
        assert cells.count() == len(CELLS)

        def run(i: int) -> None:
            cells.nth(i).locator(".jp-InputArea-editor").click()
            page.keyboard.press("Shift+Enter")

        def finished(i: int, timeout: float = 30) -> str:
            prompt = cells.nth(i).locator(".jp-InputArea-prompt")
            expect(prompt).to_have_text(re.compile(r"\[\d+\]:"), timeout=timeout * 1000)
            return cells.nth(i).locator(".jp-OutputArea").inner_text()

        def status(text: str, tag: str) -> tuple[str, int]:
            m = re.search(rf"{tag} (\w+) (\d+)", text)
            assert m, text
            return m.group(1), int(m.group(2))

        run(0)
        assert "READY" in finished(0)

        # (A) background task + the panel's Stop button
        run(1)
        finished(1, timeout=10)  # the cell returns at once; the run goes on in the kernel's loop
        panel_a = cells.nth(1).locator(".evalnb-progress")
        done, total = _wait_for_progress(panel_a)
        assert total == TOTAL and done < TOTAL
        panel_a.locator("button").click()
        expect(panel_a.locator("button")).to_be_disabled()
        run(2)
        state, n = status(finished(2), "STATUS_A")
        assert state == "cancelled"
        assert 0 < n < TOTAL
        expect(panel_a).to_contain_text("cancelled")

        # (B) blocking run: Stop is queued but cannot be read while the cell blocks;
        # the notebook's interrupt stops it
        run(3)
        panel_b = cells.nth(3).locator(".evalnb-progress")
        _wait_for_progress(panel_b)
        panel_b.locator("button").click()
        clicked = _done(panel_b)
        time.sleep(1.0)
        after = _done(panel_b)
        prompt_b = cells.nth(3).locator(".jp-InputArea-prompt").inner_text().strip()
        print(f"(B) after Stop: {clicked} -> {after} one second later, prompt {prompt_b!r}")
        page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").click()
        page.locator("[data-command='kernelmenu:interrupt']").click()
        out_b = finished(3)
        assert "RETURNED_B" not in out_b, out_b  # evalnb.run raised: the cell stopped there
        assert "KeyboardInterrupt" in out_b and "resume with `evalnb.resume(" in out_b, out_b
        run(4)
        state, n = status(finished(4), "STATUS_B")
        assert state == "cancelled"
        assert 0 < n < TOTAL
        expect(panel_b).to_contain_text("cancelled")
        print(f"(B) panel at the end: {panel_b.inner_text()!r}")
