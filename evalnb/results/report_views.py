"""How a `RunResult` reads to a person: the plain-text report and the static HTML table.

A `Report` is owned by its `RunResult` and reads only the result's public face (metrics,
models, epochs, name, status, run_id, run): one row
per (task, metric), each model's mean [95% CI] with n and what the mean leaves out (failed,
unscored, prompts missing a field). Inline styles only, no scripts, so the table reads the
same in Jupyter and in an exported HTML report.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any


class Report:
    """The text and HTML report of ``result`` (a `RunResult`)."""

    def __init__(self, result: Any) -> None:
        self._result = result

    def _cells(self) -> list[dict[str, Any]]:
        """Rows of the report: one per (task, metric), with each model's numbers."""
        table = self._result.metrics
        if "variant" in table.columns:  # a run with prompt variants: each (model, variant) is a candidate
            from evalnb.results.variant_views import candidate_label

            table = table.assign(model=[candidate_label(m, v) for m, v in zip(table["model"], table["variant"])])
        out: list[dict[str, Any]] = []
        for (task, metric), part in table.groupby(["task_id", "metric"], sort=False):
            by_model = {r["model"]: r for r in part.to_dict("records")}
            out.append({"task": task, "metric": metric, "models": by_model,
                        "higher_is_better": bool(part["higher_is_better"].iloc[0])})
        return out

    def summary(self) -> str:
        """A plain-text report: the run line, then mean [95% CI] (n) per task x metric x model."""
        r = self._result
        run = r.run
        counts = run.get("counts") or {}
        named = f" {r.name!r}" if r.name else ""
        head = [f"RunResult {r.run_id or '(not stored)'}{named}  status: {r.status or 'unknown'}"]
        if run.get("suite_version"):
            head.append(f"  suite {str(run['suite_version'])[:16]}")
        if counts:
            head.append(f"  samples: {counts.get('total', 0)} ({counts.get('failed', 0)} failed"
                        + (f", {counts['not_run']} not run" if counts.get("not_run") else "") + ")")
        if r.epochs > 1:
            head.append(f"  epochs: {r.epochs} (n counts items)")
        lines = ["".join(head), "models: " + ", ".join(r.models)]
        if r.variants:
            lines.append("variants: " + ", ".join(r.variants))
        reasons = r.failure_reasons()
        if reasons:
            lines.append("why: " + "; ".join(f"{reason} ({n})" for reason, n in reasons))
        for cell in self._cells():
            lines.append(f"{cell['task']} / {cell['metric']}{'' if cell['higher_is_better'] else ' (lower is better)'}")
            for model in r.candidates:
                row = cell["models"].get(model)
                if row is not None:
                    lines.append(f"  {model}: {_describe(row)}")
        return "\n".join(lines)

    def html(self) -> str:
        """A static table (inline styles only, no scripts): reads the same in Jupyter and in exported HTML."""
        r = self._result
        run = r.run
        esc = html.escape
        models = r.candidates
        counts = run.get("counts") or {}
        info = [f"<b>run</b> <code>{esc(str(r.run_id or '(not stored)'))}</code>",
                f"<b>status</b> {esc(str(r.status or 'unknown'))}"]
        if r.name:
            info.insert(1, f"<b>name</b> {esc(r.name)}")
        if run.get("suite_version"):
            info.append(f"<b>suite</b> <code>{esc(str(run['suite_version'])[:16])}</code>")
        if counts:
            info.append(f"<b>samples</b> {counts.get('total', 0):,} ({counts.get('failed', 0):,} failed"
                        + (f", {counts['not_run']:,} not run" if counts.get("not_run") else "") + ")")
        reasons = r.failure_reasons()
        if reasons:
            info.append("<b>why</b> " + "; ".join(f"{esc(reason)} ({n:,})" for reason, n in reasons))
        if r.epochs > 1:
            info.append(f"<b>epochs</b> {r.epochs}")
        cell_style = 'style="text-align:right;vertical-align:top;font-variant-numeric:tabular-nums;padding:2px 10px"'
        left = 'style="text-align:left;vertical-align:top;padding:2px 10px"'
        head = "".join(f"<th {cell_style}>{esc(m)}</th>" for m in models)
        body = []
        for cell in self._cells():
            best = _best(cell, models)
            arrow = "↑" if cell["higher_is_better"] else "↓"
            tds = []
            for model in models:
                row = cell["models"].get(model)
                tds.append(f"<td {cell_style}>{_html_cell(row, bold=model == best)}</td>")
            body.append(f"<tr><td {left}>{esc(str(cell['task']))}</td>"
                        f"<td {left}>{esc(str(cell['metric']))} {arrow}</td>{''.join(tds)}</tr>")
        return (
            '<div class="evalnb-run-result">'
            f'<p style="margin:0 0 4px 0">{" &middot; ".join(info)}</p>'
            f'<table style="border-collapse:collapse"><thead><tr><th {left}>task</th><th {left}>metric</th>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>'
            '<p style="margin:4px 0 0 0;font-size:smaller">mean [95% CI], n scored; best mean in bold</p></div>'
        )


def _fmt(x: float) -> str:
    if x != x:
        return "—"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.1f}"
    return f"{x:.3f}"


def _describe(row: Mapping[str, Any]) -> str:
    parts = []
    if row["mean"] == row["mean"]:
        parts.append(_fmt(row["mean"]))
        if row["ci_low"] == row["ci_low"]:
            parts.append(f"[{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]")
    notes = [f"n={row['n']}" if row["source"] == "samples" else "batch"] + _counts(row)
    if row.get("error"):
        notes.append(f"error: {row['error']}")
    return " ".join(parts + [", ".join(notes)])


def _counts(row: Mapping[str, Any]) -> list[str]:
    """What the mean leaves out, for the report: failed and unscored samples, prompts missing a field."""
    notes = []
    for key, words in (("n_failed", "failed"), ("n_unscored", "unscored"), ("n_not_run", "not run"),
                       ("n_missing_field", "missing a field")):
        if row.get(key):
            notes.append(f"{row[key]:,} {words}")
    return notes


def _best(cell: Mapping[str, Any], models: list[str]) -> str | None:
    means = [(r["mean"], m) for m in models if (r := cell["models"].get(m)) is not None and r["mean"] == r["mean"]]
    if len(means) < 2:
        return None
    pick = max if cell["higher_is_better"] else min
    value = pick(v for v, _ in means)
    winners = [m for v, m in means if v == value]
    return winners[0] if len(winners) == 1 else None


def _html_cell(row: Mapping[str, Any] | None, *, bold: bool) -> str:
    if row is None:
        return "—"
    esc = html.escape
    if row["mean"] == row["mean"]:
        mean = _fmt(row["mean"])
        top = f"<b>{mean}</b>" if bold else mean
    else:
        top = "—"
    details = []
    if row["ci_low"] == row["ci_low"]:
        details.append(f"[{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]")
    notes = [f"n={row['n']:,}" if row["source"] == "samples" else "batch"] + _counts(row)
    details.append(", ".join(notes))
    out = f'{top}<br><span style="font-size:smaller">{esc(" ".join(details))}</span>'
    if row.get("error"):
        out += f'<br><span style="font-size:smaller">error: {esc(str(row["error"])[:200])}</span>'
    return out
