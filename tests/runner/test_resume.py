"""Crash and resume: a run killed with SIGKILL loses nothing that was finished.

A child process runs a suite against a slow LocalModelServer that lives in this (the test)
process; the test watches the SQLite store until enough samples are finished, SIGKILLs the
child, then continues the run, either with `evalnb.resume(run_id)` or by running the same
thing again. The server's request log shows what was sent after the kill.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import evalnb
from evalnb import Model
from evalnb.errors import EvalnbError
from evalnb.store import Store
from helpers.runner_kit import manifest, rows, run_unchecked, wait_for

pytestmark = pytest.mark.usefixtures("evalnb_home")

N_ITEMS = 30
GEN = {"max_retries": 1, "temperature": 0}
COMPARED = ["task_id", "model", "sample_index", "status", "prompt", "target", "output_text",
            "extracted_output", "score"]
STATS = ["task_id", "model", "metric", "n", "n_failed", "mean", "stderr", "ci_low", "ci_high"]

CHILD = """
import sys
import evalnb
from evalnb import Model

suite = evalnb.Suite.from_file(sys.argv[1])
url = sys.argv[2]
models = [Model("good", base_url=url), Model("meh", base_url=url, api="chat")]
evalnb.run(suite, models, concurrency=2, generation={generation}, progress=False)
print("the child finished its run: the test was too slow to kill it", flush=True)
"""


def _models(url: str) -> list[Model]:
    return [Model("good", base_url=url), Model("meh", base_url=url, api="chat")]


def _sent(requests) -> set[tuple[str, str]]:
    return {(r.body["model"], r.body.get("input") or r.body["messages"][-1]["content"]) for r in requests}


def _write_suite(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    path = folder / "suite.json"
    path.write_text(json.dumps(manifest(folder, {"t": rows(N_ITEMS)})), encoding="utf-8")
    return path


def _wait_for(predicate, timeout: float = 30.0, what: str = "condition"):
    return wait_for(predicate, timeout, what)


def _crash_a_run(tmp_path: Path, server, *, finished_at_least: int = 12):
    """Start the child, let it finish some samples, SIGKILL it. -> (run_id, finished, requests at kill)."""
    suite_path = _write_suite(tmp_path)
    store = Store()  # the schema exists before the child opens the file
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(generation=repr(GEN)), str(suite_path), server.base_url],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ),
    )
    try:
        run_id = _wait_for(lambda: next(iter(store.list_runs().run_id), None), what="the child's run")
        _wait_for(lambda: store.sample_counts(run_id)["completed"] >= finished_at_least,
                  what=f"{finished_at_least} finished samples")
        # the owner is alive: nobody else may take the run over
        with pytest.raises(EvalnbError, match="still running"):
            evalnb.resume(run_id, progress=False)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL, out.decode(errors="replace")
    finished = store.samples(run_id, status="completed")
    assert finished_at_least <= len(finished) < 2 * N_ITEMS
    assert store.get_run(run_id)["status"] == "in_progress"  # it died; nothing marked it finished
    store.close()
    return suite_path, run_id, finished, server.request_count


@pytest.mark.parametrize("how", ["resume", "run_again"])
def test_a_killed_run_continues_without_resending_finished_samples(tmp_path, model_server, how):
    server = model_server(latency=0.06)
    suite_path, run_id, finished, sent_at_kill = _crash_a_run(tmp_path, server)
    server.latency = 0.0  # the rest can go fast

    if how == "resume":
        result = evalnb.resume(run_id, progress=False)
    else:
        suite = evalnb.Suite.from_file(suite_path)
        result = evalnb.run(suite, _models(server.base_url), concurrency=2, generation=GEN, progress=False)

    assert result.run_id == run_id and result.status == "completed"
    after = server.requests[sent_at_kill:]
    done_before = {(("good" if s["model"] == "good" else "meh"), s["prompt"]) for s in finished}
    assert not done_before & _sent(after)  # no finished sample was asked again
    # what was never asked before the kill is asked now; calls in flight at the kill may be repeated
    assert 2 * N_ITEMS - sent_at_kill <= len(after) <= 2 * N_ITEMS - len(finished)
    assert len(_sent(after)) == len(after)  # and each at most once

    # the same as a run that was never interrupted (a separate store: fresh calls)
    reference = evalnb.run(evalnb.Suite.from_file(suite_path), _models(server.base_url), concurrency=2,
                           generation=GEN, progress=False, store=Store(tmp_path / "reference.sqlite"))
    assert reference.run_id != run_id
    assert result.samples[COMPARED].equals(reference.samples[COMPARED])
    assert result.metrics[STATS].equals(reference.metrics[STATS])
    assert len(result.samples) == 2 * N_ITEMS


# ---- resuming in-process ------------------------------------------------------------------


def _cancel_after(coro_factory, server, requests: int):
    """Run `arun` and cancel it once the server has seen `requests` requests."""

    async def main():
        task = asyncio.ensure_future(coro_factory())
        while server.request_count < requests and not task.done():
            await asyncio.sleep(0.005)
        task.cancel()
        return await task

    return asyncio.run(main())


JUDGE = """
def grade(sample, item, ctx):
    reply = ctx.responses_create(input=f"JUDGE: {sample['output_text']} vs {item['target']}")
    return {"scores": {"judged": reply["output_text"] == "yes"}}
