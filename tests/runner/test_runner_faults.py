"""A misbehaving model server: every fault is retried per policy, recorded when retries run out,
and never loses or doubles a sample.

The server (`evalnb.testing.LocalModelServer`) injects the faults; item 3 (and item 6) of a
10-item task are the ones that misbehave, so "requests sent" is exact: one per healthy item,
plus the retries of the faulty ones. Retry-After: 0 keeps most tests fast; the cases without
it wait the real (jittered, at most 0.5 s for a first retry) backoff.
"""

from __future__ import annotations

from collections import Counter

import pytest

import evalnb
from evalnb import Model
from evalnb.store import Store
from evalnb.testing import Fault
from helpers.runner_kit import rows

pytestmark = pytest.mark.usefixtures("evalnb_home")

ITEM3, ITEM6 = "ITEM-3:", "ITEM-6:"


def _prompt(request) -> str:
    body = request.body
    return body.get("input") if isinstance(body.get("input"), str) else body["messages"][-1]["content"]


def _sent(server) -> Counter:
    """How many requests each item got (by item number)."""
    return Counter(int(_prompt(r).split(":")[0].removeprefix("ITEM-")) for r in server.requests)


def _run(make_suite, server, *, api="responses", n=10, **generation):
    suite = make_suite({"t": rows(n)})
    gen = {"max_retries": 2, "timeout_seconds": 1, **generation}
    return evalnb.run(suite, [Model("good", base_url=server.base_url, api=api)], generation=gen,
                      concurrency=4, progress=False)


def _one_row_each(result, n=10) -> None:
    s = result.samples
    assert sorted(s.sample_index) == list(range(n))  # nothing lost, nothing doubled


def _stored_errors(result) -> dict[int, dict]:
    return {s["sample_index"]: s["error"] for s in Store().samples(result.run_id, status="failed")}


def _healthy(result, *faulty: int) -> None:
    s = result.samples
    ok = s[~s.sample_index.isin(faulty)]
    assert (ok.status == "completed").all()
    assert list(ok.output_text) == [str(i) for i in ok.sample_index]
    assert (ok.score == 1.0).all()


# ---- rate limits ----------------------------------------------------------------------------


def test_429_with_retry_after_is_waited_out_and_retried(make_suite, model_server):
    server = model_server(faults=[Fault(status=429, retry_after=0.2, match=ITEM3, times=2)])

    result = _run(make_suite, server)

    assert server.request_count == 12
    assert _sent(server)[3] == 3
    _one_row_each(result)
    _healthy(result)
    item3 = result.samples.set_index("sample_index").loc[3]
    assert item3.latency_s >= 0.4  # it honoured Retry-After twice


def test_retries_and_rate_limits_show_in_the_progress_panel(make_suite, model_server, widget_displays):
    server = model_server(faults=[Fault(status=429, retry_after=0.1, match=ITEM3, times=2),
                                  Fault(status=500, retry_after=0, match=ITEM6, times=1)])

    suite = make_suite({"t": rows(10)})
    evalnb.run(suite, [Model("good", base_url=server.base_url)], generation={"max_retries": 2}, progress=True)

    (panel,) = widget_displays
    bar, text = panel.rows["good"]
    assert bar.value == bar.max == 10
    assert "1 retries" in text.value  # the 500
    assert "429 x2 (0.2s waited)" in text.value
    assert "failed" not in text.value and bar.bar_style == "success"


def test_429_without_retry_after_backs_off_and_retries(make_suite, model_server):
    server = model_server(faults=[Fault(status=429, match=ITEM3, times=1)])

    result = _run(make_suite, server)

    assert server.request_count == 11
    assert _sent(server)[3] == 2
    _one_row_each(result)
    _healthy(result)


