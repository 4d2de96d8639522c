"""The judge cache, judge settings and judge-call records, against real local servers.

A candidate server answers with the planted answers of `helpers.runner_kit`; a second server is
the judge and counts every call it gets (`LocalModelServer.calls`), so "no judge call" is
something the judge itself testifies to.
"""

from __future__ import annotations

import pandas as pd
import pytest

import evalnb
from evalnb import Model
from evalnb.store import Store
from helpers.runner_kit import rows

pytestmark = pytest.mark.usefixtures("evalnb_home")

N = 10
JUDGE = (
    "def grade(sample, item, ctx):\n"
    "    reply = ctx.responses_create(model='auto', input='Is ' + sample['output_text'] + ' right for ' + item['target'] + '?'{extra})\n"
    "    return {{'scores': {{'judged': {parse}}}, 'judge': {{'raw': reply['output_text']}}}}\n"
)
STRICT = "reply['output_text'] == 'yes'"
LENIENT = "reply['output_text'].startswith('y')"


def judge_answer(body: dict) -> str:
    """The judge says yes when the answer repeats the target ("Is 3 right for 3?")."""
    text = body.get("input") if isinstance(body.get("input"), str) else ""
    words = text.split()
    return "yes" if len(words) >= 5 and words[1] == words[4].rstrip("?") else "no"


def _suite(make_suite, parse=STRICT, extra=""):
    grader = {"contract": "model_backed", "source": JUDGE.format(parse=parse, extra=extra)}
    return make_suite({"t": rows(N)}, t={"grader": grader, "metrics": [{"id": "judged"}]})


@pytest.fixture
def servers(model_server):
    return model_server(), model_server(judge_answer)


def _run(suite, cand, judge, **options):
    return evalnb.run(suite, [Model("m", base_url=cand.base_url)], judge_model=Model("j", base_url=judge.base_url),
                      progress=False, **options)


def test_regrading_after_a_parse_change_makes_no_judge_and_no_candidate_calls(make_suite, servers):
    cand, judge = servers
    first = _run(_suite(make_suite), cand, judge)
    assert first.status == "completed"
    assert cand.calls("/v1/responses") == N and judge.calls("/v1/responses") == N
    assert first.metrics.set_index("metric").loc["judged", "mean"] == pytest.approx(0.8)  # item 4 is wrong
    # only how the reply becomes a score changes: a new suite version, the same requests
    second = _run(_suite(make_suite, parse=LENIENT), cand, judge)
    assert second.run_id != first.run_id and second.status == "completed"
    assert cand.calls() == N and judge.calls() == N  # not one call more to either server
    calls = second.judge_calls
    assert len(calls) == N and calls["cached"].all() and (calls["cost_usd"] == 0).all()
    assert second.samples["cached"].all()
    assert second.metrics.set_index("metric").loc["judged", "mean"] == pytest.approx(0.8)


def test_reuse_false_sends_every_judge_call_again(make_suite, servers):
    cand, judge = servers
    suite = _suite(make_suite)
    _run(suite, cand, judge)
    again = _run(suite, cand, judge, reuse=False)
    assert cand.calls() == 2 * N and judge.calls() == 2 * N
    assert not again.judge_calls["cached"].any() and not again.samples["cached"].any()


def test_judge_calls_are_kept_per_sample_with_request_reply_latency_and_usage(make_suite, servers):
    cand, judge = servers
    result = _run(_suite(make_suite), cand, judge)
    calls = result.judge_calls
    assert list(calls.columns[:8]) == ["task_id", "model", "sample_index", "epoch", "call", "kind", "judge_model",
                                       "request"]
    assert calls["sample_index"].tolist() == list(range(N)) and (calls["call"] == 0).all()
    row = calls.iloc[3]
    sent = judge.requests[[r.body["input"] for r in judge.requests].index("Is 3 right for 3?")].body
    assert row["request"] == sent  # what was sent is what is stored
    assert row["output_text"] == "yes" and row["reply"]["output_text"] == "yes"
    assert row["usage"] == {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}  # the server counts words
    assert row["input_tokens"] == 5 and row["latency_s"] > 0 and not row["cached"]
    assert calls.set_index("sample_index").loc[4, "output_text"] == "no"


