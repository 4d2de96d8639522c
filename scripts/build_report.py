"""`make demo`: execute the quickstart notebook end to end and turn it into shareable reports.

    .venv/bin/python scripts/build_report.py [notebook] [--out reports/quickstart.html]

1. Executes the notebook in a fresh kernel (this interpreter), keeping its evalnb store in
   ``reports/<name>_home`` (``EVALNB_NOTEBOOK_HOME``, see ``notebooks/_setup.py``).
2. Writes the executed notebook beside the report (``reports/quickstart.ipynb``: open it in
   Jupyter for the live widgets).
3. Writes the notebook report ``reports/quickstart.html`` (what ``evalnb report NOTEBOOK`` does:
   `evalnb.reporting.notebook`); ``make demo`` then writes the run report of the notebook's run
   with ``evalnb --home reports/quickstart_home report latest -o reports/quickstart_run.html``.
4. Prints the metrics table (the output of the cell tagged ``metrics``) and the comparisons in
   words (the cell tagged ``comparisons``), and saves them as ``reports/quickstart_metrics.txt``
   and ``reports/quickstart_comparisons.txt``; a notebook without those tags just has no text
   summary (a note says so).

With ``OPENAI_API_KEY`` or ``EVALNB_BASE_URL`` (+ ``EVALNB_MODELS``) set, the notebook evaluates
those real models instead of the local stand-ins (see ``examples/notebook_models.py``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT_RENDERER = "plotly_mimetype"  # evalnb's figures carry their own offline chart and picture
METRICS_TAG = "metrics"
COMPARISONS_TAG = "comparisons"


def execute(path: Path, *, home: Path | None = None, timeout: int = 600) -> "object":
    """The notebook at ``path``, executed in its own folder (its runs kept in ``home``)."""
    from evalnb.reporting.notebook import execute_notebook

    saved = dict(os.environ)
    os.environ["PLOTLY_RENDERER"] = REPORT_RENDERER  # the kernel inherits this environment
    if home is not None:
        os.environ["EVALNB_NOTEBOOK_HOME"] = str(home)
    try:
        return execute_notebook(path, timeout=timeout)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def tagged_text(nb: "object", tag: str) -> str | None:
    """The plain-text output of the cell tagged ``tag`` (None when no cell has the tag)."""
    for cell in nb.cells:
        if tag in cell.get("metadata", {}).get("tags", []):
            for output in cell.get("outputs", []):
                text = (output.get("data") or {}).get("text/plain") or output.get("text")
                if text:
                    return (text if isinstance(text, str) else "".join(text)).strip()
    return None


def build(notebook: Path, out: Path) -> str:
    """Execute, export and save; returns the metrics table and the comparisons, as text."""
    import nbformat

    from evalnb.reporting.notebook import notebook_report_html

    start = time.monotonic()
    home = out.parent / f"{out.stem}_home"
    shutil.rmtree(home, ignore_errors=True)
    nb = execute(notebook, home=home)
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out.with_suffix(".ipynb"))
    out.write_text(notebook_report_html(nb, title=out.stem), encoding="utf-8")
    print(f"notebook report: {out} ({out.stat().st_size / 1e6:.1f} MB), notebook: {out.with_suffix('.ipynb')}, "
          f"its runs: {home} (`evalnb --home {home} report latest` writes the run report), "
          f"built in {time.monotonic() - start:.1f}s", file=sys.stderr)
    parts = []
    for tag, name, heading in ((METRICS_TAG, "metrics", ""), (COMPARISONS_TAG, "comparisons", "Is each difference real?")):
        text = tagged_text(nb, tag)
        if text is None:
            print(f"note: no cell tagged {tag!r} with a text output: no {name} summary", file=sys.stderr)
            continue
        out.with_name(f"{out.stem}_{name}.txt").write_text(text + "\n", encoding="utf-8")
        parts.append(f"{heading}\n\n{text}" if heading else text)
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", nargs="?", type=Path, default=ROOT / "notebooks" / "01_quickstart.ipynb")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "quickstart.html")
    args = parser.parse_args(argv)
    summary = build(args.notebook.resolve(), args.out.resolve())
    if summary:
        print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