def test_429_past_the_retry_budget_fails_that_sample_only(make_suite, model_server):
    server = model_server(faults=[Fault(status=429, retry_after=0, match=ITEM3)])

    result = _run(make_suite, server, max_retries=2)

    assert _sent(server)[3] == 3 and server.request_count == 12  # 1 try + 2 retries
    _one_row_each(result)
    _healthy(result, 3)
    row = result.samples.set_index("sample_index").loc[3]
    assert row.status == "failed" and "HTTP 429" in row.error
    error = _stored_errors(result)[3]
    assert error["status"] == 429 and "injected fault: HTTP 429" in error["message"]
    assert result.status == "completed"  # a failed sample does not fail the run
    m = result.metrics.iloc[0]
    assert (m["n"], m["n_failed"], m["mean"]) == (9, 1, 1.0)


# ---- server errors --------------------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 503])
def test_5xx_is_retried(make_suite, model_server, status):
    server = model_server(faults=[Fault(status=status, retry_after=0, match=ITEM3, times=2),
                                  Fault(status=status, match=ITEM6, times=1)])  # this one backs off

    result = _run(make_suite, server)

    assert dict(_sent(server)) == {**{i: 1 for i in range(10)}, 3: 3, 6: 2}
    _one_row_each(result)
    _healthy(result)


def test_5xx_past_the_retry_budget_is_recorded(make_suite, model_server):
    server = model_server(faults=[Fault(status=503, retry_after=0, match=ITEM3),
                                  Fault(status=500, retry_after=0, match=ITEM6)])

    result = _run(make_suite, server, max_retries=1)

    assert server.request_count == 8 + 2 * 2
    _one_row_each(result)
    _healthy(result, 3, 6)
    errors = _stored_errors(result)
    assert errors[3]["status"] == 503 and errors[6]["status"] == 500
    assert "after 2 attempts" in errors[3]["message"]


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_other_4xx_are_not_retried(make_suite, model_server, status):
    server = model_server(faults=[Fault(status=status, retry_after=0, match=ITEM3)])

    result = _run(make_suite, server, max_retries=3)

    assert server.request_count == 10  # one try each
    _one_row_each(result)
    _healthy(result, 3)
    assert _stored_errors(result)[3]["status"] == status


def test_retry_budget_zero_means_one_try(make_suite, model_server):
    server = model_server(faults=[Fault(status=500, retry_after=0, match=ITEM3, times=1)])

    result = _run(make_suite, server, max_retries=0)

    assert server.request_count == 10
    assert _stored_errors(result)[3]["status"] == 500
    _healthy(result, 3)


# ---- the network ----------------------------------------------------------------------------


def test_timeouts_are_retried_then_recorded(make_suite, model_server):
    """Item 3 is slow once (recovers); item 6 is always slower than timeout_seconds (fails)."""
    server = model_server(faults=[Fault(latency=1.3, match=ITEM3, times=1), Fault(latency=1.3, match=ITEM6)])

    result = _run(make_suite, server, max_retries=1, timeout_seconds=1)

    assert dict(_sent(server)) == {**{i: 1 for i in range(10)}, 3: 2, 6: 2}
    _one_row_each(result)
    _healthy(result, 6)
    error = _stored_errors(result)[6]
    assert error["status"] is None and "timed out after 1s" in error["message"]
    assert set(_stored_errors(result)) == {6}


def test_dropped_connections_are_retried_then_recorded(make_suite, model_server):
    server = model_server(faults=[Fault(drop=True, match=ITEM3, times=1), Fault(drop=True, match=ITEM6)])

    result = _run(make_suite, server, max_retries=1)

    assert dict(_sent(server)) == {**{i: 1 for i in range(10)}, 3: 2, 6: 2}
    _one_row_each(result)
    _healthy(result, 6)
    error = _stored_errors(result)[6]
    assert error["status"] is None and "connection error" in error["message"]


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_malformed_json_is_retried_then_recorded(make_suite, model_server, api):
    server = model_server(faults=[Fault(malformed=True, match=ITEM3, times=1), Fault(malformed=True, match=ITEM6)])

    result = _run(make_suite, server, api=api, max_retries=1)

    assert dict(_sent(server)) == {**{i: 1 for i in range(10)}, 3: 2, 6: 2}
    _one_row_each(result)
    _healthy(result, 6)
    assert "bad reply" in _stored_errors(result)[6]["message"]


