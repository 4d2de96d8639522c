"""API keys reach the model server's Authorization header and nowhere else.

Not in the store file (the .sqlite and its -wal/-shm, read as bytes), not in results or their
CSV exports, not in `evalnb.runs()`, not in the progress line, not in the grader sandbox's
environment, and not in error messages, even when the server echoes the key back in a 401.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import evalnb
from evalnb import Model
from evalnb.store import Store
from evalnb.testing import Fault
from helpers.runner_kit import rows

pytestmark = pytest.mark.usefixtures("evalnb_home")

KEY = "sk-test-SECRET123"
JUDGE_KEY = "sk-judge-SECRET777"
FRAGMENTS = ("SECRET123", "SECRET777")  # a partly masked key is still a leak

ENV_GRADER = """
import os

def grade(sample, item):
    return {"scores": {"s": 1}, "judge": dict(os.environ)}
"""

JUDGE_GRADER = """
def grade(sample, item, ctx):
    reply = ctx.responses_create(input="JUDGE " + sample["output_text"])
    return {"scores": {"judged": reply["output_text"] == "yes"}}
"""


def _echo(key: str, status: int) -> Fault:
    """A reply that quotes the request's credentials back, as some servers do."""
    message = f"Incorrect API key provided: Bearer {key}. Authorization: Bearer {key}"
    return Fault(status=status, retry_after=0, body={"error": {"message": message, "type": "invalid_request_error"}})


def _leaks(text: str) -> list[str]:
    return [f for f in FRAGMENTS if f in text]


def _home_bytes(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in home.rglob("*") if p.is_file()}


def _assert_nothing_leaked(home: Path, result, capsys) -> None:
    files = _home_bytes(home)
    assert any(name.endswith(".sqlite") for name in files)
    for name, data in files.items():
        for fragment in FRAGMENTS:
            assert fragment.encode() not in data, f"{fragment} found in {name}"
    texts = {
        "samples.csv": result.samples.to_csv(),
        "metrics.csv": result.metrics.to_csv(),
        "scores.csv": result.scores.to_csv(),
        "runs.csv": evalnb.runs().to_csv(),
        "run record": repr(result.run),
        "summary": result.summary(),
        "html": result._repr_html_(),
        "stored samples": repr(Store().samples(result.run_id)),
        "console": "".join(capsys.readouterr()),
    }
    for where, text in texts.items():
        assert not _leaks(text), f"key found in {where}"


def _responder(body):
    text = body.get("input") or body["messages"][-1]["content"]
    if text.startswith("JUDGE "):
        return "yes" if text.removeprefix("JUDGE ").isdigit() else "no"
    return text.split(":")[0].removeprefix("ITEM-")


@pytest.mark.parametrize("how", ["api_key", "api_key_env", "header"])
def test_the_key_reaches_the_server_and_nowhere_else(make_suite, model_server, evalnb_home, monkeypatch,
                                                     capsys, how):
    monkeypatch.setenv("EVALNB_TEST_KEY", KEY)  # in the parent's environment in every case
    if how == "api_key":
        credentials = {"api_key": KEY}
    elif how == "api_key_env":
        credentials = {"api_key_env": "EVALNB_TEST_KEY"}
    else:
        credentials = {"headers": {"Authorization": f"Bearer {KEY}"}}
    suite = make_suite({"t": rows(6)}, t={"grader": {"source": ENV_GRADER}, "metrics": [{"id": "s"}]})
    server = model_server(
        _responder,
        faults=[
            Fault(**{**_echo(KEY, 401).__dict__, "match": "ITEM-3:"}),  # not retried
            Fault(**{**_echo(KEY, 500).__dict__, "match": "ITEM-4:"}),  # retried, then given up
        ],
    )
    model = Model("m", base_url=server.base_url, api="chat", **credentials)

    result = evalnb.run(suite, [model], generation={"max_retries": 1}, progress="text")

    assert {r.headers.get("authorization") for r in server.requests} == {f"Bearer {KEY}"}
    s = result.samples.set_index("sample_index")
    assert list(s.status) == ["completed"] * 3 + ["failed"] * 2 + ["completed"]
    for i, status in ((3, "HTTP 401"), (4, "HTTP 500")):
        assert status in s.loc[i, "error"] and "Incorrect API key provided" in s.loc[i, "error"]
        assert not _leaks(s.loc[i, "error"])
    for env in s[s.status == "completed"].judge:
        assert "EVALNB_TEST_KEY" not in env
        assert not _leaks(repr(env))
        assert env  # the grader really returned its environment
    _assert_nothing_leaked(evalnb_home, result, capsys)


def test_the_judge_key_stays_in_the_parent(make_suite, model_server, evalnb_home, monkeypatch, capsys):
    monkeypatch.setenv("EVALNB_TEST_JUDGE_KEY", JUDGE_KEY)
    suite = make_suite({"t": rows(6)}, t={"grader": {"contract": "model_backed", "source": JUDGE_GRADER},
                                          "metrics": [{"id": "judged"}]})
    server = model_server(_responder)
    judge_server = model_server(_responder, faults=[Fault(**{**_echo(JUDGE_KEY, 401).__dict__, "match": "JUDGE 2"})])
    judge = Model("judge", base_url=judge_server.base_url, api_key_env="EVALNB_TEST_JUDGE_KEY")

    result = evalnb.run(suite, [Model("m", base_url=server.base_url, api_key=KEY)], judge_model=judge,
                        progress=False)

    assert {r.headers.get("authorization") for r in judge_server.requests} == {f"Bearer {JUDGE_KEY}"}
    assert {r.headers.get("authorization") for r in server.requests} == {f"Bearer {KEY}"}
    s = result.samples.set_index("sample_index")
    assert s.loc[2, "status"] == "failed" and "401" in s.loc[2, "error"]
    assert (s.drop(index=2).status == "completed").all()
    _assert_nothing_leaked(evalnb_home, result, capsys)


BATCH_JUDGE = """
def grade_batch(samples, ctx):
    reply = ctx.responses_create(input="JUDGE all")
    return {"metrics": {"verdict": 1.0}}
"""


def test_a_failed_batch_judge_does_not_leak_its_key(make_suite, model_server, evalnb_home, monkeypatch, capsys):
    """The judge server echoes its key in a 401: the task's recorded error does not."""
    monkeypatch.setenv("EVALNB_TEST_JUDGE_KEY", JUDGE_KEY)
    suite = make_suite({"t": rows(3)}, t={"grader": {"contract": "model_backed", "source": BATCH_JUDGE}})
    server = model_server(_responder)
    judge_server = model_server(_responder, faults=[_echo(JUDGE_KEY, 401)])
    judge = Model("judge", base_url=judge_server.base_url, api_key_env="EVALNB_TEST_JUDGE_KEY")

    result = evalnb.run(suite, [Model("m", base_url=server.base_url, api_key=KEY)], judge_model=judge,
                        progress=False)

    assert judge_server.request_count == 1
    (error,) = set(result.metrics.error)
    assert "401" in error and "Incorrect API key provided" in error
    assert not _leaks(error)
    _assert_nothing_leaked(evalnb_home, result, capsys)
