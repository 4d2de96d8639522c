"""Pairwise judging pictures: win rates with their intervals, and the Bradley–Terry ranking.

`win_rates` draws a `RunResult.win_rate` table (or several concatenated): one horizontal bar per
(task, a vs b) at a's win rate with its 95% bootstrap interval, a dashed line at 0.5 (no better
than b), and the position bias of the judge in the hover. `ranking` draws a `RunResult.rank`
table: each candidate's score with its interval, best on top, in the candidate's own colour.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalnb.results.comparison import require_columns
from evalnb.plots._style import (
    BOTTOM_PX,
    ROW_PX,
    TOP_PX,
    category_axis,
    ci_errors,
    ci_text,
    esc,
    finish,
    num,
    opt,
    resolve_colors,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import plotly.graph_objects as go

WIN_COLOR = "#4e79a7"


def win_rates(table: pd.DataFrame) -> go.Figure:
    """A's win rate against B per task and pair, bars with 95% intervals around a 0.5 line."""
    import plotly.graph_objects as go

    require_columns(table, ("task_id", "a", "b", "n", "win_rate", "ci_low", "ci_high"), "win_rate")
    if table.empty:
        raise ValueError("win_rate table is empty: nothing to plot")
    records = table.to_dict("records")
    several_tasks = table["task_id"].nunique() > 1
    labels = [(f"{esc(r['task_id'])}: " if several_tasks else "") + f"{esc(r['a'])} vs {esc(r['b'])} (n={r['n']})"
              for r in records]
    rates = [r["win_rate"] for r in records]
    fig = go.Figure(go.Bar(
        name="win rate", orientation="h", x=[opt(v) for v in rates], y=labels, marker={"color": WIN_COLOR},
        error_x=ci_errors(rates, [r["ci_low"] for r in records], [r["ci_high"] for r in records]),
        hovertext=[_hover(r) for r in records], hovertemplate="%{hovertext}<extra></extra>", showlegend=False,
    ))
    fig.add_vline(x=0.5, line={"color": "#888888", "dash": "dash", "width": 1})
    fig.update_xaxes(range=[0, 1])
    category_axis(fig, labels)
    return finish(fig, title="Win rate of A against B (ties count half), 95% bootstrap CI",
                  x_title="win rate of A (0.5: no better than B)", y_title=None,
                  height=len(labels) * ROW_PX * 1.6 + TOP_PX + BOTTOM_PX, labels=labels, legend_title=None)


def _hover(row: dict[str, Any]) -> str:
    lines = [f"<b>{esc(row['a'])}</b> vs <b>{esc(row['b'])}</b> ({esc(row['task_id'])})",
             f"win rate {num(row['win_rate'], '.3f')}, {ci_text(row['ci_low'], row['ci_high'])}"]
    if "a_wins" in row:
        lines.append(f"{row['a_wins']} wins, {row['b_wins']} losses, {row['ties']} ties of n = {row['n']}")
    if "inconsistent" in row:
        lines.append(f"inconsistent (flipped with the order): {row['inconsistent']}, "
                     f"position bias {num(row.get('position_bias'), '.2f')}")
    return "<br>".join(lines)


def ranking(table: pd.DataFrame) -> go.Figure:
    """Bradley–Terry scores (Elo scale) with 95% bootstrap intervals, best on top."""
    import plotly.graph_objects as go

    require_columns(table, ("model", "score", "ci_low", "ci_high", "rank"), "rank")
    if table.empty:
        raise ValueError("rank table is empty: nothing to plot")
    records = table.sort_values("rank").to_dict("records")
    colors = resolve_colors(None, [r["model"] for r in records])
    fig = go.Figure()
    for r in records:
        label = f"{r['rank']}. {esc(r['model'])}"
        fig.add_trace(go.Scatter(
            name=str(r["model"]), mode="markers", x=[opt(r["score"])], y=[label],
            marker={"color": colors[str(r["model"])], "size": 11},
            error_x={**ci_errors([r["score"]], [r["ci_low"]], [r["ci_high"]]), "color": colors[str(r["model"])]},
            hovertext=[f"<b>{esc(r['model'])}</b><br>score {num(r['score'], '.1f')}, "
                       f"{ci_text(r['ci_low'], r['ci_high'])}<br>{r.get('wins')} wins, {r.get('losses')} losses, "
                       f"{r.get('ties')} ties"],
            hovertemplate="%{hovertext}<extra></extra>", showlegend=False,
        ))
    labels = [f"{r['rank']}. {esc(r['model'])}" for r in records]
    category_axis(fig, labels)
    return finish(fig, title="Bradley–Terry ranking (Elo scale, 95% bootstrap CI)", x_title="score",
                  y_title=None, height=len(labels) * ROW_PX * 1.6 + TOP_PX + BOTTOM_PX, labels=labels,
                  legend_title=None)
