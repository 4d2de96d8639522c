"""The win-rate and ranking figures: what they draw, in their live and static faces."""

from __future__ import annotations

import re

import pandas as pd
import pytest

import evalnb
from evalnb.plots.figure import figure_bundle
from evalnb.plots.svg import figure_svg

WINS = pd.DataFrame({"task_id": ["t", "t", "u"], "a": ["x", "x", "x"], "b": ["y", "z", "y"], "n": [12, 12, 8],
                     "a_wins": [4, 9, 2], "b_wins": [1, 1, 5], "ties": [7, 2, 1], "win_rate": [0.625, 0.833, 0.3125],
                     "ci_low": [0.458, 0.625, 0.1], "ci_high": [0.792, 1.0, 0.55], "inconsistent": [4, 1, 0],
                     "position_bias": [1.0, 0.0, float("nan")]})
RANK = pd.DataFrame({"model": ["x", "y", "z"], "score": [1120.0, 1022.0, 857.0], "ci_low": [1030.0, 949.0, 745.0],
                     "ci_high": [1233.0, 1096.0, 940.0], "rank": [1, 2, 3], "wins": [13, 6, 1], "losses": [2, 4, 14],
                     "ties": [9, 14, 9]})


def test_win_rates_draw_a_bar_per_task_and_pair_with_its_interval():
    fig = evalnb.plots.win_rates(WINS)
    [bars] = fig.data
    assert list(bars.y) == ["t: x vs y (n=12)", "t: x vs z (n=12)", "u: x vs y (n=8)"]
    assert list(bars.x) == [0.625, 0.833, 0.3125]
    assert list(bars.error_x.array) == pytest.approx([0.167, 0.167, 0.2375])  # ci_high - win_rate
    assert list(bars.error_x.arrayminus) == pytest.approx([0.167, 0.208, 0.2125])
    assert fig.layout.shapes[0].x0 == 0.5 and "position bias 1.00" in bars.hovertext[0]
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", figure_svg(fig))
    assert "u: x vs y (n=8)" in texts and any("Win rate of A" in t for t in texts)
    assert {"application/vnd.plotly.v1+json", "text/html", "image/svg+xml"} <= set(figure_bundle(fig))


def test_ranking_draws_scores_best_first_and_refuses_empty_tables():
    fig = evalnb.plots.ranking(RANK.iloc[::-1])
    assert [t.y[0] for t in fig.data] == ["1. x", "2. y", "3. z"]
    assert fig.data[0].error_x.array[0] == pytest.approx(113.0) and fig.data[2].error_x.arrayminus[0] == 112.0
    assert "3. z" in figure_svg(fig)
    with pytest.raises(ValueError, match="rank table is empty"):
        evalnb.plots.ranking(RANK.iloc[:0])
    with pytest.raises(ValueError, match="win_rate table is empty"):
        evalnb.plots.win_rates(WINS.iloc[:0])
