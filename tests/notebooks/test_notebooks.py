"""The example notebooks: saved executed, and still producing the same outputs (nbval).

Each notebook runs under ``pytest --nbval`` in a subprocess (nbval is a pytest plugin that
collects ``.ipynb`` files, which the main ``pytest`` run must not do), with the settings the
notebooks were saved with: ``scripts/execute_notebooks.py`` (the interpreter, the Plotly
renderer, no real-model variables). Volatile text (run ids, ports, temp folders) is masked by
``notebooks/sanitize.cfg``; cells whose output is volatile by nature carry
``# NBVAL_IGNORE_OUTPUT``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
SANITIZE = ROOT / "notebooks" / "sanitize.cfg"
sys.path.insert(0, str(ROOT / "scripts"))
from execute_notebooks import notebook_env  # noqa: E402  (the environment the outputs were saved in)

EXPECTED = {"01_quickstart.ipynb", "02_prompt_iteration.ipynb", "03_graders.ipynb", "04_huggingface.ipynb",
            "05_scale.ipynb", "06_lm_eval.ipynb", "07_pairwise.ipynb"}
# notebooks that start a local Ray (~20-30 s on 2 cores): nbval runs them in `make test-slow` / CI
SLOW = {"05_scale.ipynb"}
STANDIN_NOTE = re.compile(r"local stand-in models.*EVALNB_BASE_URL.*OPENAI_API_KEY.*EVALNB_MODELS", re.S)


def test_the_example_notebooks_exist():
    assert {p.name for p in NOTEBOOKS} == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_saved_executed_without_errors(path):
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and STANDIN_NOTE.search(first.source), "first cell must explain the stand-ins"
    code = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), f"{path.name}: not executed top to bottom in one go: {counts}"
    for cell in code:
        for out in cell.outputs:
            assert out.output_type != "error", f"{path.name}: saved with an error: {out.get('ename')}"
            assert "Traceback" not in out.get("text", ""), f"{path.name}: {out['text'][:300]}"
    # nothing machine-specific or secret in what is committed
    raw = path.read_text(encoding="utf-8")
    for leak in (r"/root/", r"/home/", r"/tmp/", r"\bsk-[A-Za-z0-9_-]{16,}", r"Bearer \w"):
        assert not re.search(leak, raw), f"{path.name} contains {leak!r}"


def test_sanitize_file_masks_run_ids_and_ports():
    import configparser

    config = configparser.ConfigParser()
    config.read(SANITIZE)
    text = "run eval_run_0123456789abcdef0123456789abcdef at http://127.0.0.1:40123/v1"
    for section in config.sections():
        text = re.sub(config[section]["regex"], config[section]["replace"], text)
    assert text == "run EVAL_RUN_ID at http://127.0.0.1:PORT/v1"


@pytest.mark.timeout(400)
@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow) if p.name in SLOW else p for p in NOTEBOOKS],
                         ids=lambda p: p.stem)
def test_notebook_outputs_match_nbval(path, tmp_path):
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
        "--nbval", "--nbval-current-env", "--nbval-sanitize-with", str(SANITIZE),
        "--nbval-cell-timeout", "240" if path.name in SLOW else "120", str(path),
    ]
    env = notebook_env()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=390)
    assert proc.returncode == 0, f"nbval failed for {path.name}:\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
    assert re.search(r"\b\d+ passed\b", proc.stdout), proc.stdout[-2000:]