"""


def _judge(body):
    said, _, target = body["input"].removeprefix("JUDGE: ").partition(" vs ")
    return "yes" if said == target else "no"


def test_resume_rebuilds_the_judge_model_and_keys_from_their_variables(make_suite, model_server, monkeypatch):
    monkeypatch.setenv("EVALNB_TEST_CANDIDATE_KEY", "sk-cand-111111")
    monkeypatch.setenv("EVALNB_TEST_JUDGE_KEY", "sk-judge-222222")
    suite = make_suite({"t": rows(30)}, t={"grader": {"contract": "model_backed", "source": JUDGE},
                                           "metrics": [{"id": "judged"}]})
    server, judge_server = model_server(latency=0.02), model_server(_judge)
    models = [Model("meh", base_url=server.base_url, api_key_env="EVALNB_TEST_CANDIDATE_KEY")]
    judge = Model("judge-1", base_url=judge_server.base_url, api_key_env="EVALNB_TEST_JUDGE_KEY")

    stopped = _cancel_after(lambda: evalnb.arun(suite, models, judge_model=judge, concurrency=2, progress=False),
                            server, 10)
    assert stopped.status == "cancelled"

    resumed = evalnb.resume(stopped.run_id, progress=False)

    assert resumed.status == "completed"
    assert (resumed.samples.status == "completed").all() and len(resumed.samples) == 30
    assert resumed.metrics.set_index("metric").loc["judged", "mean"] == pytest.approx(0.8)
    assert all(r.headers["authorization"] == "Bearer sk-cand-111111" for r in server.requests)
    assert all(r.headers["authorization"] == "Bearer sk-judge-222222" for r in judge_server.requests)
    assert all(r.body["model"] == "judge-1" for r in judge_server.requests)


BATCH = """
def grade_batch(samples):
    hits = [s["extracted_output"] == s["item"]["target"] for s in samples]
    return {"metrics": {"batch_acc": sum(hits) / len(hits), "seen": len(samples)}}
