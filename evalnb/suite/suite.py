"""`Suite`: the manifest plus what a notebook wants of it (its items, a readable table).

The schema (`SuiteManifest`) knows nothing of rows, items or display; this thin face adds
them on top, so the dependency points one way: suite -> items/display -> manifest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalnb.suite.display import suite_html, suite_text
from evalnb.suite.items import suite_items
from evalnb.suite.manifest import SuiteManifest

if TYPE_CHECKING:
    from evalnb.suite.items import Item

__all__ = ["Suite"]


class Suite(SuiteManifest):
    """A versioned manifest: 1-100 tasks. Build it with ``from_dict`` or ``from_file``."""

    def items(self, task_id: str, limit: int | None = None) -> list[Item]:
        """The task's rows rendered as Items (prompt, target, row), as the runner will send them."""
        return suite_items(self, task_id, limit=limit)

    def _repr_html_(self) -> str:
        """A static table of the tasks (reads the same in Jupyter and in an exported report)."""
        return suite_html(self)

    def __str__(self) -> str:
        return suite_text(self)
