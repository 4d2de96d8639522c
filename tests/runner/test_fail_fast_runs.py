"""Failures that hit every call stop early and say why; resume finishes the job; counts add up.

Real servers on 127.0.0.1: `LocalModelServer` (a 401 for every call, a server killed mid-run and
started again on its port) and a port nobody listens on.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

import evalnb
from evalnb import Model
from evalnb.runner.fail_fast import STOP_AFTER
from evalnb.testing import Fault, LocalModelServer
from helpers.runner_kit import rows

pytestmark = pytest.mark.usefixtures("evalnb_home")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _counts_add_up(result, planned_per_task_model: int) -> None:
    for row in result.metrics.to_dict("records"):
        assert row["n"] + row["n_failed"] + row["n_unscored"] + row["n_not_run"] == planned_per_task_model, row


def test_a_401_server_gets_a_handful_of_requests_for_100_rows_and_the_run_says_why(make_suite, model_server, capsys):
    server = model_server(faults=[Fault(status=401, body={"error": {"message": "invalid api key"}})])
    result = evalnb.run(make_suite({"t": rows(100)}), [Model("m", base_url=server.base_url)], concurrency=4,
                        progress="text")
    assert server.request_count <= STOP_AFTER + 4  # the calls in flight when it stopped, no more
    assert result.status == "failed"
    assert "model 'm' stopped after 3 consecutive failed calls (auth): HTTP 401: invalid api key" in result.run["error"]
    _counts_add_up(result, 100)
    row = result.metrics.iloc[0]
    assert row["n_not_run"] >= 100 - STOP_AFTER - 4 and row["n"] == 0
    (reason, count), *_ = result.failure_reasons()
    assert "HTTP 401: invalid api key" in reason and count >= 90
    assert "HTTP 401: invalid api key" in repr(result) and "not_run=" in repr(result)
    err = capsys.readouterr().err
    assert "evalnb: why: model 'm' stopped after 3 consecutive failed calls (auth)" in err
    not_run = result.samples[result.samples.status == "not_run"]
    assert len(not_run) == row["n_not_run"] and not_run.error.str.startswith("model 'm' stopped after 3").all()


def test_a_refused_port_ends_a_60_row_run_in_seconds(make_suite):
    url = f"http://127.0.0.1:{_free_port()}/v1"
    started = time.monotonic()
    result = evalnb.run(make_suite({"t": rows(60)}), [Model("m", base_url=url)], concurrency=4, progress=False)
    elapsed = time.monotonic() - started
    assert elapsed < 15, elapsed  # three attempts per call, and only the first few calls
    assert result.status == "failed" and "(connection)" in result.run["error"]
    _counts_add_up(result, 60)
    assert result.metrics.iloc[0]["n_failed"] <= STOP_AFTER + 4
    failed = result.samples[result.samples.status == "failed"]
    assert failed.latency_s.notna().all() and (failed.latency_s > 0).all()  # how long the failed call took


def test_a_grader_needing_a_judge_that_was_not_given_stops_before_any_candidate_call(make_suite, model_server):
    server = model_server()
    judged = "def grade(sample, item, ctx):\n    return ctx.responses_create(input='ok?')['output_text'] == 'yes'\n"
    suite = make_suite({"j": rows(50), "plain": rows(5)}, j={"grader": {"contract": "model_backed", "source": judged}})
    result = evalnb.run(suite, [Model("m", base_url=server.base_url)], progress=False)
    assert result.status == "failed" and "judge_model" in result.run["error"] and "task 'j'" in result.run["error"]
    assert server.request_count == 5  # the other task ran; not one call for 'j'
    metrics = result.metrics.set_index("task_id")
    assert metrics.loc["plain", "n"] == 5 and metrics.loc["j", "n_not_run"] == 50


def test_a_grader_that_reaches_the_judge_unseen_stops_its_task_after_a_few_candidate_calls(make_suite, model_server):
    server = model_server(latency=0.05)
    hidden = ("def grade(sample, item, ctx):\n"
              "    ask = getattr(ctx, 'responses' + '_create')\n"
              "    return ask(input='ok?')['output_text'] == 'yes'\n")
    suite = make_suite({"j": rows(200)}, j={"grader": {"contract": "model_backed", "source": hidden}})
    result = evalnb.run(suite, [Model("m", base_url=server.base_url)], concurrency=2, progress=False)
    assert result.status == "failed" and "needs a judge model" in result.run["error"]
    assert server.request_count < 40, server.request_count  # not all 200
    _counts_add_up(result, 200)


def test_a_server_killed_mid_run_then_resume_ends_with_every_sample_answered(make_suite, capsys):
    from helpers.runner_kit import responder

    port = _free_port()
    server = LocalModelServer(responder, port=port, latency=0.01).start()
    suite = make_suite({"t": rows(200)})
    model = Model("good", base_url=server.base_url)
    killer = threading.Thread(target=lambda: (time.sleep(0.4), server.stop()))
    killer.start()
    first = evalnb.run(suite, [model], concurrency=4, progress=False)
    killer.join()
    assert first.status == "failed" and "(connection)" in first.run["error"]
    answered = int((first.samples.status == "completed").sum())
    assert 0 < answered < 200
    again = LocalModelServer(responder, port=port).start()
    try:
        resumed = evalnb.resume(first.run_id, progress="text")
    finally:
        again.stop()
    assert resumed.run_id == first.run_id and resumed.status == "completed"
    assert (resumed.samples.status == "completed").sum() == 200 and len(resumed.samples) == 200
    assert again.request_count == 200 - answered  # only what had not been answered
    err = capsys.readouterr().err
    assert f"resume {first.run_id}: sending again {200 - answered} sample(s)" in err


def test_resume_keeps_samples_that_failed_for_their_own_reasons_unless_asked(make_suite, model_server):
    server = model_server(faults=[Fault(status=400, match="ITEM-3:", body={"error": {"message": "too long"}}),
                                  Fault(status=503, match="ITEM-5:", times=3)])
    suite = make_suite({"t": rows(10)})
    first = evalnb.run(suite, [Model("good", base_url=server.base_url)], progress=False)
    assert first.status == "completed" and (first.samples.status == "failed").sum() == 2
    before = server.request_count  # the 503 fault has used its 3 times: the server answers ITEM-5 now
    resumed = evalnb.resume(first.run_id, progress=False)
    assert [r.body["input"][:7] for r in server.requests[before:]] == ["ITEM-5:"]  # the 503, not the 400
    assert (resumed.samples.status == "failed").sum() == 1 and resumed.status == "completed"
    assert resumed.samples.set_index("sample_index").loc[5, "status"] == "completed"
    before = server.request_count
    evalnb.resume(first.run_id, retry_failed=True, progress=False)
    assert [r.body["input"][:7] for r in server.requests[before:]] == ["ITEM-3:"]


def test_a_budget_stopped_runs_counts_add_up_per_task_also_for_tasks_that_never_started(make_suite, model_server):
    server = model_server(usage={"input_tokens": 10, "output_tokens": 10})
    suite = make_suite({"first": rows(10), "second": rows(10)})
    price = {"input": 1000.0, "output": 1000.0}
    result = evalnb.run(suite, [Model("m", base_url=server.base_url, price=price)], max_cost_usd=0.1,
                        generation={"max_output_tokens": 10}, progress=False)
    assert result.status == "stopped"
    _counts_add_up(result, 10)
    second = result.metrics.set_index("task_id").loc["second"]
    assert second["n_not_run"] == 10 and second["n"] == 0


def test_runs_shows_planned_and_done_for_a_cancelled_run(make_suite, model_server):
    import asyncio

    server = model_server(latency=0.05)
    suite = make_suite({"t": rows(120)})

    async def cancel_after_some():
        task = asyncio.ensure_future(evalnb.arun(suite, [Model("m", base_url=server.base_url)], concurrency=2,
                                                 progress=False))
        while server.request_count < 20:
            await asyncio.sleep(0.01)
        task.cancel()
        return await task

    result = asyncio.run(cancel_after_some())
    assert result.status == "cancelled"
    row = evalnb.runs().set_index("run_id").loc[result.run_id]
    assert row["n_planned"] == 120 and row["n_samples"] < 120 and row["n_not_run"] == 120 - row["n_samples"]
    assert result.metrics.iloc[0][["n", "n_failed", "n_unscored", "n_not_run"]].sum() == 120


def test_a_run_warns_once_per_task_when_its_grader_returns_undeclared_score_names(make_suite, model_server):
    server = model_server()
    # the name is built at run time, so the manifest checks cannot see it: the run's warning does
    source = "def grade(sample, item):\n    return {'scores': {'ac' + 'c': 1.0}}\n"
    suite = make_suite({"t": rows(20)}, t={"grader": {"source": source}, "metrics": [{"id": "accuracy"}]})
    with pytest.warns(UserWarning) as caught:
        evalnb.run(suite, [Model("m", base_url=server.base_url)], progress=False)
    said = [str(w.message) for w in caught if "not among the task's metrics" in str(w.message)]
    assert said == ["task 't': the grader returned score(s) 'acc' that are not among the task's metrics (accuracy); "
                    "they are stored but not counted in result.metrics; 'acc': did you mean 'accuracy'?"]


def test_the_panel_shows_the_stop_and_the_top_reasons_with_counts(make_suite, model_server, widget_displays):
    server = model_server(faults=[Fault(status=403, body={"error": {"message": "no access"}})])
    evalnb.run(make_suite({"t": rows(30)}), [Model("m", base_url=server.base_url)], concurrency=2)
    (panel,) = widget_displays
    assert "why" in panel.reasons.value and "HTTP 403: no access" in panel.reasons.value
    assert "model &#x27;m&#x27; stopped after 3 consecutive failed calls (auth)" in panel.warnings.value
    assert "not run" in panel.static_html()


def test_cli_resume_retry_failed_sends_own_failures_again(make_suite, model_server, evalnb_home, capsys):
    from evalnb.cli import main

    server = model_server(faults=[Fault(status=400, match="ITEM-2:", times=1)])
    first = evalnb.run(make_suite({"t": rows(4)}), [Model("good", base_url=server.base_url)], progress=False)
    assert (first.samples.status == "failed").sum() == 1
    before = server.request_count
    assert main(["resume", first.run_id]) == 1  # nothing resendable: the 400 stays failed
    assert server.request_count == before and "keeping 1 that failed for their own reasons" in capsys.readouterr().err
    assert main(["resume", first.run_id, "--retry-failed"]) == 0
    assert server.request_count == before + 1 and "status: completed" in capsys.readouterr().out
