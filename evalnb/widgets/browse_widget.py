"""`browse`: page through a run's real outputs, every model side by side for each item.

One entry per (task, sample_index), shown ``page_size`` entries to a page; ``task_id`` keeps one
task's items. A filter narrows the pages to the ones worth reading:
``failures`` (a model failed, errored, or extraction found nothing), ``disagreements``
(the models' extracted outputs or first-metric scores differ) and, when the caller says
which items changed against a baseline run (`RunResult.browse(baseline=...)`), ``changed``. The samples frame is the
one ``RunResult.samples`` gives; any numeric column outside the known sample fields is read
as a metric, so new metric columns need no change here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalnb.sample import SAMPLE_FIELDS, Sample
from evalnb.widgets import markup as h
from evalnb.widgets.preview_widget import _as_index

if TYPE_CHECKING:
    from evalnb.suite import Suite

__all__ = ["FILTERS", "BrowseWidget", "browse", "metric_columns"]

FILTERS = ("all", "failures", "disagreements", "changed")
REQUIRED = ("task_id", "model", "sample_index")
# Columns that are never metrics, even when numeric: every Sample field and stored column
# (evalnb.sample), and the token, cost and provenance columns the results frame adds.
KNOWN_COLUMNS = frozenset(SAMPLE_FIELDS) | frozenset(Sample.__slots__) | frozenset(
    {
        "id", "object", "attempts", "retries", "empty_retries", "input_tokens", "output_tokens", "total_tokens",
        "reasoning_tokens", "cached_tokens", "reused", "model_name", "api", "judge_cost_usd",
    }
)  # fmt: skip


def browse(
    samples_df: Any,
    *,
    suite: "Suite | None" = None,
    filter: str | None = None,
    models: list[str] | None = None,
    changed: set[tuple[str, int]] | None = None,
    task_id: str | None = None,
    page_size: int = 5,
    static_pages: int | None = 3,
    intro: str | None = None,
) -> "BrowseWidget":
    """A widget paging through ``samples_df``, ``page_size`` (task, sample_index) items a page.

    ``filter``: ``"all"`` (default), ``"failures"``, ``"disagreements"``, or ``"changed"``
    (needs ``changed``: the (task_id, sample_index) of the items to show, e.g. the items
    whose score changed against a baseline). ``models``: the model labels to show, in this
    order (default: all, in order of appearance). ``suite``: optional; it names the declared
    metrics and shows prompts with few-shot examples boxed. ``task_id``: only that task's items.
    ``static_pages``: how many pages (from the current one) the static face holds, for exports
    and viewers without JavaScript; ``None`` for all of them (a line says how many are left out).
    ``intro``: HTML shown above the pages (already escaped: e.g. what changed in the suite).
    Where the samples of an item were sent different prompts (two runs, two variants), each
    prompt is shown with its words inserted and deleted against the first one marked.
    """
    return BrowseWidget(samples_df, suite=suite, filter=filter, models=models, changed=changed,
                        task_id=task_id, page_size=page_size, static_pages=static_pages, intro=intro)


def metric_columns(frame: Any, declared: tuple[str, ...] = ()) -> list[str]:
    """Columns holding per-sample scores: declared metric ids, and numeric non-sample columns."""
    return [
        column
        for column in frame.columns
        if column not in KNOWN_COLUMNS and (column in declared or _numeric(frame[column]))
    ]


def _numeric(series: Any) -> bool:
    import pandas as pd

    if pd.api.types.is_numeric_dtype(series):
        return True
    values = [v for v in series if not _missing(v)]
    return bool(values) and all(isinstance(v, (int, float)) for v in values)


def _missing(value: Any) -> bool:
    """None, NaN, pd.NA or NaT: a cell with no value."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return type(value).__name__ in ("NAType", "NaTType")


def _clean(value: Any) -> Any:
    """NaN / pd.NA -> None; numpy scalars -> Python values (so comparisons behave)."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            value = value.item()
        except (ValueError, TypeError):
            pass
    return None if _missing(value) else value


@dataclass
class Page:
    """One item of one task, with every model's sample for it (in model order)."""

    task_id: str
    sample_index: int
    samples: list[dict[str, Any]]
    failure: bool
    disagreement: bool
    changed: bool = False


