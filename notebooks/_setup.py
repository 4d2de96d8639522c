"""What every example notebook does first: a fresh evalnb home, a Plotly renderer, the models.

Kept out of the notebooks so each one opens with what matters. Importing this module:

- points ``EVALNB_HOME`` at a new temporary folder (removed when the kernel exits, or by the
  next notebook if the kernel was killed), so every execution starts from an empty store and
  the saved outputs are reproducible; ``EVALNB_NOTEBOOK_HOME`` names a folder to keep instead
  (``make demo`` does, to write the run report of the notebook's run);
- sets Plotly's renderer from ``PLOTLY_RENDERER`` (default ``plotly_mimetype``: JupyterLab
  draws it and nbval compares its JSON; evalnb's own figures also carry an offline chart and a
  picture whatever the renderer, see `evalnb.plots.figure`);
- makes ``examples/`` importable, for `setup_models` (stand-ins or real models, see
  ``examples/notebook_models.py``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent
EXAMPLES = NOTEBOOKS.parent / "examples"

PREFIX = "evalnb-notebook-"


def _sweep_stale_homes() -> None:
    """Remove homes left by kernels that were killed (atexit does not run then): their pid is gone."""
    for folder in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        pid = folder.name[len(PREFIX):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            pass  # alive, or not ours to judge


_sweep_stale_homes()
if os.environ.get("EVALNB_NOTEBOOK_HOME"):  # `make demo` keeps the runs, for `evalnb report RUN_ID`
    HOME = Path(os.environ["EVALNB_NOTEBOOK_HOME"]).resolve()
    HOME.mkdir(parents=True, exist_ok=True)
else:
    HOME = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
    atexit.register(shutil.rmtree, HOME, ignore_errors=True)
os.environ["EVALNB_HOME"] = str(HOME)

if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

import plotly.io as pio  # noqa: E402

pio.renderers.default = os.environ.get("PLOTLY_RENDERER") or "plotly_mimetype"

from notebook_models import ModelSetup, describe, real_endpoint_configured, setup_models  # noqa: E402

__all__ = ["EXAMPLES", "HOME", "ModelSetup", "describe", "real_endpoint_configured", "setup_models"]
