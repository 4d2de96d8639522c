"""Re-execute the example notebooks in place, saving their outputs (what nbval compares against).

Run this after editing a notebook, with the same settings the test uses:

    .venv/bin/python scripts/execute_notebooks.py            # all of notebooks/*.ipynb
    .venv/bin/python scripts/execute_notebooks.py notebooks/02_prompt_iteration.ipynb

Settings that must match `tests/test_notebooks.py`: Plotly's renderer (``plotly_mimetype``,
set here and by the test through ``PLOTLY_RENDERER``), the kernel (this interpreter), and the
working directory (the notebook's folder). Real-model variables are removed, so the saved
outputs always come from the local stand-in models.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
RENDERER = "plotly_mimetype"
REMOVED_VARIABLES = ("EVALNB_BASE_URL", "OPENAI_API_KEY", "EVALNB_MODELS", "EVALNB_API_KEY", "EVALNB_HOME")


def notebook_env(renderer: str = RENDERER) -> dict[str, str]:
    """The environment the notebooks are saved and tested in: stand-ins, a fixed renderer."""
    env = {k: v for k, v in os.environ.items() if k not in REMOVED_VARIABLES}
    env["PLOTLY_RENDERER"] = renderer
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # quiets a debugger warning on stderr
    return env


def execute(path: Path, *, timeout: int = 300) -> float:
    """Execute ``path`` in a fresh kernel running this interpreter and save it; returns seconds."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    saved = dict(os.environ)
    env = notebook_env()  # before clearing: it is this environment minus the real-model variables
    os.environ.clear()
    os.environ.update(env)  # the kernel inherits this process's environment
    try:
        start = time.monotonic()
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}})
        client.execute()
        elapsed = time.monotonic() - start
    finally:
        os.environ.clear()
        os.environ.update(saved)
    nbformat.write(nb, path)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(NOTEBOOKS.glob("[0-9]*.ipynb"))
    for path in paths:
        seconds = execute(path.resolve())
        print(f"executed {path} in {seconds:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
