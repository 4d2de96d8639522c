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
    "Suite": "evalnb.suite",
    "Task": "evalnb.suite",
    "Generation": "evalnb.suite.generation",
    "Item": "evalnb.suite.items",
    "render_template": "evalnb.suite.templates",
    "extract_output": "evalnb.scoring.extraction",
    # errors
    "EvalnbError": "evalnb.errors",
    "ManifestError": "evalnb.errors",
    "DatasetError": "evalnb.errors",
    "TemplateError": "evalnb.errors",
    "SandboxError": "evalnb.errors",
    "PreprocessError": "evalnb.errors",
    "ProviderError": "evalnb.errors",
    "SandboxIsolationWarning": "evalnb.sandbox.isolation",
    # models and runs
    "Model": "evalnb.providers",
    "run": "evalnb.runner.api",
    "arun": "evalnb.runner.api",
    "resume": "evalnb.runner.api",
    "runs": "evalnb.runner.api",
    "load_run": "evalnb.runner.api",
    "estimate": "evalnb.runner.preflight",
    "RunResult": "evalnb.results.run_result",
    "RayExecutor": "evalnb.runner.executors.ray_driver",
    "BatchExecutor": "evalnb.runner.executors.batch",
    "cancel": "evalnb.runner.api",
    # notebook
    "preview": "evalnb.widgets",
    # sharing
    "report": "evalnb.reporting",
    # what confines graders here
    "sandbox_isolation": "evalnb.sandbox.report",
    # modules used as namespaces
    "files": "evalnb.data.upload_store",
    "graders": "evalnb.graders",
    "plots": "evalnb.plots",
    "stats": "evalnb.results.stats",
}

_NAMESPACES = frozenset({"files", "graders", "plots", "stats"})  # the module itself, not a name in it
__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'evalnb' has no attribute {name!r}")
    mod = import_module(module)
    value = mod if name in _NAMESPACES else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from evalnb.data import upload_store as files
    from evalnb.errors import (
        DatasetError,
        EvalnbError,
        ManifestError,
        PreprocessError,
        ProviderError,
        SandboxError,
        TemplateError,
    )
    from evalnb.scoring.extraction import extract_output
    from evalnb.suite.generation import Generation
    from evalnb.suite import Suite, Task
    from evalnb.suite.items import Item
    from evalnb.providers import Model
    from evalnb.sandbox.isolation import SandboxIsolationWarning
    from evalnb.sandbox.report import sandbox_isolation
    from evalnb.results.run_result import RunResult
    from evalnb.runner.api import arun, cancel, load_run, resume, run, runs
    from evalnb.runner.executors.batch import BatchExecutor
    from evalnb.runner.executors.ray_driver import RayExecutor
    from evalnb.runner.preflight import estimate
    from evalnb.suite.templates import render_template
    from evalnb.widgets import preview
    from evalnb.reporting import report
