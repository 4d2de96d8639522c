"""Widgets that share their Layout and style: what keeps a saved notebook small.

ipywidgets gives every widget a Layout model and a style model of its own, even when both are
all defaults, and a notebook executed by nbclient saves every one of them (a default Layout is
about 1.1 kB of nulls). A run's progress panel, a preview and two browse widgets made 90
Layouts and 31 HTML styles, 115 kB of a 561 kB notebook. `make` builds a widget on one shared
Layout and one shared style per (style class, settings), so the notebook saves each once.
The shared models are never changed after they are made: give a widget a layout of its own
where one must differ.
"""

from __future__ import annotations

from typing import Any

__all__ = ["layout", "make"]

_SHARED: dict[Any, Any] = {}


def _alive(widget: Any) -> bool:
    return widget is not None and getattr(widget, "comm", None) is not None


def _shared(key: Any, build: Any) -> Any:
    """The instance kept for ``key``, made again after `Widget.close_all` closed it."""
    widget = _SHARED.get(key)
    if not _alive(widget):
        widget = _SHARED[key] = build()
    return widget


def layout(**settings: str) -> Any:
    """One Layout per distinct ``settings`` (none: the default layout), shared by every caller."""
    import ipywidgets as w

    return _shared(("layout", tuple(sorted(settings.items()))), lambda: w.Layout(**settings))


def make(kind: Any, *args: Any, style: dict[str, str] | None = None, **kwargs: Any) -> Any:
    """``kind(*args, **kwargs)`` on the shared default Layout and a shared ``style`` (settings
    such as ``{"description_width": "initial"}``; none: the class's default style)."""
    kwargs.setdefault("layout", layout())
    trait = kind.class_traits().get("style")
    if trait is not None and getattr(trait, "klass", None) is not None:
        settings = style or {}
        klass = trait.klass
        kwargs["style"] = _shared(("style", klass, tuple(sorted(settings.items()))), lambda: klass(**settings))
    elif style is not None:
        kwargs["style"] = style
    return kind(*args, **kwargs)
