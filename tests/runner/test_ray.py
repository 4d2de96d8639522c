"""executor="ray" on a real Ray runtime: the same results as the local executor, keys kept out
of the store, a killed worker, an interrupted run resumed, a killed driver resumed.

Ray comes from the `ray_runtime` fixture (conftest.py): RAY_ADDRESS's cluster or a local one
with 2 CPUs. Marked slow: `make test-slow` and .ci/run run these, `make test` does not.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import evalnb
from evalnb import Model
from evalnb.runner.executors.ray_driver import RayExecutor
from evalnb.store import Store
from evalnb.testing import Fault
from helpers.runner_kit import EXACT, rows

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("evalnb_home", "ray_runtime")]

BATCH = (
    "def grade_batch(samples):\n"
    "    right = sum(s['extracted_output'] == s['item']['target'] for s in samples)\n"
    "    return {'metrics': {'share_right': right / len(samples)}}\n"
)
COMPARED = ["task_id", "model", "sample_index", "epoch", "status", "prompt", "target", "output_text",
            "extracted_output", "error", "dataset_row"]


def _same(a, b) -> None:
    left = a.samples[COMPARED + [c for c in a.samples if c in a.metric_columns.values()]]
    right = b.samples[left.columns]
    assert len(left) and left.equals(right)


def test_local_and_ray_give_the_same_samples_and_metrics(make_suite, model_server):
    suite = make_suite({"qa": rows(300), "agg": rows(40)},
                       qa={"output_extraction": {"type": "regex", "pattern": r"(\d+)"}},
                       agg={"grader": {"contract": "batch", "source": BATCH}, "metrics": [{"id": "share_right"}]})
    # one prompt is refused (a generation error), never retried
    server = model_server(faults=[Fault(match="ITEM-7:", status=400)])
    models = [Model("good", base_url=server.base_url, api="chat"), Model("m2", base_url=server.base_url)]
    local = evalnb.run(suite, models, concurrency=4, progress=False, reuse=False, epochs=2)
    ray_run = evalnb.run(suite, models, concurrency=4, progress=False, reuse=False, epochs=2,
                         executor=RayExecutor(num_workers=2, shard_size=64))
    assert ray_run.status == local.status == "completed"
    assert ray_run.run["summary"]["options"]["executor"]["type"] == "ray"
    _same(local, ray_run)
    assert ray_run.metrics.drop(columns=["error"]).equals(local.metrics.drop(columns=["error"]))
    failed = ray_run.samples[ray_run.samples["status"] == "failed"]
    assert set(zip(failed["task_id"], failed["sample_index"])) == {("qa", 7), ("agg", 7)}
    assert failed["error"].str.contains("400").all()
    m2 = ray_run.metrics.set_index(["task_id", "model", "metric"])
    # the batch grader ran on the driver over the 39 items left, 8 of them wrong (every 5th)
    assert m2.loc[("agg", "m2", "share_right"), "mean"] == pytest.approx(31 / 39)


def test_a_ray_run_stores_no_key_and_its_graders_never_see_it(make_suite, model_server, evalnb_home, monkeypatch):
    key = "sk-ray-0123456789abcdefSECRET"
    monkeypatch.setenv("RAY_TEST_KEY", key)
    sniff = (
        "import os\n"
        "def grade(sample, item):\n"
        "    return {'scores': {'key_seen': any('sk-ray-' in v for v in os.environ.values())}}\n"
    )
    suite = make_suite({"qa": rows(60)}, qa={"grader": {"source": sniff}, "metrics": [{"id": "key_seen"}]})
    server = model_server(echo_headers=["authorization"])  # a proxy that quotes the key back
    model = Model("m", base_url=server.base_url, api="chat", api_key_env="RAY_TEST_KEY")
    result = evalnb.run(suite, [model], progress=False, executor=RayExecutor(num_workers=2))
    assert result.status == "completed"
    # the key did travel to the workers (they sent it) ...
    assert {r.headers["authorization"] for r in server.requests} == {f"Bearer {key}"}
    # ... but no grader saw it, and nothing stored holds it (the driver's redaction)
    assert result.metrics["mean"].iloc[0] == 0.0
    assert result.samples["output_text"].str.contains("authorization").all()
    for path in evalnb_home.glob("evalnb.sqlite*"):
        assert key.encode() not in path.read_bytes()


def _stored(run_id_hint: list[str]) -> int:
    if not run_id_hint:
        return 0
    with sqlite3.connect(f"file:{os.environ['EVALNB_HOME']}/evalnb.sqlite?mode=ro", uri=True) as con:
        return con.execute("SELECT count(*) FROM samples WHERE run_id = ? AND status = 'completed'",
                           run_id_hint).fetchone()[0]


def _latest_run() -> list[str]:
    try:
        with sqlite3.connect(f"file:{os.environ['EVALNB_HOME']}/evalnb.sqlite?mode=ro", uri=True) as con:
            row = con.execute("SELECT run_id FROM runs ORDER BY created_at DESC, rowid DESC LIMIT 1").fetchone()
    except sqlite3.Error:
        return []
    return [row[0]] if row else []


def test_a_killed_ray_worker_loses_nothing_and_the_run_completes(make_suite, model_server, ray_runtime):
    suite = make_suite({"qa": rows(600)})
    server = model_server(latency=0.02)
    model = Model("m", base_url=server.base_url, api="chat")
    executor = RayExecutor(num_workers=2, concurrency_per_worker=4, shard_size=50)
    outcome: dict = {}
    runner = threading.Thread(target=lambda: outcome.update(result=evalnb.run(
        suite, [model], progress=False, executor=executor)))
    runner.start()
    deadline = time.monotonic() + 120
    while _stored(_latest_run()) < 100 and runner.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert executor.actors, "the run ended before a worker could be killed"
    pid = ray_runtime.get(executor.actors[0].pid.remote())
    os.kill(pid, signal.SIGKILL)
    killed_at = _stored(_latest_run())
    runner.join(180)
    result = outcome["result"]
    assert result.status == "completed"
    assert 100 <= killed_at < 600  # killed mid-run
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    samples = result.samples
    assert len(samples) == 600 and (samples["status"] == "completed").all()
    assert samples["sample_index"].tolist() == list(range(600))
    reference = evalnb.run(suite, [model], progress=False, reuse=False)  # uninterrupted, local
    _same(reference, result)
    assert server.request_count >= 1200


def test_an_interrupted_ray_run_resumes_sending_only_the_rest(make_suite, model_server):
    suite = make_suite({"qa": rows(500)})
    server = model_server(latency=0.02)
    model = Model("m", base_url=server.base_url, api="chat")

    async def interrupted():
        task = asyncio.ensure_future(evalnb.arun(suite, [model], progress=False,
                                                 executor=RayExecutor(num_workers=2, concurrency_per_worker=4)))
        while _stored(_latest_run()) < 150 and not task.done():
            await asyncio.sleep(0.05)
        task.cancel()
        return await task

    partial = asyncio.run(interrupted())
    assert partial.status == "cancelled"
    with sqlite3.connect(f"file:{os.environ['EVALNB_HOME']}/evalnb.sqlite?mode=ro", uri=True) as con:
        answered = con.execute("SELECT count(*) FROM outputs WHERE run_id = ?", (partial.run_id,)).fetchone()[0]
    assert 150 <= answered < 500
    server.reset()
    resumed = evalnb.resume(partial.run_id, progress=False)  # on Ray again: the stored executor
    assert resumed.run_id == partial.run_id and resumed.status == "completed"
    assert server.request_count == 500 - answered  # only the rest
    assert len(resumed.samples) == 500 and (resumed.samples["status"] == "completed").all()
    assert resumed.run["summary"]["options"]["executor"]["type"] == "ray"


DRIVER = """
import sys
import evalnb
from evalnb.runner.executors.ray_driver import RayExecutor