def test_judge_generation_gives_defaults_the_grader_overrides_and_the_store_keeps_them(make_suite, servers):
    cand, judge = servers
    suite = _suite(make_suite, extra=", temperature=0.7")
    result = _run(suite, cand, judge, judge_generation={"temperature": 0, "max_gen_toks": 12})
    bodies = [r.body for r in judge.requests]
    assert all(b["temperature"] == 0.7 and b["max_output_tokens"] == 12 for b in bodies)  # grader wins, alias folded
    assert all(c["temperature"] == 0.7 for c in result.judge_calls["request"])
    options = result.run["summary"]["options"]
    assert options["judge_generation"] == {"temperature": 0.0, "max_output_tokens": 12}
    # without the grader's own temperature, the default is what is sent
    plain = _run(_suite(make_suite), cand, judge, judge_generation={"temperature": 0})
    assert [r.body["temperature"] for r in judge.requests[N:]] == [0.0] * N
    assert plain.judge_calls["request"].map(lambda b: b["temperature"]).eq(0.0).all()


def test_changing_judge_generation_is_a_new_run_and_new_judge_calls(make_suite, servers):
    cand, judge = servers
    suite = _suite(make_suite)
    a = _run(suite, cand, judge, judge_generation={"temperature": 0})
    b = _run(suite, cand, judge, judge_generation={"temperature": 1})
    assert a.run["signature"] != b.run["signature"]
    assert cand.calls() == N and judge.calls() == 2 * N  # candidates from the store, judges asked anew
    c = _run(suite, cand, judge, judge_generation={"temperature": 1})
    assert judge.calls() == 2 * N and c.samples["cached"].all()


def test_identical_judge_requests_within_a_run_are_asked_once(make_suite, model_server):
    """Two models giving the same answer make the judge the same request: one call answers both."""
    cand, judge = model_server(), model_server(judge_answer)
    models = [Model("m", base_url=cand.base_url), Model("m2", base_url=cand.base_url)]  # same planted answers
    result = evalnb.run(_suite(make_suite), models, judge_model=Model("j", base_url=judge.base_url), progress=False)
    assert judge.calls() == N
    calls = result.judge_calls
    assert len(calls) == 2 * N and int(calls["cached"].sum()) == N
    assert result.costs.query("role == 'judge'")["calls"].sum() == N


def test_a_repeated_ask_in_one_grading_is_a_new_call(make_suite, model_server):
    """A grader retrying an unparsable reply must get a fresh answer, not the cached one."""
    answers = iter(["garbled", "yes"] * N)
    judge = model_server(lambda body: next(answers))
    cand = model_server()
    source = ("def grade(sample, item, ctx):\n"
              "    for _ in range(2):\n"
              "        text = ctx.responses_create(input='Q' + item['target'])['output_text']\n"
              "        if text in ('yes', 'no'):\n"
              "            return text == 'yes'\n"
              "    raise ValueError(text)\n")
    suite = make_suite({"t": rows(N)}, t={"grader": {"contract": "model_backed", "source": source}})
    result = _run(suite, cand, judge)
    assert result.status == "completed" and result.metrics["mean"].tolist() == [1.0]
    assert judge.calls() == 2 * N
    calls = result.judge_calls
    assert calls.groupby("sample_index")["call"].apply(list).tolist() == [[0, 1]] * N
    assert calls.groupby("sample_index")["output_text"].apply(list).tolist() == [["garbled", "yes"]] * N
    # graded again (a new suite version): both asks come from the store, in order
    again = make_suite({"t": rows(N)}, t={"grader": {"contract": "model_backed", "source": source + "\n# v2\n"}})
    second = _run(again, cand, judge)
    assert judge.calls() == 2 * N and second.metrics["mean"].tolist() == [1.0]


