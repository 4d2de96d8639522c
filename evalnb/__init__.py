"""evalnb: notebook-first LLM evaluation suites.

Load an MKA1 suite manifest, preview how rows become prompts, run candidate models with live
progress and a crash-safe store, and compare them with honest statistics.

This module is the public face. Names are imported on first use (PEP 562), so
``import evalnb`` stays fast and pandas, datasets, plotly and ipywidgets load only when needed.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # manifest and rendering
    "Suite": "evalnb.manifest",
    "Task": "evalnb.manifest",
    "Generation": "evalnb.generation",
    "Item": "evalnb.prepare",
    "render_template": "evalnb.templates",
    "extract_output": "evalnb.extraction",
    # errors
    "EvalnbError": "evalnb.errors",
    "ManifestError": "evalnb.errors",
    "DatasetError": "evalnb.errors",
    "TemplateError": "evalnb.errors",
    "SandboxError": "evalnb.errors",
    "PreprocessError": "evalnb.errors",
    "ProviderError": "evalnb.errors",
    # models and runs
    "Model": "evalnb.providers",
    "run": "evalnb.runner",
    "arun": "evalnb.runner",
    "resume": "evalnb.runner",
    "runs": "evalnb.runner",
    "load_run": "evalnb.runner",
    "RunResult": "evalnb.results",
    # notebook
    "preview": "evalnb.widgets",
    # modules used as namespaces
    "files": "evalnb.data.files",
    "graders": "evalnb.graders",
    "plots": "evalnb.plots",
    "stats": "evalnb.stats",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'evalnb' has no attribute {name!r}")
    mod = import_module(module)
    value = mod if module.rsplit(".", 1)[-1] == name else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from evalnb.data import files
    from evalnb.errors import (
        DatasetError,
        EvalnbError,
        ManifestError,
        PreprocessError,
        ProviderError,
        SandboxError,
        TemplateError,
    )
    from evalnb.extraction import extract_output
    from evalnb.generation import Generation
    from evalnb.manifest import Suite, Task
    from evalnb.prepare import Item
    from evalnb.providers import Model
    from evalnb.results import RunResult
    from evalnb.runner import arun, load_run, resume, run, runs
    from evalnb.templates import render_template
    from evalnb.widgets import preview
