"""`result.metrics` displays compactly and `verdicts(...)` whole; both stay ordinary DataFrames.

Checked on a real run (LocalModelServer): the columns are exactly METRICS_COLUMNS, anything
pandas derives is a plain DataFrame, and the notebook (HTML) and text displays show the main
columns, say what is not shown, and never cut a verdict sentence.
"""

from __future__ import annotations

import re

import pandas as pd
import pytest
from helpers.runner_kit import rows

import evalnb
from evalnb.results import METRICS_COLUMNS, verdicts


@pytest.fixture
def result(make_suite, model_server, evalnb_home):
    server = model_server()  # "good" answers every item; "meh" misses every 5th
    suite = make_suite({"reviews": rows(30)}, reviews={"metrics": [{"id": "accuracy"}],
                                                       "grader": {"builtin": "exact_match", "metric_id": "accuracy"}})
    models = [evalnb.Model("good", base_url=server.base_url), evalnb.Model("meh", base_url=server.base_url)]
    return evalnb.run(suite, models, progress=False)


def _cells(html: str, tag: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(rf"<{tag}[^>]*>(.*?)</{tag}>", html, re.S)]


def test_metrics_keeps_every_column_and_displays_the_main_ones(result):
    metrics = result.metrics
    assert isinstance(metrics, pd.DataFrame)
    assert tuple(metrics.columns) == METRICS_COLUMNS and len(metrics.columns) == 17  # unchanged
    assert pd.DataFrame(metrics).equals(metrics) and metrics["stderr"].notna().all()
    html = metrics._repr_html_()
    assert _cells(html, "th")[1:8] == ["task_id", "model", "metric", "n", "mean", "ci_low", "ci_high"]
    assert "stderr" not in _cells(html, "th") and "aggregation" not in _cells(html, "th")
    assert "7 of 17 columns shown" in html and "pd.DataFrame(table) displays them all" in html
    text = repr(metrics)
    assert text.splitlines()[0].split() == ["task_id", "model", "metric", "n", "mean", "ci_low", "ci_high"]
    assert "7 of 17 columns shown" in text


def test_what_pandas_derives_is_a_plain_dataframe_shown_in_full(result):
    metrics = result.metrics
    for derived in (metrics[metrics.model == "good"], metrics.copy(), metrics.head(1), metrics.sort_values("mean")):
        assert type(derived) is pd.DataFrame
        assert "stderr" in derived._repr_html_()


def test_failure_counts_and_errors_are_shown_when_a_row_has_them(make_suite, model_server, evalnb_home):
    from evalnb.testing import Fault

    server = model_server(faults=[Fault(status=400, body={"error": {"message": "too long"}}, times=2)])
    result = evalnb.run(make_suite({"t": rows(6)}), [evalnb.Model("good", base_url=server.base_url)], progress=False,
                        concurrency=1)
    headers = _cells(result.metrics._repr_html_(), "th")
    assert "n_failed" in headers and "n_unscored" not in headers
    assert result.metrics["n_failed"].iloc[0] == 2


def test_verdicts_print_whole_in_a_notebook_and_as_text(result):
    table = verdicts(result.paired("good", "meh"))
    assert isinstance(table, pd.DataFrame) and "mean_diff" in table.columns and "n_needed" in table.columns
    sentence = table["text"].iloc[0]
    assert len(sentence) > 120 and sentence.startswith("good − meh on reviews (accuracy):")
    html = table._repr_html_()
    assert sentence.replace("−", "&#8722;") in html or sentence in html.replace("&lt;", "<").replace("&gt;", ">")
    cells = _cells(html, "td")
    assert sentence.replace("−", "&#8722;") in cells or sentence in cells  # the cell holds all of it
    assert not any(c.endswith(("...", "…")) for c in cells)
    assert sentence in repr(table)
    with pd.option_context("display.max_colwidth", 50):  # pandas' default: the view ignores it for the text
        assert sentence in repr(table) and sentence in table._repr_html_()