def test_an_identical_rerun_copies_samples_and_their_judge_calls_as_cached(make_suite, servers):
    cand, judge = servers
    suite = _suite(make_suite)
    first = _run(suite, cand, judge)
    second = _run(suite, cand, judge)
    assert second.run_id != first.run_id and cand.calls() == N and judge.calls() == N
    calls = second.judge_calls
    assert len(calls) == N and calls["cached"].all() and (calls["cost_usd"] == 0).all()
    assert calls["output_text"].tolist() == first.judge_calls["output_text"].tolist()


def test_batch_grader_calls_are_recorded_without_a_sample(make_suite, servers):
    cand, judge = servers
    source = ("def grade_batch(samples, ctx):\n"
              "    reply = ctx.responses_create(input='Is ' + str(len(samples)) + ' right for 10?')\n"
              "    return {'metrics': {'judged_batch': reply['output_text'] == 'yes'}}\n")
    suite = make_suite({"t": rows(N)}, t={"grader": {"contract": "model_backed", "source": source}})
    result = _run(suite, cand, judge)
    calls = result.judge_calls
    assert len(calls) == 1 and calls["sample_index"].isna().all() and calls["output_text"].tolist() == ["yes"]
    assert result.metrics.set_index("metric").loc["judged_batch", "mean"] == 1.0


def test_judge_calls_survive_in_the_store_and_browse_shows_them(make_suite, servers):
    cand, judge = servers
    result = _run(_suite(make_suite), cand, judge)
    loaded = evalnb.load_run(result.run_id)
    pd.testing.assert_frame_equal(loaded.judge_calls, result.judge_calls)
    widget = result.browse()
    widget.show(4)
    html = widget.static_html()
    assert "judge calls" in html and "Is wrong right for 4?" in html  # item 4: the model answered "wrong"
    assert "&rarr;" in html and ">no</pre>" in html  # and the judge's reply
    assert "from the store" not in html
    again = _run(_suite(make_suite, parse=LENIENT), cand, judge).browse()
    again.show(4)
    assert "from the store" in again.static_html()


def test_a_store_from_before_judge_calls_opens_and_records_them(tmp_path, make_suite, servers):
    """Schema 2 (no judge_calls, no cost columns) upgrades in place; new runs record calls."""
    import sqlite3

    from evalnb.store import _schema

    path = tmp_path / "v2.sqlite"
    conn = sqlite3.connect(path)
    for statement in _schema._DDL_V1:
        conn.execute(statement)
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    _schema._v1_to_v2_epochs(conn)
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.execute("INSERT INTO outputs (request_key, output_text, created_at) VALUES ('k', 'old', 0)")
    conn.commit()
    conn.close()
    cand, judge = servers
    with Store(path) as store:
        assert store.schema_version == _schema.SCHEMA_VERSION
        assert store.lookup_outputs(["k"])["k"]["output_text"] == "old"
        result = _run(_suite(make_suite), cand, judge, store=store)
        assert len(result.judge_calls) == N and store.integrity_check() == "ok"


def test_epochs_with_the_same_answer_share_the_judges_verdict(make_suite, servers):
    """The key is the body: a deterministic candidate answers both epochs alike, so the judge is asked once."""
    cand, judge = servers
    result = _run(_suite(make_suite), cand, judge, epochs=2)
    assert cand.calls() == 2 * N and judge.calls() == N
    calls = result.judge_calls
    assert sorted(calls["epoch"].unique().tolist()) == [0, 1] and len(calls) == 2 * N
    assert int(calls["cached"].sum()) == N
    assert calls.groupby("sample_index")["output_text"].nunique().eq(1).all()
