"""`make demo`: execute the quickstart notebook end to end and turn it into a shareable report.

    .venv/bin/python scripts/build_report.py [notebook] [--out reports/quickstart.html]

1. Executes the notebook in a fresh kernel (this interpreter) with
   ``PLOTLY_RENDERER=plotly_mimetype+notebook``, so each chart is saved as HTML with plotly.js
   inlined once: the report's charts stay interactive offline.
2. Writes the executed notebook beside the report (``reports/quickstart.ipynb``: open it in
   Jupyter for the live widgets).
3. Freezes the widgets to static HTML (`static_widgets`) and exports ``reports/quickstart.html``.
4. Prints the metrics table (the output of the cell tagged ``metrics``) and the comparisons in
   words (the cell tagged ``comparisons``: for each, whether the difference is real, its
   interval and the items needed to detect it), and saves them as
   ``reports/quickstart_metrics.txt`` and ``reports/quickstart_comparisons.txt``.

With ``OPENAI_API_KEY`` or ``EVALNB_BASE_URL`` (+ ``EVALNB_MODELS``) set, the notebook evaluates
those real models instead of the local stand-ins (see ``examples/notebook_models.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from static_widgets import freeze_widgets  # noqa: E402

REPORT_RENDERER = "plotly_mimetype+notebook"
METRICS_TAG = "metrics"
COMPARISONS_TAG = "comparisons"


def execute(path: Path, *, timeout: int = 600) -> "object":
    """The notebook at ``path``, executed in its own folder with the report's Plotly renderer."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    saved = os.environ.get("PLOTLY_RENDERER")
    os.environ["PLOTLY_RENDERER"] = REPORT_RENDERER  # the kernel inherits this environment
    try:
        with tempfile.TemporaryDirectory(prefix="evalnb-kernel-") as sockets:
            NotebookClient(nb, timeout=timeout, kernel_name="python3", config=_kernel_config(sockets),
                           resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        if saved is None:
            os.environ.pop("PLOTLY_RENDERER", None)
        else:
            os.environ["PLOTLY_RENDERER"] = saved
    return nb


def _kernel_config(folder: str) -> "object":
    """The kernel talks to us over local sockets (IPC) in ``folder`` rather than TCP on 127.0.0.1.

    Over TCP, ipykernel warns on every start that the channel is not encrypted ("Kernel is
    running over TCP without encryption"); IPC sockets are files in a private folder, so there
    is nothing to warn about and `make demo` prints only its report. Their path must be
    absolute: the kernel runs in the notebook's folder, this process elsewhere. Linux and macOS.
    """
    from traitlets.config import Config

    if os.name != "posix":
        return Config()
    return Config({"KernelManager": {"transport": "ipc", "ip": os.path.join(folder, "kernel")}})


def tagged_text(nb: "object", tag: str) -> str:
    """The plain-text output of the cell tagged ``tag`` (a table, or printed lines)."""
    for cell in nb.cells:
        if tag in cell.get("metadata", {}).get("tags", []):
            for output in cell.get("outputs", []):
                text = (output.get("data") or {}).get("text/plain") or output.get("text")
                if text:
                    return (text if isinstance(text, str) else "".join(text)).strip()
    raise SystemExit(f"no cell tagged {tag!r} with a text output: cannot print it")


def metrics_text(nb: "object") -> str:
    """The metrics table (the cell tagged ``metrics``)."""
    return tagged_text(nb, METRICS_TAG)


def to_html(nb: "object", title: str) -> str:
    import copy

    from nbconvert import HTMLExporter

    static = copy.deepcopy(nb)
    freeze_widgets(static)
    exporter = HTMLExporter(template_name="lab")
    body, _ = exporter.from_notebook_node(static, resources={"metadata": {"name": title}})
    return body


def build(notebook: Path, out: Path) -> str:
    """Execute, export and save; returns the metrics table and the comparisons, as text."""
    import nbformat

    start = time.monotonic()
    nb = execute(notebook)
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out.with_suffix(".ipynb"))
    out.write_text(to_html(nb, out.stem), encoding="utf-8")
    table = metrics_text(nb)
    out.with_name(f"{out.stem}_metrics.txt").write_text(table + "\n", encoding="utf-8")
    comparisons = tagged_text(nb, COMPARISONS_TAG)
    out.with_name(f"{out.stem}_comparisons.txt").write_text(comparisons + "\n", encoding="utf-8")
    print(f"report: {out} ({out.stat().st_size / 1e6:.1f} MB), notebook: {out.with_suffix('.ipynb')}, "
          f"built in {time.monotonic() - start:.1f}s", file=sys.stderr)
    return f"{table}\n\nIs each difference real?\n\n{comparisons}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", nargs="?", type=Path, default=ROOT / "notebooks" / "01_quickstart.ipynb")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "quickstart.html")
    args = parser.parse_args(argv)
    table = build(args.notebook.resolve(), args.out.resolve())
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
