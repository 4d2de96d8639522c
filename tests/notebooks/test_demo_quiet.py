"""`make demo` prints its report, not Jupyter's start-up warnings: the kernel it runs speaks IPC."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from build_report import execute  # noqa: E402


def test_the_demo_kernel_starts_without_the_unencrypted_tcp_warning(tmp_path, capfd):
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")]), path)
    nb = execute(path, timeout=120)
    assert nb.cells[0].outputs[0]["text"] == "42\n"  # it ran
    err = capfd.readouterr().err  # the kernel writes its log to the stderr it inherits
    assert "without encryption" not in err and "WARNING" not in err, err