# ---- empty outputs ----------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_empty_outputs_are_retried_up_to_max_empty_retries(make_suite, model_server, api):
    server = model_server(faults=[Fault(empty=True, match=ITEM3, times=2), Fault(empty=True, match=ITEM6)])

    result = _run(make_suite, server, api=api, max_empty_retries=2)

    assert dict(_sent(server)) == {**{i: 1 for i in range(10)}, 3: 3, 6: 3}
    _one_row_each(result)
    _healthy(result, 6)
    row = result.samples.set_index("sample_index").loc[6]
    # still empty after the retries: kept as the model's answer (and graded), not an error
    assert row.status == "completed" and row.output_text == "" and row.score == 0.0


def test_empty_outputs_are_not_retried_by_default(make_suite, model_server):
    server = model_server(faults=[Fault(empty=True, match=ITEM3)])

    result = _run(make_suite, server)

    assert server.request_count == 10
    assert result.samples.set_index("sample_index").loc[3].output_text == ""


def test_output_empty_after_cleaning_counts_as_empty(make_suite, model_server):
    answers = iter(["<think>hmm</think>  ", "3"])
    server = model_server(lambda body: next(answers) if body["input"].startswith(ITEM3) else
                          body["input"].split(":")[0].removeprefix("ITEM-"))

    result = _run(make_suite, server, max_empty_retries=1)

    assert _sent(server)[3] == 2
    _healthy(result)


# ---- many faults at once ----------------------------------------------------------------------


def test_a_chaotic_server_loses_nothing(make_suite, model_server):
    faults = [
        Fault(status=429, retry_after=0, probability=0.15, seed=1),
        Fault(status=503, retry_after=0, probability=0.1, seed=2),
        Fault(drop=True, probability=0.05, seed=3),
        Fault(malformed=True, probability=0.05, seed=4),
        Fault(empty=True, probability=0.1, seed=5),
    ]
    server = model_server(faults=faults, latency=(0, 0.005))
    suite = make_suite({"a": rows(30), "b": rows(30, tag="b")})
    models = [Model("good", base_url=server.base_url), Model("good", base_url=server.base_url, api="chat", label="g2")]

    result = evalnb.run(suite, models, generation={"max_retries": 2, "max_empty_retries": 1, "timeout_seconds": 5},
                        concurrency=8, progress=False)

    s = result.samples
    keys = list(zip(s.task_id, s.model, s.sample_index))
    assert len(keys) == len(set(keys)) == 120  # exactly one row per (task, model, item)
    assert set(s.status) <= {"completed", "failed"}
    done = s[s.status == "completed"]
    assert len(done) > 90
    non_empty = done[done.output_text != ""]
    assert (non_empty.output_text == non_empty.target).all()
    failed = s[s.status == "failed"]
    assert failed.error.notna().all()
    per_prompt = Counter((r.body["model"], r.path, _prompt(r)) for r in server.requests)
    assert max(per_prompt.values()) <= 3 * 2  # (1 + max_retries) per call, x (1 + max_empty_retries)
    assert len(per_prompt) == 120  # every item was asked


def test_running_again_retries_only_the_failed_samples(make_suite, model_server):
    server = model_server(faults=[Fault(status=500, retry_after=0, match=ITEM3, times=2),
                                  Fault(status=400, match=ITEM6, times=1)])
    first = _run(make_suite, server, max_retries=1)
    assert set(_stored_errors(first)) == {3, 6}
    sent = server.request_count

    second = _run(make_suite, server, max_retries=1)

    assert server.request_count == sent + 2  # items 3 and 6 only; the server has recovered
    assert sorted(_prompt(r).split(":")[0] for r in server.requests[sent:]) == ["ITEM-3", "ITEM-6"]
    _one_row_each(second)
    _healthy(second)
