"""The suite: the manifest's schema and everything it makes before a model is called.

``manifest.py`` is the schema (tasks, few-shot, metadata) with its leaf specs in
``datasets.py``, ``extraction_spec.py``, ``python_spec.py`` and ``generation.py`` and the
error reporting in ``_validation.py``; ``templates.py`` renders ``{{field}}`` templates;
``items.py`` turns rows into Items; ``checks.py`` finds what a run would trip over (data,
templates, code: ``Suite.validate()``); ``display.py`` draws a suite; ``suite.py`` is the
``Suite`` users hold (the schema plus ``items()``, ``validate()`` and display).
"""

from __future__ import annotations

from evalnb.suite.checks import Problem
from evalnb.suite.items import FewshotExample, Item
from evalnb.suite.manifest import SuiteManifest, Task
from evalnb.suite.suite import Suite

__all__ = ["FewshotExample", "Item", "Problem", "Suite", "SuiteManifest", "Task"]
