"""Tables that display compactly and whole: every column stays in the DataFrame, only the view is chosen.

`result.metrics` has 17 columns, too many for a notebook or an exported page; `verdicts(...)`
holds sentences that pandas cuts at 50 characters. Both are returned as a `ShownFrame`: an
ordinary `pandas.DataFrame` (``.columns``, indexing, ``to_csv`` and everything derived from it are
unchanged, and whatever pandas builds from it is a plain DataFrame) whose notebook and text
displays show the chosen columns, with long text whole, and say what is left out and how to see
it (``pd.DataFrame(table)`` displays every column, as pandas does). A table may also carry a
*lead*, shown above it in both displays: `diff` leads with what changed in the prompt.
"""

from __future__ import annotations

import html
from typing import Callable

import pandas as pd

__all__ = ["ShownFrame", "compact_metrics", "led", "shown", "whole_verdicts"]


class ShownFrame(pd.DataFrame):
    """A DataFrame whose display shows some columns (all are there); see the module docstring."""

    _metadata = ["_evalnb_view", "_evalnb_lead"]

    @property
    def _constructor(self) -> Callable[..., pd.DataFrame]:
        return pd.DataFrame  # a slice, a copy, a merge: plain pandas again, displayed in full

    def _view(self) -> tuple[list[str], list[str]]:
        """(columns shown, columns whose text is shown whole)."""
        chooser = getattr(self, "_evalnb_view", None)
        if chooser is None:
            return list(self.columns), []
        return chooser(self)

    def _hidden_note(self, shown: list[str]) -> str:
        hidden = [str(c) for c in self.columns if c not in shown]
        if not hidden:
            return ""
        listed = ", ".join(hidden[:6]) + (", ..." if len(hidden) > 6 else "")
        return (f"{len(shown)} of {len(self.columns)} columns shown (not shown: {listed}); every column is in "
                "the DataFrame: pd.DataFrame(table) displays them all")

    def __repr__(self) -> str:
        shown, whole = self._view()
        short = [c for c in shown if c not in whole]
        with pd.option_context("display.width", 200):
            body = pd.DataFrame(self[short]).to_string(max_rows=60) if len(self) else "(no rows)"
        for column in whole:  # long text below the table, whole, one row each
            texts = [f"[{i}] {v}" for i, v in zip(self.index[:60], self[column].iloc[:60]) if isinstance(v, str) and v]
            if texts:
                body += f"\n{column}:\n" + "\n".join(texts)
        note = self._hidden_note(shown)
        lead = getattr(self, "_evalnb_lead", None)
        return (f"{lead}\n\n" if lead is not None else "") + body + (f"\n{note}" if note else "")

    def _repr_html_(self) -> str:
        shown, whole = self._view()
        with pd.option_context("display.max_colwidth", None):
            table = pd.DataFrame(self[shown]).to_html(max_rows=60, na_rep="", float_format=_short_float)
        if whole:  # long text wraps in place instead of being cut
            table = table.replace('<table border="1" class="dataframe">',
                                  '<table border="1" class="dataframe evalnb-shown" style="white-space:normal">', 1)
        note = self._hidden_note(shown)
        lead = getattr(self, "_evalnb_lead", None)
        return ((lead._repr_html_() if lead is not None else "") + table
                + (f"<p style='font-size:90%;color:#555'>{html.escape(note)}</p>" if note else ""))


def _short_float(x: float) -> str:
    return f"{x:.4g}"


def shown(frame: pd.DataFrame, view: Callable[[pd.DataFrame], tuple[list[str], list[str]]]) -> ShownFrame:
    """``frame`` (same data, same columns) displayed through ``view``."""
    out = ShownFrame(frame)
    out.attrs.update(frame.attrs)
    out._evalnb_view = view
    return out


def led(frame: pd.DataFrame, lead: object) -> ShownFrame:
    """``frame`` (same data, every column shown) displayed after ``lead``, an object with
    ``_repr_html_`` and ``str`` (e.g. `results.changes.Changes`)."""
    out = ShownFrame(frame)
    out.attrs.update(frame.attrs)
    out._evalnb_lead = lead
    return out


_METRIC_CORE = ("task_id", "model", "variant", "metric", "n", "mean", "ci_low", "ci_high")
_METRIC_IF_ANY = ("n_failed", "n_unscored", "n_not_run", "n_missing_field", "error")


def _metrics_view(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The identifying columns, n and the estimate; the counts and error only where any is set."""
    cols = [c for c in _METRIC_CORE if c in frame.columns]
    if "variant" in cols and not frame["variant"].astype("string").fillna("").str.len().gt(0).any():
        cols.remove("variant")  # a run without variants
    for name in _METRIC_IF_ANY:
        if name in frame.columns and _any_set(frame[name]):
            cols.append(name)
    cols += [c for c in frame.columns if str(c).startswith("pass_at_")]
    return cols, ["error"] if "error" in cols else []


def _any_set(column: pd.Series) -> bool:
    if column.dtype == object or str(column.dtype) == "string":
        return bool(column.notna().any() and column.fillna("").astype(str).str.len().gt(0).any())
    return bool(column.fillna(0).ne(0).any())


def compact_metrics(frame: pd.DataFrame) -> ShownFrame:
    """A metrics table that displays its main columns (`_metrics_view`); every column stays."""
    return shown(frame, _metrics_view)


_VERDICT_SHOWN = ("comparison", "task_id", "metric", "verdict", "text")


def _verdicts_view(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    return [c for c in _VERDICT_SHOWN if c in frame.columns], ["text"]


def whole_verdicts(frame: pd.DataFrame) -> ShownFrame:
    """A verdicts table that displays each sentence whole (never cut at pandas' 50 characters)."""
    return shown(frame, _verdicts_view)
