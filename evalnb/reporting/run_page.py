"""`evalnb report RUN_ID`: one self-contained HTML file for a run, no notebook and no server.

The page holds the suite and settings, the metrics with their intervals (a table and a picture),
the paired comparisons between the run's models, the diff against a baseline run, the stored
pairwise judgements (win rates and the Bradley–Terry ranking, when the run has any), and every
sample: embedded once as JSON (`run_data`) and drawn a page at a time by a small script
(`run_script`), with filters, a task choice and text search. Nothing loads from the network,
so it opens from a file or a mail attachment; without JavaScript the tables and pictures still show.
"""

from __future__ import annotations

import html
import json
import time
from pathlib import Path
from typing import Any

from evalnb.reporting.run_data import samples_data
from evalnb.reporting.run_script import CSS, SCRIPT

__all__ = ["run_report_html", "write_run_report"]


def write_run_report(result: Any, path: str | Path, *, baseline: Any = None) -> Path:
    """Write the run report of ``result`` (against ``baseline`` if given) to ``path``."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(run_report_html(result, baseline=baseline), encoding="utf-8")
    return out


def run_report_html(result: Any, *, baseline: Any = None) -> str:
    data = samples_data(result, baseline)
    title = f"evalnb run {result.title}"
    sections = [_header(result, baseline)]
    changes = _changes(result, baseline)
    if changes:  # what was changed comes before what it did
        sections.append(_section("What changed in the prompt", changes))
    sections += [
        _section("Metrics", _metrics(result)),
        _section("Paired comparisons between models", _paired(result)),
    ]
    if baseline is not None:
        sections.append(_section(f"Against baseline run {baseline.title}", _diff(result, baseline)))
    pairwise = _pairwise(result)
    if pairwise:
        sections.append(_section("Pairwise judgements", pairwise))
    sections.append(_section("Samples", _samples_shell(data)))
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{_e(title)}</title>"
        f"<style>{CSS}</style></head><body><main>{''.join(sections)}</main>"
        f"<script type='application/json' id='evalnb-data'>{payload}</script>"
        f"<script>{SCRIPT}</script></body></html>"
    )


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _when(value: Any) -> str | None:
    """A stored timestamp (seconds since the epoch) as UTC text."""
    if isinstance(value, (int, float)) and value == value:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(value))
    return None if value is None else str(value)


def _section(title: str, body: str) -> str:
    return f"<section><h2>{_e(title)}</h2>{body}</section>"


def _header(result: Any, baseline: Any) -> str:
    run = result.run or {}
    manifest = run.get("manifest") or {}
    summary = run.get("summary") or {}
    counts = run.get("counts") or {}
    facts = [
        ("name", result.name), ("run", result.run_id), ("status", result.status),
        ("suite", manifest.get("name") or summary.get("suite_name")),
        ("suite version", run.get("suite_version") or summary.get("suite_version")),
        ("tasks", ", ".join(map(str, result.task_ids))),
        ("models", ", ".join(map(str, result.models))), ("variants", ", ".join(result.variants)),
        ("epochs", result.epochs), ("samples", counts.get("total")), ("failed", counts.get("failed")),
        ("created", _when(run.get("created_at"))), ("baseline", baseline.title if baseline is not None else None),
    ]
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts if v not in (None, ""))
    settings = {k: run.get(k) for k in ("models", "generation", "judge_model", "embedding_model", "max_samples",
                                        "concurrency", "metadata", "versions") if run.get(k) not in (None, {}, [])}
    more = ""
    if settings:
        more = ("<details><summary>settings</summary><pre>"
                f"{_e(json.dumps(settings, indent=2, default=str, ensure_ascii=False))}</pre></details>")
    return (f"<header><h1>{_e('evalnb run ' + result.title)}</h1>"
            f"<p class='muted'>made {_e(time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()))} by "
            f"<code>evalnb report</code>; opens offline</p><table class='facts'>{rows}</table>{more}</header>")


def _changes(result: Any, baseline: Any) -> str:
    """What changed in the suite (against the baseline, or between the run's variants); '' if nothing to show."""
    if baseline is None and len(result.variants) < 2:
        return ""
    try:
        return result.changes(baseline).html()
    except Exception as exc:  # noqa: BLE001 - the rest of the page still reports the run
        return f"<p class='muted'>no changes view: {_e(type(exc).__name__)}: {_e(exc)}</p>"


def _table(frame: Any, columns: list[str], digits: int = 3) -> str:
    shown = [c for c in columns if c in frame.columns]
    head = "".join(f"<th>{_e(c)}</th>" for c in shown)
    body = []
    for record in frame[shown].to_dict("records"):
        cells = []
        for c in shown:
            v = record[c]
            if isinstance(v, float):
                text = "" if v != v else f"{v:.{digits}f}" if abs(v) < 1e6 else f"{v:.3g}"
                cells.append(f"<td class='num'>{text}</td>")
            else:
                cells.append(f"<td>{_e(v)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table class='grid'><tr>{head}</tr>{''.join(body)}</table>"


def _picture(build: Any) -> str:
    """A figure's SVG picture ('' with a note when the figure cannot be drawn for this run)."""
    try:
        from evalnb.plots.svg import figure_svg

        return f"<div class='figure'>{figure_svg(build())}</div>"
    except Exception as exc:  # noqa: BLE001 - a table without its picture is still a report
        return f"<p class='muted'>no picture: {_e(type(exc).__name__)}: {_e(exc)}</p>"


def _metrics(result: Any) -> str:
    metrics = result.metrics
    table = _table(metrics, ["task_id", "model", "variant", "metric", "n", "mean", "ci_low", "ci_high", "stderr"])
    return _picture(result.compare) + table


def _paired(result: Any) -> str:
    if len(result.candidates) < 2:
        return "<p class='muted'>one model: nothing to pair</p>"
    try:
        paired = result.paired_all()
    except Exception as exc:  # noqa: BLE001
        return f"<p class='muted'>no paired comparison: {_e(type(exc).__name__)}: {_e(exc)}</p>"
    parts = [_table(paired, ["task_id", "metric", "model", "variant", "model_a", "model_b", "variant_a", "variant_b",
                             "n_pairs", "mean_a", "mean_b",
                             "mean_diff", "ci_low", "ci_high", "p_value", "p_holm"])]
    parts.append(_verdicts(paired))
    return "".join(parts)


def _diff(result: Any, baseline: Any) -> str:
    try:
        table = result.diff(baseline)
    except Exception as exc:  # noqa: BLE001
        return f"<p class='muted'>no diff: {_e(type(exc).__name__)}: {_e(exc)}</p>"
    from evalnb import plots

    return _picture(lambda: plots.diff_forest(table)) + _table(
        table, ["task_id", "model", "variant", "metric", "n_pairs", "mean_baseline", "mean", "mean_diff", "ci_low",
                "ci_high", "n_fixed", "n_broken", "mcnemar_p", "mde"]) + _verdicts(table)


def _verdicts(table: Any) -> str:
    """Each row of a paired or diff table in words (the runs named as the table's attrs name them)."""
    try:
        from evalnb.results import verdicts

        lines = "".join(f"<li>{_e(text)}</li>" for text in verdicts(table).text)
    except Exception:  # noqa: BLE001 - the table says it in numbers
        return ""
    return f"<h3>Is each difference real?</h3><ul class='verdicts'>{lines}</ul>"


def _pairwise(result: Any) -> str:
    """The stored pairwise verdicts (the judge set-up used last): win rates per pair and the ranking; '' without any."""
    try:
        frame = result.pairwise_judgements
    except Exception as exc:  # noqa: BLE001 - a run stored before pairwise judging has none
        return f"<p class='muted'>no pairwise judgements: {_e(type(exc).__name__)}: {_e(exc)}</p>"
    if frame.empty:
        return ""
    from evalnb import plots
    from evalnb.results.bradley_terry import rank_table
    from evalnb.results.win_rates import win_rate_table

    judge = frame.attrs.get("judge") or {}
    setup = judge.get("setup") or {}
    note = (f"<p>Judge <code>{_e(judge.get('judge_model'))}</code>, "
            f"{'its own template' if setup.get('template') else 'the default MT-Bench pairwise template'}; "
            "each pair judged in both orders where stored (a verdict that flips with the order counts as a tie). "
            "Win rate = (wins + ties/2) / n with a 95% bootstrap interval over items; position bias = share of "
            "the inconsistent pairs won by the output shown first.</p>")
    wins = win_rate_table(frame)
    parts = [note, _picture(lambda: plots.win_rates(wins)),
             _table(wins, ["task_id", "a", "b", "n", "a_wins", "b_wins", "ties", "win_rate", "ci_low", "ci_high",
                           "inconsistent", "position_bias", "errors"])]
    judged = frame[frame["verdict"].notna()]
    names = [m for m in dict.fromkeys([*map(str, result.models), *judged["a"], *judged["b"]])
             if m in set(judged["a"]) | set(judged["b"])]
    if len(names) >= 2:
        try:
            ranked = rank_table(judged, names)
        except Exception as exc:  # noqa: BLE001 - the win rates above still stand
            return "".join(parts) + f"<p class='muted'>no ranking: {_e(type(exc).__name__)}: {_e(exc)}</p>"
        parts += ["<h3>Bradley–Terry ranking</h3>", _picture(lambda: plots.ranking(ranked)),
                  _table(ranked, ["rank", "model", "score", "ci_low", "ci_high", "wins", "losses", "ties"], digits=1)]
    return "".join(parts)


def _samples_shell(data: dict[str, Any]) -> str:
    counts = data["counts"]
    buttons = [("all", "All"), ("failures", "Failures"), ("different", "Different between models"),
               ("changed", "Changed vs baseline")]
    filters = "".join(
        f"<button type='button' class='filter' data-filter='{key}'"
        f"{' disabled' if key == 'changed' and not data['has_baseline'] else ''}>{label} "
        f"(<span class='count'>{counts[key]}</span>)</button>"
        for key, label in buttons
    )
    tasks = sorted({row[0] for row in data["items"]})
    options = "<option value=''>all tasks</option>" + "".join(f"<option>{_e(t)}</option>" for t in tasks)
    return (
        f"<div class='controls'><div class='filters'>{filters}</div>"
        f"<select id='task'>{options}</select>"
        "<input id='search' type='search' placeholder='search prompts, outputs, targets, logs…'>"
        "<span class='pager'><button type='button' id='prev'>&larr; Previous</button> "
        "<span id='where'></span> <button type='button' id='next'>Next &rarr;</button></span></div>"
        f"<noscript><p>The samples ({counts['all']} items) need JavaScript to page through.</p></noscript>"
        "<div id='items'></div>"
    )