class BrowseWidget:
    """Filter + navigation over `Page`s; ``.widget`` is the displayable ipywidgets tree."""

    def __init__(
        self,
        samples_df: Any,
        *,
        suite: "Suite | None" = None,
        filter: str | None = None,
        models: list[str] | None = None,
        changed: set[tuple[str, int]] | None = None,
        task_id: str | None = None,
        page_size: int = 5,
        static_pages: int | None = 3,
        intro: str | None = None,
    ) -> None:
        self.intro = intro or ""
        self.page_size = _positive("page_size", page_size)
        self.static_pages = None if static_pages is None else _positive("static_pages", static_pages)
        if not (hasattr(samples_df, "columns") and hasattr(samples_df, "to_dict")):
            raise TypeError(f"browse needs a samples DataFrame, got {type(samples_df).__name__}")
        missing = [c for c in REQUIRED if c not in samples_df.columns]
        if missing:
            have = ", ".join(map(str, samples_df.columns)) or "none"
            raise ValueError(f"samples frame is missing column(s) {', '.join(missing)}; it has: {have}")
        self.filters = FILTERS if changed is not None else tuple(f for f in FILTERS if f != "changed")
        filter = "all" if filter is None else filter
        self._check_filter(filter)
        self.suite = suite
        frame = _expand_scores(samples_df)
        declared = _declared_metrics(suite)
        self.metrics = metric_columns(frame, declared)
        self.models = _choose_models(frame, models)
        frame = frame[frame["model"].isin(self.models)]
        self.task_id = task_id
        if task_id is not None:
            tasks = list(dict.fromkeys(str(t) for t in frame["task_id"]))
            if str(task_id) not in tasks:
                raise ValueError(f"unknown task_id {task_id!r}; the samples have: {', '.join(tasks) or 'none'}")
            frame = frame[frame["task_id"].astype(str) == str(task_id)]
        self.all_pages = _pages(frame, self.models, self.metrics)
        for page in self.all_pages:
            page.changed = changed is not None and (page.task_id, page.sample_index) in changed
        counts = {
            "all": len(self.all_pages),
            "failures": sum(p.failure for p in self.all_pages),
            "disagreements": sum(p.disagreement for p in self.all_pages),
            "changed": sum(p.changed for p in self.all_pages),
        }
        self.counts = {name: counts[name] for name in self.filters}
        self.filter, self.index, self.pages = filter, 0, self._filtered(filter)
        self._items: dict[str, Any] = {}
        self._syncing = False
        self._face: h.FaceHandle | None = None
        self._build()
        self._refresh()

    # -- state and navigation -------------------------------------------------------------------

    @property
    def page(self) -> Page | None:
        """The item at ``index`` (the first of the current page after a page move)."""
        return self.pages[self.index] if self.pages else None

    @property
    def page_number(self) -> int:
        """The current page (0-based): the one holding item ``index``."""
        return self.index // self.page_size

    @property
    def page_count(self) -> int:
        return -(-len(self.pages) // self.page_size)

    def page_items(self, number: int | None = None) -> list[Page]:
        """The items of page ``number`` (default: the current page)."""
        number = self.page_number if number is None else number
        return self.pages[number * self.page_size:(number + 1) * self.page_size]

    def _check_filter(self, name: str) -> None:
        if name == "changed" and name not in self.filters:
            raise ValueError("filter 'changed' needs a baseline: RunResult.browse(baseline=earlier_result), "
                             "or browse(..., changed={(task_id, sample_index), ...})")
        if name not in self.filters:
            raise ValueError(f"unknown filter {name!r}; use one of: {', '.join(self.filters)}")

    def set_filter(self, name: str) -> None:
        """Show only the pages of filter ``name`` (starting from the first)."""
        self._check_filter(name)
        self.filter, self.index, self.pages = name, 0, self._filtered(name)
        self._refresh()

    def show_page(self, number: int) -> None:
        """Show page ``number`` (0-based) of the current filter."""
        position = _as_index(number)
        if position is None or not 0 <= position < max(self.page_count, 1) or not self.pages:
            valid = f"0-{self.page_count - 1}" if self.pages else f"none: filter {self.filter!r} matches no item"
            raise IndexError(f"no page {number!r} (valid: {valid})")
        self.show(position * self.page_size)

    def show(self, index: int) -> None:
        """Show the page holding item ``index`` of the current filter (IndexError naming the valid range)."""
        count = len(self.pages)
        position = _as_index(index)
        if position is None or not 0 <= position < count:
            valid = f"0-{count - 1}" if count else f"none: filter {self.filter!r} matches no page"
            raise IndexError(f"no page {index!r} (valid: {valid})")
        self.index = position
        self._refresh()

    def next(self) -> None:
        """The next page."""
        if self.page_number + 1 < self.page_count:
            self.show_page(self.page_number + 1)

    def prev(self) -> None:
        """The previous page."""
        if self.page_number > 0:
            self.show_page(self.page_number - 1)

    # -- display ------------------------------------------------------------------------------

    def static_html(self) -> str:
        """``static_pages`` pages from the current one as plain HTML, and how many are left out."""
        first = self.page_number
        last = self.page_count if self.static_pages is None else min(self.page_count, first + self.static_pages)
        shown = [p for n in range(first, last) for p in self.page_items(n)]
        parts = [self.intro, self._summary_html(shown)] if self.intro else [self._summary_html(shown)]
        parts += [self._item_view(p) for p in shown]
        if not self.pages:
            parts.append(self.page_html.value)
        left = len(self.pages) - len(shown)
        if left:
            parts.append(h.note(
                f"{left} more item(s) of filter {self.filter!r} are not in this static view "
                f"(pages {first + 1}-{last} of {self.page_count} shown); browse them live, with "
                "browse(static_pages=None), or in `evalnb report RUN_ID`."))
        return h.page(*parts)

    def _repr_html_(self) -> str:
        return self.static_html()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return h.display_bundle(self.widget, self.static_html(), repr(self), **kwargs)

    def _ipython_display_(self) -> None:
        """The live widget, and its static face as a separate output (following the widget's controls)."""
        self._face = h.show_widget(self.widget, self.static_html(), repr(self))

    def __repr__(self) -> str:
        return (f"BrowseWidget(filter={self.filter!r}, page={self.page_number}, pages={self.page_count}, "
                f"items={len(self.pages)})")

    def _summary_html(self, shown: list[Page]) -> str:
        scope = f"task {h.esc(self.task_id)}" if self.task_id is not None else "all tasks"
        if not shown:
            return f"<b>no items</b> (filter: {h.esc(self.filter)}, {scope})"
        first, last = self.pages.index(shown[0]) + 1, self.pages.index(shown[-1]) + 1
        counts = ", ".join(f"{name} {count}" for name, count in self.counts.items())
        return (f"<b>{scope}</b> &middot; items {first}-{last} of {len(self.pages)} (filter: {h.esc(self.filter)}; "
                f"{h.esc(counts)}) &middot; models: {h.esc(', '.join(self.models))}")

    # -- internals ----------------------------------------------------------------------------

    def _filtered(self, name: str) -> list[Page]:
        if name == "failures":
            return [p for p in self.all_pages if p.failure]
        if name == "disagreements":
            return [p for p in self.all_pages if p.disagreement]
        if name == "changed":
            return [p for p in self.all_pages if p.changed]
        return list(self.all_pages)

    def _build(self) -> None:
        import ipywidgets as w

        from evalnb.widgets.shared import make

        options = [(f"{name} ({self.counts[name]})", name) for name in self.filters]
        self.filter_select = make(w.Dropdown, options=options, value=self.filter, description="show")
        self.prev_button = make(w.Button, description="Previous", icon="arrow-left")
        self.next_button = make(w.Button, description="Next", icon="arrow-right")
        self.slider = make(w.IntSlider, min=0, max=0, value=0, description="page", continuous_update=False)
        self.title_html, self.page_html = make(w.HTML), make(w.HTML)
        nav = make(w.HBox, [self.filter_select, self.prev_button, self.slider, self.next_button])
        self.widget = make(w.VBox, [make(w.HTML, self.intro), nav, self.title_html, self.page_html] if self.intro
                           else [nav, self.title_html, self.page_html])
        self.filter_select.observe(self._on_filter, names="value")
        self.slider.observe(self._on_slider, names="value")
        self.prev_button.on_click(lambda _: (self.prev(), self._update_face()))
        self.next_button.on_click(lambda _: (self.next(), self._update_face()))

    def _on_filter(self, change: dict) -> None:
        if not self._syncing and change["new"] != self.filter:
            self.set_filter(change["new"])
            self._update_face()

    def _on_slider(self, change: dict) -> None:
        if not self._syncing and change["new"] != self.page_number and self.pages:
            self.show_page(change["new"])
            self._update_face()

    def _refresh(self) -> None:
        pages = max(self.page_count, 1)
        self._syncing = True
        try:
            self.filter_select.value = self.filter
            self.slider.max, self.slider.value = pages - 1, self.page_number
            self.slider.disabled = not self.pages
            self.prev_button.disabled = self.page_number <= 0
            self.next_button.disabled = self.page_number >= pages - 1
        finally:
            self._syncing = False
        shown = self.page_items()
        if not shown:
            self.title_html.value = f"<b>no pages</b> (filter: {h.esc(self.filter)})"
            self.page_html.value = h.note(f"no (task, sample) matches filter {self.filter!r}")
        else:
            self.title_html.value = (self._summary_html(shown)
                                     + f" &middot; page {self.page_number + 1} of {self.page_count}")
            self.page_html.value = "".join(self._item_view(p) for p in shown)

    def _update_face(self) -> None:
        """After a change made in the widget's controls (not Python calls: see PreviewWidget)."""
        if self._face is not None:
            self._face.update(self.static_html())

    def _item_view(self, page: Page) -> str:
        """One item: its task and index, flags, prompt, target and every model's output."""
        flags = [name for name, on in (("failure", page.failure), ("disagreement", page.disagreement),
                                       ("score changed", page.changed)) if on]
        title = (f"<div class='evalnb-item-title' style='border-top:2px solid #9ca3af;margin-top:10px;padding-top:4px'>"
                 f"<b>task {h.esc(page.task_id)}</b> &middot; sample_index {page.sample_index}"
                 + (f" &middot; <span style='color:#b45309'>{h.esc(', '.join(flags))}</span>" if flags else "")
                 + "</div>")
        return f"<div class='evalnb-item'>{title}{self._page_view(page)}</div>"

    def _page_view(self, page: Page) -> str:
        prompts: dict[str, list[str]] = {}  # each distinct prompt -> the samples (models) sent it
        for s in page.samples:
            if s.get("prompt") is not None:
                prompts.setdefault(s["prompt"], []).append(str(s["model"]))
        prompt = next(iter(prompts), None)
        target = next((s.get("target") for s in page.samples if s.get("target") is not None), None)
        if len(prompts) > 1:  # two runs or two variants sent different prompts: each, the change marked
            parts = [h.heading("Prompts (words inserted [+…+] and deleted [-…-] against the first)")]
            for text, labels in prompts.items():
                parts.append(h.prompt_change(", ".join(labels), prompt, text))
        else:
            parts = [h.heading("Prompt"), self._prompt_view(page, prompt)]
        parts += [h.heading("Target"), h.box("target", h.pre(target)) if target is not None else h.note("none")]
        metrics = [m for m in self.metrics if any(s.get(m) is not None for s in page.samples)]
        rows: list[tuple[str, list[str]]] = [
            ("status", [h.esc(s.get("status") or "") for s in page.samples]),
            ("output_text", [_text_cell(s.get("output_text")) for s in page.samples]),
            ("extracted_output", _compared(page.samples, "extracted_output", _text_cell)),
        ]
        for metric in metrics:
            rows.append((metric, _compared(page.samples, metric, _score_cell)))
        if any(s.get("judge_calls") for s in page.samples):
            rows.append(("judge calls", [_judge_cell(s.get("judge_calls")) for s in page.samples]))
        if any(s.get("error") is not None for s in page.samples):
            rows.append(("error", [h.error(str(s["error"])) if s.get("error") is not None else ""
                                   for s in page.samples]))  # fmt: skip
        if any(s.get("log") for s in page.samples):  # what the grader printed (its last few KB)
            rows.append(("log", [h.box("grader output", h.pre(s["log"])) if s.get("log") else ""
                                 for s in page.samples]))  # fmt: skip
        return "".join(parts) + h.heading("Outputs") + h.table([s["model"] for s in page.samples], rows)

    def _prompt_view(self, page: Page, prompt: str | None) -> str:
        """With a suite, box the few-shot examples (when the stored prompt is still the item's)."""
        if self.suite is not None:
            item = self._item(page.task_id, page.sample_index)
            if item is not None and item.prompt == prompt:
                return h.prompt_view(self.suite.task(page.task_id), item)
        return h.box("prompt", h.pre(prompt)) if prompt is not None else h.note("not stored")

    def _item(self, task_id: str, index: int) -> Any:
        if task_id not in self._items:
            try:
                last = max(p.sample_index for p in self.all_pages if p.task_id == task_id)
                self._items[task_id] = self.suite.items(task_id, limit=last + 1)  # type: ignore[union-attr]
            except Exception:  # unknown task or data gone: fall back to the stored prompt
                self._items[task_id] = []
        items = self._items[task_id]
        return items[index] if 0 <= index < len(items) else None


# -- building pages ---------------------------------------------------------------------------


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _expand_scores(frame: Any) -> Any:
    """A ``scores`` column of dicts becomes one column per metric (unless already present)."""
    if "scores" not in frame.columns:
        return frame
    keys: dict[str, None] = {}
    for value in frame["scores"]:
        if isinstance(value, dict):
            keys.update(dict.fromkeys(str(k) for k in value))
    new = {
        key: [v.get(key) if isinstance(v, dict) else None for v in frame["scores"]]
        for key in keys
        if key not in frame.columns
    }
    return frame.assign(**new) if new else frame


def _declared_metrics(suite: Any) -> tuple[str, ...]:
    if suite is None:
        return ()
    return tuple(dict.fromkeys(m.id for task in suite.tasks for m in task.effective_metrics))


def _choose_models(frame: Any, models: list[str] | None) -> list[str]:
    present = list(dict.fromkeys(str(m) for m in frame["model"]))
    if models is None:
        return present
    if isinstance(models, str):
        models = [models]
    unknown = [m for m in models if m not in present]
    if unknown:
        raise ValueError(f"unknown model(s) {', '.join(map(repr, unknown))}; the samples have: {', '.join(present)}")
    return list(dict.fromkeys(models))


def _pages(frame: Any, models: list[str], metrics: list[str]) -> list[Page]:
    order = {m: i for i, m in enumerate(models)}
    grouped: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for record in frame.to_dict("records"):
        sample = {k: _clean(v) for k, v in record.items()}
        sample["model"] = str(sample["model"])
        key = (str(sample["task_id"]), int(sample["sample_index"]))
        grouped.setdefault(key, []).append(sample)
    first_metric = _first_metric_per_task(grouped, metrics)
    pages = []
    for (task_id, index), samples in grouped.items():
        samples.sort(key=lambda s: order[s["model"]])
        failure = any(
            s.get("status") == "failed" or s.get("error") is not None or s.get("extracted_output") is None
            for s in samples
        )
        disagree = len(samples) > 1 and (
            len({_key(s.get("extracted_output")) for s in samples}) > 1
            or (first_metric.get(task_id) is not None
                and len({_key(s.get(first_metric[task_id])) for s in samples}) > 1)
        )  # fmt: skip
        pages.append(Page(task_id, index, samples, failure, disagree))
    task_order = {task: i for i, task in enumerate(dict.fromkeys(task for task, _ in grouped))}
    pages.sort(key=lambda p: (task_order[p.task_id], p.sample_index))
    return pages


def _first_metric_per_task(grouped: dict, metrics: list[str]) -> dict[str, str | None]:
    """Per task, the first metric column that has a value for any of its samples."""
    per_task: dict[str, list[dict]] = {}
    for (task_id, _), samples in grouped.items():
        per_task.setdefault(task_id, []).extend(samples)
    return {
        task_id: next((m for m in metrics if any(s.get(m) is not None for s in samples)), None)
        for task_id, samples in per_task.items()
    }


def _key(value: Any) -> Any:
    """A hashable stand-in for comparing values (1 and 1.0 and True are the same score)."""
    if isinstance(value, (dict, list)):
        return repr(value)
    return value


def _compared(samples: list[dict], column: str, cell: Any) -> list[str]:
    """Cells for one row; values differing from the first model's are highlighted."""
    reference = _key(samples[0].get(column))
    out = []
    for sample in samples:
        html = cell(sample.get(column))
        if _key(sample.get(column)) != reference:
            html = f'<div class="evalnb-differs" style="background:#fef3c7;color:#111">{html}</div>'
        out.append(html)
    return out


def _judge_cell(calls: Any) -> str:
    """A sample's grader model calls: what each asked (the end of its input) and what came back."""
    if not isinstance(calls, list) or not calls:
        return ""
    parts = []
    for call in calls:
        request = call.get("request") or {}
        asked = request.get("input")
        if isinstance(asked, list):  # messages: the last one is the question
            last = asked[-1] if asked else {}
            asked = last.get("content") if isinstance(last, dict) else last
        asked = asked if isinstance(asked, str) else h.to_json(asked)
        notes = [str(call.get("judge_model") or "")]
        if call.get("cached"):
            notes.append("from the store")
        cost = call.get("cost_usd")
        if isinstance(cost, float) and cost == cost and cost:
            notes.append(f"${cost:.5f}")
        reply = call.get("output_text")
        parts.append(
            f"<div style='margin-bottom:4px'><span style='color:#6b7280'>#{call.get('call')} "
            f"{h.esc(', '.join(n for n in notes if n))}</span>"
            f"{h.pre(asked[-400:])}&rarr; {h.pre(reply if isinstance(reply, str) else '(no text)')}</div>"
        )
    return "".join(parts)


def _text_cell(value: Any) -> str:
    return h.note("None") if value is None else h.pre(value)


def _score_cell(value: Any) -> str:
    if value is None:
        return h.note("null")
    return f"<b>{h.esc(f'{value:g}' if isinstance(value, float) else value)}</b>"
