"""The fail-fast rules on their own: which failures stop a model or a task, which a resume resends."""

from __future__ import annotations

import pytest

from evalnb.runner.fail_fast import STOP_AFTER, FailFast, failure_kind, judge_needed, resendable
from evalnb.suite import Suite


@pytest.mark.parametrize("status, message, kind", [
    (401, "m: HTTP 401: bad key", "auth"), (403, "m: HTTP 403: forbidden", "auth"),
    (404, "m: HTTP 404: no such model", "not found"),
    (None, "m: connection error (ConnectError): cannot connect to 127.0.0.1:9 (after 3 attempts)", "connection"),
    (None, "m: timed out after 5s (after 3 attempts)", "timeout"), (503, "m: HTTP 503: down", "server error"),
    (400, "m: HTTP 400: prompt too long", None), (429, "m: HTTP 429: slow down", None), (422, "m: HTTP 422", None),
])
def test_failure_kinds(status, message, kind):
    assert failure_kind(status, message) == kind


def test_a_model_stops_after_consecutive_failures_of_one_kind_and_a_success_resets_the_count():
    ff = FailFast()
    assert [ff.call_failed("m", 401, "m: HTTP 401: bad key") for _ in range(STOP_AFTER - 1)] == [None] * (STOP_AFTER - 1)
    ff.call_succeeded("m")
    assert ff.call_failed("m", 401, "m: HTTP 401: bad key") is None  # the streak started again
    ff.call_failed("m", 400, "m: HTTP 400: too long")  # a failure of the sample's own breaks it too
    for _ in range(STOP_AFTER - 1):
        assert ff.call_failed("m", 401, "m: HTTP 401: bad key") is None
    reason = ff.call_failed("m", 401, "m: HTTP 401: bad key")
    assert reason == f"model 'm' stopped after {STOP_AFTER} consecutive failed calls (auth): HTTP 401: bad key"
    assert ff.stop_reason("t", "m") == reason and ff.stop_reason("t", "other") is None
    for _ in range(10):  # 400s never stop a model
        assert ff.call_failed("other", 400, "other: HTTP 400: bad prompt") is None


def test_a_task_stops_when_its_grader_fails_every_sample_the_same_way_until_one_succeeds():
    ff = FailFast()
    message = "RuntimeError: ctx.responses_create needs a judge model: pass judge_model=... to evalnb.run"
    reasons = [ff.grade_failed("j", message) for _ in range(STOP_AFTER)]
    assert reasons[:-1] == [None] * (STOP_AFTER - 1) and reasons[-1].startswith("task 'j' stopped: its grader failed")
    assert ff.stop_reason("j", "any model") == reasons[-1]
    ff.grade_succeeded("k")
    assert all(ff.grade_failed("k", message) is None for _ in range(10))  # it worked once: errors are the samples'


@pytest.mark.parametrize("error, again", [
    ({"stage": "generation", "status": None, "message": "m: connection error (ConnectError): refused"}, True),
    ({"stage": "generation", "status": None, "message": "m: timed out after 5s"}, True),
    ({"stage": "generation", "status": 503, "message": "m: HTTP 503"}, True),
    ({"stage": "generation", "status": 401, "message": "m: HTTP 401"}, True),
    ({"stage": "not_run", "message": "model 'm' stopped ..."}, True),
    ({"stage": "generation", "status": 400, "message": "m: HTTP 400: too long"}, False),
    ({"stage": "extraction", "message": "bad regex"}, False),
    ({"stage": "grading", "message": "KeyError: 'x'"}, False),
    (None, False),
])
def test_what_a_resume_sends_again(error, again):
    assert resendable(error) is again


def test_a_grader_calling_the_judge_is_seen_in_its_source():
    def suite(source):
        return Suite.from_dict({"tasks": [{"id": "t", "type": "qa", "dataset": {"path": "x.jsonl"},
                                           "prompt_template": "{{q}}", "grader": {"source": source}}]})
    assert judge_needed(suite("def grade(s, i, ctx):\n    x = 1\n    return ctx.responses_create(input='?')\n")
                        .tasks[0]) == 3
    assert judge_needed(suite("def grade(s, i):\n    return 1\n").tasks[0]) is None
    assert judge_needed(Suite.from_dict({"tasks": [{"id": "t", "type": "qa", "dataset": {"path": "x.jsonl"},
                                                   "prompt_template": "{{q}}", "grader": {"builtin": "llm_judge"}}]})
                        .tasks[0]) is not None