"""


def test_resume_runs_a_batch_grader_over_every_sample(make_suite, model_server):
    suite = make_suite({"t": rows(30)}, t={"grader": {"contract": "batch", "source": BATCH}})
    server = model_server(latency=0.02)
    models = [Model("meh", base_url=server.base_url)]

    stopped = _cancel_after(lambda: evalnb.arun(suite, models, concurrency=2, progress=False), server, 10)
    assert stopped.status == "cancelled"
    assert "batch_acc" not in set(stopped.metrics.metric)  # never graded: the task did not finish

    resumed = evalnb.resume(stopped.run_id, progress=False)

    m = resumed.metrics.set_index("metric")
    assert m.loc["seen", "mean"] == 30
    assert m.loc["batch_acc", "mean"] == pytest.approx(0.8)
    assert server.request_count <= 30 + 2  # at most the calls in flight at the cancel are repeated


def test_resume_clears_a_task_error_that_went_away(make_suite, model_server, tmp_path):
    suite = make_suite({"a": rows(4), "b": rows(4, tag="b")})
    data_b = tmp_path / "data" / "b.jsonl"
    saved = data_b.read_text()
    data_b.unlink()  # task b cannot load its rows (think: a download that failed)
    server = model_server()
    models = [Model("meh", base_url=server.base_url)]

    failed = run_unchecked(suite, models)  # evalnb.run would refuse to start (tests/runner/test_run_refused.py)
    assert failed.status == "failed" and "b.jsonl" in failed.run["error"]
    assert failed.metrics.set_index("task_id").loc["b", "error"]

    data_b.write_text(saved)
    resumed = evalnb.resume(failed.run_id, progress=False)

    assert resumed.status == "completed" and resumed.run["error"] is None
    assert resumed.metrics.error.isna().all()
    assert sorted(resumed.metrics.task_id) == ["a", "b"]
    assert server.request_count == 8  # task a's four were not asked again


def test_resume_of_a_completed_run_sends_nothing(make_suite, model_server):
    suite = make_suite({"t": rows(4)})
    server = model_server()
    done = evalnb.run(suite, [Model("meh", base_url=server.base_url)], progress=False)

    again = evalnb.resume(done.run_id, progress=False)

    assert again.run_id == done.run_id and again.status == "completed"
    assert server.request_count == 4
    assert again.metrics.equals(done.metrics)


def test_resume_of_an_unknown_run_is_a_clear_error():
    with pytest.raises(KeyError, match="unknown run"):
        evalnb.resume("eval_run_" + "0" * 32, progress=False)


def test_continuing_after_the_data_changed_redoes_the_changed_items(make_suite, model_server):
    """Same manifest, edited rows: a continued run must not keep samples of the old rows."""
    server = model_server(latency=0.02)
    models = [Model("meh", base_url=server.base_url)]
    suite = make_suite({"t": rows(30)})
    stopped = _cancel_after(lambda: evalnb.arun(suite, models, concurrency=2, progress=False), server, 12)
    kept = stopped.samples
    assert stopped.status == "cancelled" and {0, 1, 2} <= set(kept.sample_index)
    server.latency = 0.0

    data = rows(30)
    for i in (0, 1, 2):
        data[i] = {"q": f"ITEM-{i} (edited): what number?", "a": f"{i}"}
    data[3] = {**data[3], "a": "three"}  # a new target alone: graded again, no call needed
    continued = evalnb.run(make_suite({"t": data}), models, concurrency=2, progress=False)

    assert continued.run_id == stopped.run_id and continued.status == "completed"
    s = continued.samples.set_index("sample_index")
    assert [s.loc[i, "prompt"] for i in range(30)] == [r["q"] for r in data]
    assert [s.loc[i, "target"] for i in range(30)] == [r["a"] for r in data]
    assert s.loc[3, "score"] == 0.0  # "3" is no longer the target
    edited = [r for r in server.requests if "(edited)" in r.body["input"]]
    assert len(edited) == 3


# ---- resume keeps the run's own options ------------------------------------------------------


def test_resume_of_a_reuse_false_run_sends_the_rest_fresh(make_suite, model_server):
    """A sampling run (reuse=False) must not be answered from the cache when it is resumed."""
    suite = make_suite({"t": rows(30)})
    server = model_server(latency=0.02)
    models = [Model("meh", base_url=server.base_url)]
    evalnb.run(suite, models, concurrency=2, progress=False)  # every answer is in the cache now
    assert server.request_count == 30

    stopped = _cancel_after(lambda: evalnb.arun(suite, models, concurrency=2, reuse=False, progress=False),
                            server, 30 + 10)
    assert stopped.status == "cancelled"
    finished = set(stopped.samples.prompt[stopped.samples.status == "completed"])
    before = server.request_count
    asked = {r.body["input"] for r in server.requests[30:before]}  # by the reuse=False run itself

    resumed = evalnb.resume(stopped.run_id, progress=False)

    assert resumed.status == "completed" and len(resumed.samples) == 30
    sent = [r.body["input"] for r in server.requests[before:]]
    everything = set(resumed.samples.prompt)
    assert everything - asked <= set(sent)  # never asked by this run: asked now, not read from the cache
    assert not finished & set(sent)  # its own finished samples are kept
    assert len(sent) == len(set(sent))
    assert resumed.run["summary"]["options"]["reuse"] is False


NETWORK_GRADER = """
import os, socket

def grade(sample, item):
    try:
        socket.create_connection(("127.0.0.1", int(item["port"])), timeout=2).close()
        net = 1
    except OSError:
        net = 0
    return {"scores": {"net": net}, "judge": {"worker": os.getcwd()}}
