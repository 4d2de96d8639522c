"""Notebook widgets: preview a suite's items before a run, browse a run's outputs after it.

Both are plain Python objects holding ipywidgets (imported when a widget is built, never on
``import evalnb``). Each displays as two outputs: the live widget, and its static face (its
content as plain HTML, `markup.show_widget`) that exported notebooks, GitHub and nbviewer show
and that hides beside a drawn widget.
"""

from __future__ import annotations

from evalnb.widgets.browse_widget import BrowseWidget, browse
from evalnb.widgets.preview_widget import PreviewWidget, preview

__all__ = ["BrowseWidget", "PreviewWidget", "browse", "preview"]
