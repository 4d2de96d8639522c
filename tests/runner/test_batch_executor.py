"""executor="batch": a run through the provider's Batch API (LocalModelServer's), on 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import evalnb
from evalnb import BatchExecutor, Model
from evalnb.store import Store
from evalnb.testing import BatchFault, Fault
from helpers.runner_kit import manifest, rows, wait_for

pytestmark = pytest.mark.usefixtures("evalnb_home")

N_ITEMS = 20
GEN = {"max_retries": 0, "temperature": 0}
COMPARED = ["task_id", "model", "sample_index", "epoch", "status", "prompt", "target", "output_text",
            "extracted_output", "score", "input_tokens", "output_tokens"]
STATS = ["task_id", "model", "metric", "n", "n_failed", "mean", "stderr", "ci_low", "ci_high"]
FAST = dict(poll_interval=0.05)


def _suite(tmp_path: Path, n: int = N_ITEMS) -> Path:
    folder = tmp_path / "data"
    path = folder / "suite.json"
    path.write_text(json.dumps(manifest(folder, {"t": rows(n), "u": rows(n // 2, tag="u")})), encoding="utf-8")
    return path


def _models(url: str, **price) -> list[Model]:
    return [Model("good", base_url=url, **price), Model("meh", base_url=url, api="chat", **price)]


def _batch_lines(server) -> int:
    return sum(b["request_counts"]["total"] for b in server.batches.values())


def test_a_batch_run_equals_a_live_run(tmp_path, model_server):
    server = model_server()
    suite = evalnb.Suite.from_file(_suite(tmp_path))
    live = evalnb.run(suite, _models(server.base_url), generation=GEN, progress=False,
                      store=Store(tmp_path / "live.sqlite"))
    live_calls = server.request_count
    batched = evalnb.run(suite, _models(server.base_url), generation=GEN, progress=False,
                         executor=BatchExecutor(**FAST), store=Store(tmp_path / "batch.sqlite"))
    assert batched.status == "completed"
    assert server.calls("/v1/responses") + server.calls("/v1/chat/completions") == live_calls  # only the live run's
    assert server.uploads == 2 and len(server.batches) == 2  # one batch per model
    assert server.batched_requests == live_calls == 2 * (N_ITEMS + N_ITEMS // 2)
    assert batched.samples[COMPARED].equals(live.samples[COMPARED])
    assert batched.metrics[STATS].equals(live.metrics[STATS])
    # each batch's requests are the live run's request bodies, byte for byte
    sent = {json.dumps(r.body, sort_keys=True) for r in server.requests if r.path in ("/v1/responses",
                                                                                     "/v1/chat/completions")}
    batch_bodies = set()
    for b in server.batches.values():
        data = server.batches_book.files[b["input_file_id"]].content
        batch_bodies |= {json.dumps(json.loads(x)["body"], sort_keys=True) for x in data.splitlines()}
    assert batch_bodies == sent
    stored = Store(tmp_path / "batch.sqlite").executor_state(batched.run_id, "batch")
    records = [v for k, v in stored.items() if k.startswith("batch:")]
    assert {b["id"] for b in records} == set(server.batches) and all(b["done"] for b in records)
    assert batched.run["summary"]["options"]["executor"]["type"] == "batch"


def test_the_string_form_and_the_environment_default(tmp_path, model_server, monkeypatch):
    monkeypatch.setenv("EVALNB_BATCH_POLL_S", "0.07")
    assert BatchExecutor().poll_interval == 0.07
    server = model_server()
    suite = evalnb.Suite.from_file(_suite(tmp_path, 4))
    result = evalnb.run(suite, _models(server.base_url)[:1], generation=GEN, progress=False, executor="batch")
    assert result.status == "completed" and server.uploads == 1
    assert result.run["summary"]["options"]["executor"] == "batch"
    monkeypatch.setenv("EVALNB_BATCH_POLL_S", "soon")
    with pytest.raises(ValueError, match="EVALNB_BATCH_POLL_S"):
        BatchExecutor()
    for bad in (dict(poll_interval=0), dict(retry_failed="never"), dict(max_requests_per_batch=0)):
        with pytest.raises(ValueError, match="BatchExecutor"):
            BatchExecutor(**{"poll_interval": 1, **bad})


def test_split_at_a_small_limit(tmp_path, model_server):
    server = model_server()
    suite = evalnb.Suite.from_file(_suite(tmp_path))
    result = evalnb.run(suite, _models(server.base_url)[:1], generation=GEN, progress=False,
                        executor=BatchExecutor(max_requests_per_batch=7, **FAST))
    assert result.status == "completed" and len(result.samples) == N_ITEMS + N_ITEMS // 2
    sizes = sorted(b["request_counts"]["total"] for b in server.batches.values())
    assert max(sizes) <= 7 and sum(sizes) == N_ITEMS + N_ITEMS // 2 and len(sizes) >= 5
    # and by bytes: a file limit of ~3 lines
    server2 = model_server()
    line = 200
    result = evalnb.run(suite, _models(server2.base_url)[:1], generation=GEN, progress=False,
                        executor=BatchExecutor(max_bytes_per_file=3 * line, **FAST), store=Store(tmp_path / "b.sqlite"))
    assert result.status == "completed"
    for b in server2.batches.values():
        assert server2.batches_book.files[b["input_file_id"]].info["bytes"] <= 3 * line


def test_partial_failures_are_retried_and_only_those(tmp_path, model_server):
    faults = [Fault(status=500, match="ITEM-3:", times=1), Fault(status=400, match="ITEM-5:")]
    server = model_server(faults=faults)
    suite = evalnb.Suite.from_file(_suite(tmp_path))
    result = evalnb.run(suite, _models(server.base_url)[:1], generation=GEN, progress=False,
                        executor=BatchExecutor(**FAST), task_ids=["t"])
    sizes = [b["request_counts"]["total"] for b in server.batches.values()]
    assert sizes == [N_ITEMS, 1]  # the follow-up batch holds the one retryable failure
    samples = result.samples.set_index("sample_index")
    assert samples.loc[3, "status"] == "completed" and samples.loc[3, "output_text"] == "3"
    assert samples.loc[5, "status"] == "failed"  # a 400 is the request's own fault: not retried
    assert "HTTP 400: injected fault" in samples.loc[5, "error"]
    assert (samples["status"] == "completed").sum() == N_ITEMS - 1


def test_expired_requests_retried_live_when_asked(tmp_path, model_server):
    server = model_server(batch_faults=[BatchFault(expire_after=4, times=1)])
    suite = evalnb.Suite.from_file(_suite(tmp_path))
    result = evalnb.run(suite, _models(server.base_url)[:1], generation=GEN, progress=False, task_ids=["t"],
                        executor=BatchExecutor(retry_failed="live", **FAST))
    assert result.status == "completed" and (result.samples["status"] == "completed").all()
    assert len(server.batches) == 1 and server.batched_requests == 4
    assert server.calls("/v1/responses") == N_ITEMS - 4  # the expired ones, as live calls


def test_a_batch_failing_as_a_whole_fails_its_samples_with_the_providers_message(tmp_path, model_server):
    server = model_server(batch_faults=[BatchFault(fail="Enqueued token limit reached for good")])
    suite = evalnb.Suite.from_file(_suite(tmp_path))
    result = evalnb.run(suite, _models(server.base_url)[:1], generation=GEN, progress=False, task_ids=["t"],
                        executor=BatchExecutor(**FAST))
    assert (result.samples["status"] == "failed").all() and len(result.samples) == N_ITEMS
    messages = set(result.samples["error"])
    assert len(messages) == 1 and "Enqueued token limit reached for good" in messages.pop()


def test_costs_at_the_batch_price(tmp_path, model_server):
    usage = {"input_tokens": 1000, "output_tokens": 100}
    server = model_server(usage=usage)
    suite = evalnb.Suite.from_file(_suite(tmp_path))
    price = {"input": 2.0, "output": 8.0, "batch_discount": 0.5}
    result = evalnb.run(suite, [Model("good", base_url=server.base_url, price=price)], generation=GEN,
                        progress=False, task_ids=["t"], executor=BatchExecutor(**FAST))
    per_call = (1000 * 2.0 + 100 * 8.0) / 1e6 * 0.5
    assert result.samples["cost_usd"].tolist() == pytest.approx([per_call] * N_ITEMS)
    explicit = {"input": 2.0, "output": 8.0, "batch_input": 1.5, "batch_output": 3.0}
    again = evalnb.run(suite, [Model("good", base_url=server.base_url, price=explicit)], generation=GEN,
                       progress=False, task_ids=["t"], executor=BatchExecutor(**FAST), reuse=False,
                       store=Store(tmp_path / "explicit.sqlite"))
    assert again.samples["cost_usd"].tolist() == pytest.approx([(1000 * 1.5 + 100 * 3.0) / 1e6] * N_ITEMS)


def test_an_answer_stored_before_a_crash_keeps_its_batch_price_on_resume(tmp_path, model_server):
    # What a crash between caching the batch's answers and storing their samples leaves: the
    # answers in the output cache (received by this run), no samples. The resume answers them
    # from the cache and charges each sample what its call cost then: the batch price.
    import sqlite3

    usage = {"input_tokens": 1000, "output_tokens": 100}
    server = model_server(usage=usage)
    suite = evalnb.Suite.from_file(_suite(tmp_path))
    price = {"input": 2.0, "output": 8.0, "batch_discount": 0.5}
    store_path = tmp_path / "crash.sqlite"
    first = evalnb.run(suite, [Model("good", base_url=server.base_url, price=price)], generation=GEN,
                       progress=False, task_ids=["t"], executor=BatchExecutor(**FAST), store=Store(store_path))
    per_call = (1000 * 2.0 + 100 * 8.0) / 1e6 * 0.5
    assert first.samples["cost_usd"].tolist() == pytest.approx([per_call] * N_ITEMS)
    with sqlite3.connect(store_path) as conn:  # the samples never reached the store; the answers did
        conn.execute("DELETE FROM samples WHERE run_id = ?", (first.run_id,))
        conn.execute("UPDATE runs SET status = 'in_progress' WHERE run_id = ?", (first.run_id,))
        kept = conn.execute("SELECT cost_usd FROM outputs WHERE run_id = ?", (first.run_id,)).fetchall()
    assert sorted(c for (c,) in kept) == pytest.approx([per_call] * N_ITEMS)  # the cache keeps what was paid
    batches = len(server.batches)
    resumed = evalnb.resume(first.run_id, store=Store(store_path), progress=False)
    assert resumed.status == "completed" and len(server.batches) == batches  # answered from the cache
    assert resumed.samples["cost_usd"].tolist() == pytest.approx([per_call] * N_ITEMS)  # not the live 0.0028
    assert not resumed.samples["cached"].any()  # paid by this run, not reused from another


@pytest.mark.parametrize("retry_failed", ["batch", "live"])
def test_empty_answers_are_asked_again_up_to_max_empty_retries(tmp_path, model_server, retry_failed):
    # every prompt's first answer is empty: with max_empty_retries=1 each is asked once more (in
    # a follow-up batch, or live) and the second answer is kept, as a live run keeps it
    from helpers.runner_kit import responder

    asked: dict[str, int] = {}

    def first_empty(body: dict) -> str:
        key = json.dumps(body.get("input") or body.get("messages"), sort_keys=True)
        asked[key] = asked.get(key, 0) + 1
        return "" if asked[key] == 1 else responder(body)

    server = model_server(first_empty)
    suite = evalnb.Suite.from_file(_suite(tmp_path))
    models = [Model("good", base_url=server.base_url)]
    result = evalnb.run(suite, models, generation={**GEN, "max_empty_retries": 1}, progress=False, task_ids=["t"],
                        executor=BatchExecutor(retry_failed=retry_failed, **FAST))
    assert result.status == "completed"
    assert set(asked.values()) == {2} and len(asked) == N_ITEMS
    if retry_failed == "batch":
        assert server.batched_requests == 2 * N_ITEMS and len(server.batches) == 2
    else:
        assert server.batched_requests == N_ITEMS and server.calls("/v1/responses") == N_ITEMS
    assert (result.samples["output_text"] != "").all()
    live = evalnb.run(suite, models, generation={**GEN, "max_empty_retries": 1}, progress=False, task_ids=["t"],
                      store=Store(tmp_path / "live.sqlite"))
    assert result.samples[COMPARED].equals(live.samples[COMPARED])
    asked.clear()
    kept = evalnb.run(suite, models, generation=GEN, progress=False, task_ids=["t"], reuse=False,
                      executor=BatchExecutor(**FAST), store=Store(tmp_path / "none.sqlite"))
    assert (kept.samples["output_text"] == "").all() and set(asked.values()) == {1}  # 0 retries: kept empty


def test_a_completions_model_runs_in_batches_as_it_runs_live(tmp_path, model_server):
    # Model(api="completions") sends /v1/completions lines and reads their text (it was a KeyError)
    from helpers.runner_kit import planted_answer

    server = model_server(lambda body: planted_answer(str(body.get("model", "")), str(body.get("prompt", ""))))
    suite = evalnb.Suite.from_file(_suite(tmp_path))
    models = [Model("good", base_url=server.base_url, api="completions")]
    live = evalnb.run(suite, models, generation=GEN, progress=False, store=Store(tmp_path / "live.sqlite"))
    batched = evalnb.run(suite, models, generation=GEN, progress=False, executor=BatchExecutor(**FAST),
                         store=Store(tmp_path / "batch.sqlite"))
    assert batched.status == live.status == "completed"
    assert server.calls("/v1/completions") == N_ITEMS + N_ITEMS // 2  # the live run's only
    assert server.batched_requests == N_ITEMS + N_ITEMS // 2
    lines = [json.loads(x) for b in server.batches.values()
             for x in server.batches_book.files[b["input_file_id"]].content.splitlines()]
    assert {line["url"] for line in lines} == {"/v1/completions"}
    assert batched.samples[COMPARED].equals(live.samples[COMPARED])
    assert live.metrics[STATS].equals(batched.metrics[STATS]) and live.metrics["mean"].gt(0).all()


def test_a_budget_counts_batch_prices(tmp_path, model_server):
    usage = {"input_tokens": 10, "output_tokens": 10}
    server = model_server(usage=usage)
    suite = evalnb.Suite.from_file(_suite(tmp_path))
    # worst case of one call: ~6 input tokens at 1 $/M + 10 output at 1 $/M = 16e-6 live, 8e-6 at the batch price
    price = {"input": 1.0, "output": 1.0, "batch_discount": 0.5}
    result = evalnb.run(suite, [Model("good", base_url=server.base_url, price=price)], progress=False,
                        generation={**GEN, "max_output_tokens": 10}, task_ids=["t"],
                        executor=BatchExecutor(**FAST), max_cost_usd=10 * 9e-6)
    assert result.status == "stopped"
    assert 9 <= len(result.samples) <= 11 and server.batched_requests == len(result.samples)
    assert result.run["error"].startswith("stopped by the budget")


# ---- interruptions ------------------------------------------------------------------------
CHILD = """
import sys
import evalnb
from evalnb import Model