suite = evalnb.Suite.from_file(sys.argv[1])
evalnb.run(suite, [evalnb.Model("m", base_url=sys.argv[2], api="chat")], progress=False,
           executor=RayExecutor(num_workers=2, concurrency_per_worker=4, address=sys.argv[3]))
"""


def test_a_killed_driver_is_resumed_without_ray(tmp_path: Path, model_server, ray_runtime):
    from helpers.runner_kit import manifest

    import json

    folder = tmp_path / "suite"
    suite_path = folder / "suite.json"
    folder.mkdir()
    suite_path.write_text(json.dumps(manifest(folder, {"qa": rows(500)})))
    server = model_server(latency=0.02)
    address = ray_runtime.get_runtime_context().gcs_address
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    child = subprocess.Popen([sys.executable, "-c", DRIVER, str(suite_path), server.base_url, address], env=env)
    try:
        deadline = time.monotonic() + 120
        while _stored(_latest_run()) < 120 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.poll() is None, "the driver finished before it could be killed"
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    (run_id,) = _latest_run()
    store = Store()
    assert store.get_run(run_id)["status"] == "in_progress"  # died without a word
    before = _stored([run_id])
    assert 120 <= before < 500
    resumed = evalnb.resume(run_id, progress=False, executor="local", store=store)
    assert resumed.status == "completed" and len(resumed.samples) == 500
    assert (resumed.samples["status"] == "completed").all()
    assert server.request_count <= 500 + 60  # at most what was in flight on the workers was asked twice
    suite = evalnb.Suite.from_file(suite_path)
    reference = evalnb.run(suite, [Model("m", base_url=server.base_url, api="chat")], progress=False, reuse=False)
    _same(reference, resumed)


JUDGE = (
    "def grade(sample, item, ctx):\n"
    "    reply = ctx.responses_create(model='auto', input='Is ' + sample['output_text'] + ' right for ' + item['target'] + '?')\n"
    "    return {'scores': {'judged': reply['output_text'] == 'yes'}}\n"
)


def _judge_answer(body: dict) -> str:
    words = (body.get("input") if isinstance(body.get("input"), str) else "").split()
    return "yes" if len(words) >= 5 and words[1] == words[4].rstrip("?") else "no"


def test_judge_calls_and_costs_on_ray_are_recorded_priced_and_cached_like_local(make_suite, model_server):
    suite = make_suite({"t": rows(40)}, t={"grader": {"contract": "model_backed", "source": JUDGE},
                                           "metrics": [{"id": "judged"}]})
    usage = {"input_tokens": 100, "output_tokens": 10}
    cand, judge = model_server(usage=usage), model_server(_judge_answer, usage=usage)
    price = {"input": 1.0, "output": 2.0}  # USD per 1M tokens: 0.00012 a call
    models = [Model("m", base_url=cand.base_url, price=price)]
    judge_model = Model("j", base_url=judge.base_url, price=price)
    ray_run = evalnb.run(suite, models, judge_model=judge_model, progress=False, reuse=False,
                         executor=RayExecutor(num_workers=2, shard_size=8))
    assert ray_run.status == "completed" and judge.calls("/v1/responses") == 40
    calls = ray_run.judge_calls
    assert len(calls) == 40 and not calls["cached"].any()
    assert calls["cost_usd"].to_numpy() == pytest.approx([0.00012] * 40)
    costs = ray_run.costs.set_index("role")
    assert costs.loc["candidate", "calls"] == 40 and costs.loc["judge", "calls"] == 40
    assert ray_run.cost_usd == pytest.approx(80 * 0.00012)
    local = evalnb.run(suite, models, judge_model=judge_model, progress=False, reuse=False)
    assert ray_run.metrics.drop(columns="error").equals(local.metrics.drop(columns="error"))
    assert local.cost_usd == pytest.approx(ray_run.cost_usd)
    # the driver cached what the workers' judge said: a local re-grade asks neither server again
    before = (cand.calls(), judge.calls())
    regrade = evalnb.run(suite, models, judge_model=judge_model, progress=False)
    assert (cand.calls(), judge.calls()) == before
    assert regrade.judge_calls["cached"].all() and regrade.cost_usd == 0
