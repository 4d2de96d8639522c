"""Where evalnb keeps its state: the file store and the SQLite results store.

Defaults to ``./.evalnb`` (beside the notebook) so results travel with the project;
``EVALNB_HOME`` overrides it.
"""

from __future__ import annotations

import os
from pathlib import Path


def evalnb_home() -> Path:
    """The evalnb home folder, created on first use."""
    home = Path(os.environ.get("EVALNB_HOME") or ".evalnb").expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    return home
