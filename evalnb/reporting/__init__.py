"""Reports you can send: a notebook as one offline HTML page, or a run as one without a notebook.

`report(source, path)`: ``source`` is a `RunResult`, a run id, or a ``.ipynb`` path. A run gives
the run report (`run_page`); a notebook gives the notebook report (`notebook`). The CLI face is
``evalnb report``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["report"]


def report(source: Any, path: str | Path, *, baseline: Any = None, execute: bool = False,
           store: Any = None, interactive: bool = False) -> Path:
    """Write one self-contained HTML file for ``source`` to ``path``; returns the path.

    ``baseline`` (a `RunResult` or run id, runs only): adds the diff against it and the
    "Changed vs baseline" filter. ``execute`` (notebooks only): run the notebook first.
    ``interactive`` (notebooks only): live Plotly charts, plotly.js inlined once (~4.8 MB more);
    by default charts are the pictures evalnb draws.
    ``store``: where run ids are looked up (default: the store of ``EVALNB_HOME``).
    """
    if isinstance(source, (str, Path)) and str(source).endswith(".ipynb"):
        if baseline is not None:
            raise ValueError("baseline= is for a run report, not a notebook")
        from evalnb.reporting.notebook import notebook_report

        return notebook_report(source, path, execute=execute, interactive=interactive)
    if interactive:
        raise ValueError("interactive= is for a notebook report; a run report's charts are pictures")
    from evalnb.reporting.run_page import write_run_report

    return write_run_report(_run(source, store), path, baseline=None if baseline is None else _run(baseline, store))


def _run(value: Any, store: Any) -> Any:
    from evalnb.results.run_result import RunResult

    if isinstance(value, RunResult):
        return value
    if isinstance(value, str):
        from evalnb.runner.api import load_run

        return load_run(value, store=store)
    raise TypeError(f"a run report needs a RunResult or a run id, got {type(value).__name__}")