"""


def test_resume_keeps_the_network_opt_in_grader_concurrency_and_epochs(make_suite, model_server):
    server = model_server(latency=0.02)
    port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
    data = [{**r, "port": port} for r in rows(20)]
    suite = make_suite({"t": data}, t={"grader": {"source": NETWORK_GRADER}, "metrics": [{"id": "net"}]})
    models = [Model("meh", base_url=server.base_url)]

    stopped = _cancel_after(lambda: evalnb.arun(suite, models, concurrency=2, progress=False, allow_network=["t"],
                                                grader_concurrency=1, epochs=2, metadata={"why": "test"}),
                            server, 12)
    assert stopped.status == "cancelled"
    options = stopped.run["summary"]["options"]
    assert options["allow_network"] == ["t"] and options["grader_concurrency"] == 1 and options["epochs"] == 2
    before = stopped.samples
    done = set(zip(before.sample_index[before.status == "completed"], before.epoch[before.status == "completed"]))
    assert len(done) < 40

    resumed = evalnb.resume(stopped.run_id, progress=False)

    s = resumed.samples
    assert resumed.status == "completed" and len(s) == 40
    assert (s.net == 1).all()  # graded after the resume too: the task kept its network
    resumed_part = s[[(i, e) not in done for i, e in zip(s.sample_index, s.epoch)]]
    assert len(resumed_part) == 40 - len(done)
    assert resumed_part.judge.map(lambda j: j["worker"]).nunique() == 1  # one sandbox worker
    assert resumed.run["metadata"] == {"why": "test"}


def test_without_the_opt_in_a_grader_has_no_network(make_suite, model_server):
    server = model_server()
    port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
    suite = make_suite({"t": [{**r, "port": port} for r in rows(3)]},
                       t={"grader": {"source": NETWORK_GRADER}, "metrics": [{"id": "net"}]})
    result = evalnb.run(suite, [Model("meh", base_url=server.base_url)], progress=False)
    assert list(result.samples.net) == [0, 0, 0]


# ---- taking over a run whose owner is gone ---------------------------------------------------


def _orphan(make_suite, model_server, *, host: str, pid: int, token: str = "", age_s: int = 0):
    """A cancelled-looking run rewritten as still owned by process `pid` on `host`."""
    suite = make_suite({"t": rows(20)})
    server = model_server(latency=0.02)
    stopped = _cancel_after(lambda: evalnb.arun(suite, [Model("meh", base_url=server.base_url)], concurrency=2,
                                                progress=False), server, 8)
    store = Store()
    with store._transaction() as conn:  # what a process on another machine left behind
        conn.execute("UPDATE runs SET status = 'in_progress', owner_pid = ?, owner_host = ?, owner_token = ?, "
                     "updated_at = ? WHERE run_id = ?", (pid, host, token, int(time.time()) - age_s, stopped.run_id))
    return stopped.run_id, server


def test_a_run_owned_on_another_host_is_taken_over_with_force(make_suite, model_server):
    run_id, server = _orphan(make_suite, model_server, host="container-gone-7f3a", pid=4242)
    with pytest.raises(EvalnbError, match=r"host 'container-gone-7f3a'.*force=True"):
        evalnb.resume(run_id, progress=False)

    resumed = evalnb.resume(run_id, progress=False, force=True)

    assert resumed.status == "completed" and len(resumed.samples) == 20
    (owner,) = Store()._rows("SELECT owner_pid FROM runs WHERE run_id = ?", (run_id,))
    assert owner == (os.getpid(),)  # this process took it over


def test_a_run_on_another_host_with_a_stale_heartbeat_is_resumable_without_force(make_suite, model_server):
    run_id, _ = _orphan(make_suite, model_server, host="container-gone-7f3a", pid=4242, age_s=600)
    assert evalnb.resume(run_id, progress=False).status == "completed"


def test_force_does_not_take_a_run_from_a_live_process_on_this_machine(make_suite, model_server):
    import socket

    from evalnb.store._owner import process_token

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run_id, _ = _orphan(make_suite, model_server, host=socket.gethostname(), pid=sleeper.pid,
                            token=_wait_for(lambda: process_token(sleeper.pid), what="the sleeper's start time"))
        with pytest.raises(EvalnbError, match="still running"):
            evalnb.resume(run_id, progress=False, force=True)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert evalnb.resume(run_id, progress=False).status == "completed"  # its owner is gone now


def test_the_cli_resumes_with_force(make_suite, model_server, evalnb_home):
    from evalnb.cli import main

    run_id, _ = _orphan(make_suite, model_server, host="container-gone-7f3a", pid=4242)
    assert main(["resume", run_id, "--no-progress"]) == 1
    assert main(["resume", run_id, "--force", "--no-progress"]) == 0
    assert Store().get_run(run_id)["status"] == "completed"


def test_a_running_run_writes_a_heartbeat(make_suite, model_server, monkeypatch):
    from evalnb.runner import engine

    monkeypatch.setattr(engine, "HEARTBEAT_S", 0.1)
    suite = make_suite({"t": rows(25)})  # 2.5 s at one call at a time: updated_at (1 s steps) must move
    server = model_server(latency=0.1)
    store = Store()
    beats = []

    async def main():
        task = asyncio.ensure_future(evalnb.arun(suite, [Model("meh", base_url=server.base_url)], concurrency=1,
                                                 progress=False, store=store))
        while not task.done():
            runs = store.list_runs()
            if len(runs):
                beats.append(store.get_run(runs.run_id[0])["updated_at"])
            await asyncio.sleep(0.3)
        return await task

    result = asyncio.run(main())
    assert result.status == "completed"
    assert len(set(beats)) >= 2  # updated_at moved while the run was going (1 s resolution)
