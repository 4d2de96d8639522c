"""Live run progress: counters the runner updates, and the displays that read them.

The runner only bumps counters on `RunProgress` (cheap, no I/O). A display polls those
counters on a timer (every 0.25 s), so a 20,000-samples/s run does not pay for drawing.
In a notebook the display is an ipywidgets panel (one bar per candidate, a Stop button);
in a terminal it is one plain text line on stderr. A candidate is a model, or in a run with
prompt variants a "model · variant": counters given the task (a variant's slot id) count for
its candidate; what only a model knows (its retries, rate limits) counts for the model.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from evalnb.suite.variants import candidate_label, split_slot


@dataclass
class ModelProgress:
    """What one candidate model has done so far in this run."""

    label: str
    total: int = 0
    done: int = 0
    failed: int = 0
    not_run: int = 0  # samples not called: the model (or its task) was stopped, see RunProgress.reasons
    reused: int = 0
    in_flight: int = 0
    retries: int = 0
    rate_limited: int = 0
    rate_limit_wait_s: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    metric: str | None = None
    metric_sum: float = 0.0
    metric_n: int = 0
    judge_calls: int = 0  # model calls its samples' graders made (judge_cached of them answered by the store)
    judge_cached: int = 0
    cost_usd: float = 0.0  # its candidate calls and its graders' calls, at the models' prices
    batch: str = ""  # a provider batch run: its batches' status and request counts
    shared: bool = False  # a model's own counters shown beside its variants' (no samples of its own)

    @property
    def metric_mean(self) -> float | None:
        return self.metric_sum / self.metric_n if self.metric_n else None

    def describe(self) -> str:
        parts = [] if self.shared else [f"{self.done}/{self.total}"]
        if self.batch:
            parts.append(self.batch)
        if self.in_flight:
            parts.append(f"{self.in_flight} in flight")
        if self.reused:
            parts.append(f"{self.reused} reused")
        if self.failed:
            parts.append(f"{self.failed} failed")
        if self.not_run:
            parts.append(f"{self.not_run} not run")
        if self.retries:
            parts.append(f"{self.retries} retries")
        if self.rate_limited:
            parts.append(f"429 x{self.rate_limited} ({self.rate_limit_wait_s:.1f}s waited)")
        if self.metric_mean is not None:
            parts.append(f"{self.metric}={self.metric_mean:.3f}")
        tokens = self.input_tokens + self.output_tokens
        if tokens:
            parts.append(f"{tokens:,} tok")
        if self.judge_calls:
            cached = f", {self.judge_cached} cached" if self.judge_cached else ""
            parts.append(f"{self.judge_calls} judge calls{cached}")
        if self.cost_usd:
            parts.append(f"${self.cost_usd:.4f}")
        return ", ".join(parts)


@dataclass
class RunProgress:
    """Counters for a whole run, one `ModelProgress` per candidate model."""

    run_id: str = ""
    models: dict[str, ModelProgress] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    status: str = "in_progress"
    stop_requested: bool = False
    warnings: list[str] = field(default_factory=list)  # shown above the counters, once each
    budget: Any = None  # the run's `runner.budget.Budget`: spend so far and the limit
    reasons: Counter = field(default_factory=Counter)  # why samples failed or were not run -> how many
    error: str = ""  # at the end: why the run failed where no sample says it (a task that could not start)

    notes: list[str] = field(default_factory=list)  # what the run is doing, said once (a resume's plan)
    # masks the run's keys in what is shown (the store's redaction): failure reasons quote errors
    scrub: Callable[[str], str] = field(default=lambda text: text, repr=False)

    def warn(self, message: str) -> None:
        """Something the run goes on with but the user must see (a template field no row has)."""
        self.warnings.append(self.scrub(message))

    def say(self, message: str) -> None:
        """What the run is doing, said once above the counters (not a warning)."""
        self.notes.append(message)

    def failed_because(self, reason: str) -> None:
        """Count one failed or not-run sample under its reason (the displays show the top ones)."""
        self.reasons[self.scrub(" ".join(reason.split())[:200])] += 1

    def top_reasons(self, n: int = 3) -> str:
        """``HTTP 401: bad key (97); ...``: the commonest reasons with their counts, then what no
        sample says (tasks that could not start: a run that failed before its first sample), or ""."""
        parts = [f"{reason} ({count})" for reason, count in self.reasons.most_common(n)]
        return "; ".join(parts + ([self.error] if self.error else []))

    def final_reasons(self, n: int = 3) -> str:
        """`top_reasons` for the last line under warnings already printed: a reason a warning
        quoted is not quoted again (``m: as the warning above says (97)``)."""
        parts = []
        for reason, count in self.reasons.most_common(n):
            if said_before(reason, self.warnings):
                parts.append(f"{reason.split(': ', 1)[0]}: as the warning above says ({count})")
            else:
                parts.append(f"{reason} ({count})")
        return "; ".join(parts + ([self.error] if self.error else []))

    @property
    def spend(self) -> str:
        """``$0.0123 spent of $5.00`` when the run has a budget or has spent something, else ""."""
        b = self.budget
        if b is None or (b.limit is None and not b.spent):
            return ""
        return b.describe()

    def model(self, label: str, task_id: str | None = None) -> ModelProgress:
        """The counters of model ``label``'s candidate for ``task_id`` ("model · variant" when the
        task is a variant's slot); without a task, the model's own (retries, rate limits)."""
        if task_id is not None:
            label = candidate_label(label, split_slot(task_id)[1])
        mp = self.models.get(label)
        if mp is None:
            mp = self.models[label] = ModelProgress(label)
        return mp

    def rows(self) -> list[ModelProgress]:
        """What the displays show, one per candidate: with variants, a model's own counters
        (no samples of their own) only when they have something to say, as "model (all variants)"."""
        shown = []
        for key, m in self.models.items():
            if m.total == 0 and any(k.startswith(f"{key} · ") for k in self.models):
                if not (m.retries or m.rate_limited or m.in_flight or m.batch or m.judge_calls or m.cost_usd):
                    continue
                m = replace(m, label=f"{key} (all variants)", shared=True)
            shown.append(m)
        return shown

    @property
    def done(self) -> int:
        return sum(m.done for m in self.models.values())

    @property
    def total(self) -> int:
        return sum(m.total for m in self.models.values())


def said_before(reason: str, texts: list[str]) -> bool:
    """Whether a sample's failure reason (``label: message``) is quoted in one of ``texts``
    (a model's stop warning quotes the message that stopped it)."""
    core = reason.split(": ", 1)[1] if ": " in reason else reason
    core = " ".join(core.split())[:80]
    return bool(core) and any(core in " ".join(text.split()) for text in texts)


class TextDisplay:
    """One progress line on stderr, rewritten in place when stderr is a terminal."""

    def __init__(self, progress: RunProgress, stream: Any = None):
        self.progress = progress
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_line = ""
        self._last_print = 0.0
        self._warned = 0
        self._said = 0

    def update(self, final: bool = False) -> None:
        p = self.progress
        for message in p.notes[self._said:]:
            self.stream.write(("\r" + " " * len(self._last_line) + "\r" if self.tty else "") + f"evalnb: {message}\n")
        self._said = len(p.notes)
        for message in p.warnings[self._warned:]:  # each on its own line, above the progress line
            self.stream.write(("\r" + " " * len(self._last_line) + "\r" if self.tty else "")
                              + f"evalnb: warning: {message}\n")
        self._warned = len(p.warnings)
        elapsed = time.monotonic() - p.started
        rate = p.done / elapsed if elapsed > 0 else 0.0
        models = " | ".join(f"{m.label}: {m.describe()}" for m in p.rows())
        spend = f" {p.spend} |" if p.spend else ""
        line = f"[evalnb {p.run_id[-8:]}] {p.done}/{p.total} ({rate:.0f}/s){spend} {models}"
        if final:
            line += f" — {p.status} in {elapsed:.1f}s"
            if p.top_reasons():  # the reasons under the counts, so "60 failed" never stands alone
                line += f"\nevalnb: why: {p.final_reasons()}"
        if self.tty:
            self.stream.write("\r" + line.ljust(len(self._last_line)) + ("\n" if final else ""))
        elif final or time.monotonic() - self._last_print > 5:
            # Not a terminal (a log file, CI): print a line every few seconds, not every tick.
            self.stream.write(line + "\n")
            self._last_print = time.monotonic()
        self.stream.flush()
        self._last_line = line

    def close(self) -> None:
        self.update(final=True)


class WidgetDisplay:
    """An ipywidgets panel: a bar and a status line per model, and a Stop button."""

    def __init__(self, progress: RunProgress, on_stop: Callable[[], None] | None = None):
        import ipywidgets as w

        from evalnb.widgets.shared import make

        self.progress = progress
        self._w, self._make = w, make
        self.title = make(w.HTML)
        self.stop_button = make(w.Button, description="Stop", button_style="warning", icon="stop")
        self.stop_button.on_click(lambda _b: self._stop(on_stop))
        self.rows: dict[str, tuple[Any, Any]] = {}
        self.body = make(w.VBox)
        self.warnings = make(w.HTML)
        self.reasons = make(w.HTML)
        self._warned = 0
        self._reasons = ""
        head = make(w.HBox, [self.title, self.stop_button])
        self.panel = make(w.VBox, [head, self.warnings, self.body, self.reasons])
        self.panel.add_class("evalnb-progress")
        self.update()

    def _stop(self, on_stop: Callable[[], None] | None) -> None:
        if self.progress.status != "in_progress":
            return  # a click that arrives after the run ended (the cell was blocked) changes nothing
        self.progress.stop_requested = True
        self.stop_button.disabled = True
        self.stop_button.description = "Stopping…"
        if on_stop is not None:
            on_stop()

    def _row(self, label: str) -> tuple[Any, Any]:
        row = self.rows.get(label)
        if row is None:
            bar = self._make(self._w.IntProgress, min=0, max=1, description=label[:40], bar_style="info",
                             style={"description_width": "initial"})
            text = self._make(self._w.HTML)
            row = self.rows[label] = (bar, text)
            self.body.children = (*self.body.children, self._make(self._w.HBox, [bar, text]))
        return row

    def update(self, final: bool = False) -> None:
        p = self.progress
        elapsed = time.monotonic() - p.started
        spend = f", {p.spend}" if p.spend else ""
        self.title.value = (
            f"<b>evalnb run</b> <code>{p.run_id}</code> — {p.status}, "
            f"{p.done}/{p.total} samples, {elapsed:.1f}s{spend}"
        )
        if len(p.warnings) + len(p.notes) != self._warned:
            self.warnings.value = _notes_html(p.notes) + _warnings_html(p.warnings)
            self._warned = len(p.warnings) + len(p.notes)
        reasons = p.top_reasons()
        if reasons != self._reasons:
            self.reasons.value = _reasons_html(reasons)
            self._reasons = reasons
        for m in p.rows():
            bar, text = self._row(m.label)
            bar.max = max(m.total, 1)
            bar.value = m.done
            if final:
                bar.bar_style = "danger" if m.failed else "success"
            text.value = f"<span style='font-family:monospace'>{m.describe()}</span>"
        if final:
            self.stop_button.disabled = True
            self.stop_button.description = p.status

    def close(self) -> None:
        self.update(final=True)
        if self.handle is not None:  # the static face beside the panel: the final counts
            self.handle.update(self.static_html())

    def static_html(self) -> str:
        """What an exported notebook shows where the live panel was (no kernel needed)."""
        import html

        p = self.progress
        rows = "".join(
            f"<tr><td>{html.escape(m.label)}</td><td>{m.done}/{m.total}</td>"
            f"<td>{html.escape(m.describe())}</td></tr>"
            for m in p.rows()
        )
        return (
            f"<div class='evalnb-progress-static evalnb-static-widget'><b>evalnb run</b> <code>{html.escape(p.run_id)}</code>"
            f" — {html.escape(p.status)}, {p.done}/{p.total} samples"
            f"{html.escape(', ' + p.spend) if p.spend else ''}{_notes_html(p.notes)}{_warnings_html(p.warnings)}"
            f"<table><tr><th>model</th><th>done</th><th>detail</th></tr>{rows}</table>"
            f"{_reasons_html(p.top_reasons())}</div>"
        )

    def bundle(self) -> dict:
        """The widget view plus a static HTML fallback, as one display bundle."""
        from evalnb.widgets.markup import display_bundle

        return display_bundle(self.panel, self.static_html())

    handle = None


def _warnings_html(messages: list[str]) -> str:
    from evalnb.widgets.markup import warning

    return "".join(warning(m) for m in messages)


def _notes_html(messages: list[str]) -> str:
    from evalnb.widgets.markup import note

    return "".join(note(m) for m in messages)


def _reasons_html(reasons: str) -> str:
    import html

    return f"<div class='evalnb-reasons'><b>why</b>: {html.escape(reasons)}</div>" if reasons else ""


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where widgets can render)."""
    shell_mod = sys.modules.get("IPython")
    if shell_mod is None:
        return False
    try:
        shell = shell_mod.get_ipython()
    except Exception:
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


MODES = (None, True, False, "none", "text", "widget")


def check_mode(mode: object) -> None:
    """Refuse a `progress=` value we do not know before a run starts."""
    if not any(mode is m or (isinstance(m, str) and mode == m) for m in MODES):
        raise ValueError(f"progress must be True, False, 'text' or 'widget', got {mode!r}")


def make_display(progress: RunProgress, mode: bool | str | None, on_stop=None):
    """Pick a display: widgets in a notebook, a text line elsewhere, nothing when off.

    `mode`: None/True (auto), False or "none" (off), "text", "widget".
    """
    check_mode(mode)
    if mode is False or mode == "none":
        return None
    if mode == "text" or (mode in (True, None) and not in_notebook()):
        return TextDisplay(progress)
    try:
        display_obj = WidgetDisplay(progress, on_stop=on_stop)
    except ImportError:
        return TextDisplay(progress)
    from evalnb.widgets.markup import show_widget

    display_obj.handle = show_widget(display_obj.panel, display_obj.static_html())
    return display_obj