suite = evalnb.Suite.from_file(sys.argv[1])
url = sys.argv[2]
models = [Model("good", base_url=url), Model("meh", base_url=url, api="chat")]
evalnb.run(suite, models, generation={generation}, progress=False,
           executor=evalnb.BatchExecutor(poll_interval=0.05, max_requests_per_batch=12))
print("the child finished its run: the test was too slow to kill it", flush=True)
"""


def _wait_for(predicate, timeout: float = 60.0, what: str = "condition"):
    return wait_for(predicate, timeout, what)


def _stored(store, run_id):
    return [v for k, v in store.executor_state(run_id, "batch").items() if k.startswith("batch:")]


def _kill_while_batches_run(tmp_path, server):
    suite_path = _suite(tmp_path)
    store = Store()
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(generation=repr(GEN)), str(suite_path),
                              server.base_url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ))
    try:
        run_id = _wait_for(lambda: next(iter(store.list_runs().run_id), None), what="the child's run")
        total = 2 * (N_ITEMS + N_ITEMS // 2)
        _wait_for(lambda: sum(b["requests"] for b in _stored(store, run_id)) == total, what="every batch stored")
        time.sleep(0.2)  # the child polls a few times
    finally:
        os.kill(child.pid, signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL, out.decode(errors="replace")
    assert store.get_run(run_id)["status"] == "in_progress"
    assert store.sample_counts(run_id)["total"] == 0  # nothing was answered yet
    assert all(b["status"] in ("validating", "in_progress") for b in server.batches.values())
    return suite_path, run_id, store


@pytest.mark.parametrize("how", ["resume", "run_again"])
def test_killed_while_batches_run_then_resume_uploads_nothing_new(tmp_path, model_server, how):
    server = model_server(batch_delay=1.5)
    suite_path, run_id, store = _kill_while_batches_run(tmp_path, server)
    uploads, created = server.uploads, len(server.batches)
    assert uploads == created == 6  # 30 requests per model, 12 a batch
    if how == "resume":
        result = evalnb.resume(run_id, progress=False)
    else:
        result = evalnb.run(evalnb.Suite.from_file(suite_path), _models(server.base_url), generation=GEN,
                            progress=False, executor=evalnb.BatchExecutor(poll_interval=0.05,
                                                                          max_requests_per_batch=12))
    assert result.run_id == run_id and result.status == "completed"
    assert server.uploads == uploads and len(server.batches) == created  # nothing uploaded again
    assert server.calls("/v1/responses") == server.calls("/v1/chat/completions") == 0  # no live calls
    assert len(result.samples) == 2 * (N_ITEMS + N_ITEMS // 2)
    reference = evalnb.run(evalnb.Suite.from_file(suite_path), _models(server.base_url), generation=GEN,
                           progress=False, store=Store(tmp_path / "reference.sqlite"))
    assert result.samples[COMPARED].equals(reference.samples[COMPARED])
    assert result.metrics[STATS].equals(reference.metrics[STATS])


def test_cancel_stops_the_providers_batches_and_resume_sends_the_rest(tmp_path, model_server):
    server = model_server(batch_delay=30)
    suite_path, run_id, store = _kill_while_batches_run(tmp_path, server)
    statuses = evalnb.cancel(run_id)
    assert len(statuses) == 6 and {s["status"] for s in statuses} == {"cancelling"}
    assert {b["status"] for b in server.batches.values()} == {"cancelling"}
    server.batches_book.delay = 0.0  # what is sent from now on is answered at once
    result = evalnb.resume(run_id, progress=False)
    assert result.status == "completed" and (result.samples["status"] == "completed").all()
    assert {server.batches[s["id"]]["status"] for s in statuses} == {"cancelled"}
    assert len(server.batches) == 2 * 6  # the cancelled requests went out again (nothing was answered)
    assert server.uploads == 2 * 6
    again = evalnb.cancel(run_id)
    assert len(again) == 12 and {s["status"] for s in again} == {"cancelled", "completed"}  # nothing left


def test_a_request_over_the_file_limit_fails_its_sample_alone(tmp_path, model_server):
    server = model_server()
    folder = tmp_path / "data"
    data = rows(4)
    data[2]["q"] = "ITEM-2: " + "long " * 200
    path = folder / "suite.json"
    path.write_text(json.dumps(manifest(folder, {"t": data})), encoding="utf-8")
    result = evalnb.run(evalnb.Suite.from_file(path), _models(server.base_url)[:1], generation=GEN, progress=False,
                        executor=BatchExecutor(max_bytes_per_file=600, **FAST))
    samples = result.samples.set_index("sample_index")
    assert samples.loc[2, "status"] == "failed" and "over the batch file limit of 600 bytes" in samples.loc[2, "error"]
    assert (samples.drop(index=2)["status"] == "completed").all() and server.batched_requests == 3


def test_retries_stop_after_max_retries(tmp_path, model_server):
    server = model_server(faults=[Fault(status=503, match="ITEM-1:")])
    suite = evalnb.Suite.from_file(_suite(tmp_path))
    result = evalnb.run(suite, _models(server.base_url)[:1], generation=GEN, progress=False, task_ids=["t"],
                        executor=BatchExecutor(max_retries=2, **FAST))
    assert [b["request_counts"]["total"] for b in server.batches.values()] == [N_ITEMS, 1, 1]
    failed = result.samples[result.samples["status"] == "failed"]
    assert failed["sample_index"].tolist() == [1] and "HTTP 503" in failed["error"].iloc[0]


def test_the_progress_line_shows_batch_status_and_counts(tmp_path, model_server, capsys):
    server = model_server(batch_delay=0.3)
    suite = evalnb.Suite.from_file(_suite(tmp_path))
    evalnb.run(suite, _models(server.base_url)[:1], generation=GEN, progress="text", task_ids=["t"],
               executor=BatchExecutor(**FAST))
    final = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"good: {N_ITEMS}/{N_ITEMS}, batch 1 completed: {N_ITEMS}/{N_ITEMS} answered" in final


def test_estimate_shows_live_and_batch_costs_side_by_side(tmp_path):
    suite = evalnb.Suite.from_file(_suite(tmp_path))
    models = [Model("a", base_url="http://127.0.0.1:9/v1", price={"input": 2, "output": 8, "batch_discount": 0.5}),
              Model("b", base_url="http://127.0.0.1:9/v1", price={"input": 2, "output": 8})]
    est = evalnb.estimate(suite, models, generation={"max_output_tokens": 10})
    a = est.table[est.table["model"] == "a"]
    b = est.table[est.table["model"] == "b"]
    assert a["max_cost_usd_batch"].sum() == pytest.approx(a["max_cost_usd"].sum() / 2)
    assert b["max_cost_usd_batch"].sum() == pytest.approx(b["max_cost_usd"].sum())  # no batch price: full
    assert est.max_cost_usd_batch == pytest.approx(a["max_cost_usd"].sum() / 2 + b["max_cost_usd"].sum())
    assert f"at most ${est.max_cost_usd:,.4f} live, ${est.max_cost_usd_batch:,.4f} batched" in est.summary()
    assert "max_cost_usd_batch" in est._repr_html_()


def test_interrupted_in_process_then_resumed_uploads_nothing_new(tmp_path, model_server):
    import asyncio

    server = model_server(batch_delay=0.8)
    suite = evalnb.Suite.from_file(_suite(tmp_path))

    async def interrupted():
        task = asyncio.ensure_future(evalnb.arun(suite, _models(server.base_url), generation=GEN, progress=False,
                                                 executor=BatchExecutor(**FAST)))
        while len(server.batches) < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        task.cancel()
        return await task

    partial = asyncio.run(interrupted())
    assert partial.status == "cancelled" and len(partial.samples) == 0
    assert {b["status"] for b in server.batches.values()} == {"in_progress"}  # left running
    result = evalnb.resume(partial.run_id, progress=False)
    assert result.status == "completed" and len(result.samples) == 2 * (N_ITEMS + N_ITEMS // 2)
    assert server.uploads == 2 and len(server.batches) == 2


def test_a_batch_created_but_never_recorded_is_found_again(tmp_path, model_server):
    """Killed between creating a batch and storing its id: the provider's list, filtered by the
    run id every batch carries in its metadata, gives it back."""
    server = model_server(batch_delay=1.0)
    suite_path, run_id, store = _kill_while_batches_run(tmp_path, server)
    for record in sorted(_stored(store, run_id), key=lambda r: r["created_at"])[2:]:
        store.save_executor_state(run_id, "batch", "batch:" + record["id"], None)  # as if never saved
    assert len(_stored(store, run_id)) == 2
    result = evalnb.resume(run_id, progress=False)
    assert result.status == "completed" and len(result.samples) == 2 * (N_ITEMS + N_ITEMS // 2)
    assert server.uploads == 6 and len(server.batches) == 6
    assert {b["id"] for b in _stored(store, run_id)} == set(server.batches)
