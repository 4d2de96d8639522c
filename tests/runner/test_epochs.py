"""Epochs: every item asked K times, each ask its own request, counted by a real local server.

The server's "sampled" model answers the n-th ask of a prompt with ``<item> #n`` when n is
even and ``wrong #n`` when n is odd, so every request gets a different reply, a reply from
the cache is recognisable, and an item's mean over K epochs is known (ceil(K/2) / K).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter

import pytest

import evalnb
from evalnb import Model
from helpers.runner_kit import item_number, rows

pytestmark = pytest.mark.usefixtures("evalnb_home")

N = 6
GRADER = ("def grade(sample, item):\n"
          "    return sample['output_text'].split(' #')[0] == item['target']\n")


class Sampled:
    """A responder that counts how often it was asked each (model, prompt)."""

    def __init__(self) -> None:
        self.asks: Counter[tuple[str, str]] = Counter()

    def __call__(self, body: dict) -> str:
        key = (body["model"], body["input"])
        n = self.asks[key]
        self.asks[key] += 1
        return f"{item_number(body['input'])} #{n}" if n % 2 == 0 else f"wrong #{n}"


@pytest.fixture
def sampled(model_server):
    responder = Sampled()
    return model_server(responder), responder


def _suite(make_suite, n=N):
    return make_suite({"t": rows(n)}, t={"grader": {"source": GRADER, "metric_id": "ok"}, "metrics": [{"id": "ok"}]})


def test_each_epoch_is_its_own_request_and_sample(make_suite, sampled):
    server, responder = sampled
    result = evalnb.run(_suite(make_suite), [Model("m", base_url=server.base_url)], epochs=3, progress=False)
    assert result.status == "completed"
    assert server.request_count == 3 * N
    assert set(responder.asks.values()) == {3}  # every prompt asked three times
    s = result.samples
    assert len(s) == 3 * N and sorted(Counter(s["epoch"]).items()) == [(0, N), (1, N), (2, N)]
    # every (item, epoch) got a reply of its own: ask numbers 0, 1, 2 spread over the epochs
    asks = s.groupby("sample_index")["output_text"].apply(lambda t: sorted(x.split("#")[1] for x in t))
    assert all(a == ["0", "1", "2"] for a in asks)


def test_a_rerun_with_the_same_epochs_sends_nothing(make_suite, sampled):
    server, _ = sampled
    suite, models = _suite(make_suite), [Model("m", base_url=server.base_url)]
    first = evalnb.run(suite, models, epochs=4, progress=False)
    sent = server.request_count
    second = evalnb.run(suite, models, epochs=4, progress=False)
    assert sent == 4 * N and server.request_count == sent
    keys = ["sample_index", "epoch"]
    assert second.samples.set_index(keys)["output_text"].equals(first.samples.set_index(keys)["output_text"])


def test_raising_epochs_sends_only_the_new_ones(make_suite, sampled):
    server, _ = sampled
    suite, models = _suite(make_suite), [Model("m", base_url=server.base_url)]
    three = evalnb.run(suite, models, epochs=3, progress=False)
    server.reset()
    five = evalnb.run(suite, models, epochs=5, progress=False)
    assert server.request_count == 2 * N  # epochs 3 and 4 only
    old = three.samples.set_index(["sample_index", "epoch"])["response_id"]
    new = five.samples.set_index(["sample_index", "epoch"])["response_id"]
    assert new.loc[old.index].equals(old)  # epochs 0-2: the stored replies, not new ones
    assert five.status == "completed" and len(five.samples) == 5 * N


def test_epoch_1_is_never_answered_from_epoch_0s_cache(make_suite, sampled):
    server, responder = sampled
    suite, models = _suite(make_suite), [Model("m", base_url=server.base_url)]
    one = evalnb.run(suite, models, progress=False)  # epochs=1: the request keys of every run so far
    assert server.request_count == N
    two = evalnb.run(suite, models, epochs=2, progress=False)
    assert server.request_count == 2 * N  # every epoch-1 request went to the server
    s = two.samples
    first, second = (s[s.epoch == e].set_index("sample_index")["output_text"] for e in (0, 1))
    assert first.equals(one.samples.set_index("sample_index")["output_text"])
    assert (second.str.endswith("#1")).all() and not (first == second).any()


def test_epochs_with_reuse_off_sends_every_epoch_again(make_suite, sampled):
    server, _ = sampled
    suite, models = _suite(make_suite), [Model("m", base_url=server.base_url)]
    evalnb.run(suite, models, epochs=2, progress=False)
    evalnb.run(suite, models, epochs=2, progress=False, reuse=False)
    assert server.request_count == 4 * N


def test_metrics_average_each_item_over_its_epochs(make_suite, sampled):
    server, _ = sampled
    result = evalnb.run(_suite(make_suite), [Model("m", base_url=server.base_url)], epochs=3, progress=False)
    row = result.metrics.iloc[0]
    # asks 0 and 2 are right, ask 1 wrong: every item scores 2/3; n counts items, not samples
    assert (row["n"], row["epochs"]) == (N, 3)
    assert row["mean"] == pytest.approx(2 / 3)
    assert row["stderr"] == pytest.approx(0.0)


def test_resume_keeps_the_runs_epochs(make_suite, model_server):
    responder = Sampled()
    server = model_server(responder, latency=0.02)
    suite, models = make_suite({"t": rows(20)}, t={"grader": {"source": GRADER}}), [Model("m", base_url=server.base_url)]

    async def cancel_after(requests: int):
        task = asyncio.ensure_future(evalnb.arun(suite, models, epochs=3, concurrency=2, progress=False))
        while server.request_count < requests and not task.done():
            await asyncio.sleep(0.005)
        task.cancel()
        return await task

    stopped = asyncio.run(cancel_after(15))
    assert stopped.status == "cancelled" and len(stopped.samples) < 60
    server.latency = 0.0
    done = evalnb.resume(stopped.run_id, progress=False)
    assert done.run_id == stopped.run_id and done.status == "completed"
    assert done.run["epochs"] == 3
    assert len(done.samples) == 60 and sorted(set(done.samples.epoch)) == [0, 1, 2]
    # every (item, epoch) asked; again only what was in flight (2 calls) when the run was cancelled
    assert min(responder.asks.values()) == 3 and sum(responder.asks.values()) <= 60 + 2


@pytest.mark.parametrize("epochs", [0, 101, 2.0, True, "3"])
def test_bad_epochs_are_refused_before_anything_runs(make_suite, sampled, epochs):
    server, _ = sampled
    with pytest.raises(ValueError, match="epochs must be an integer from 1 to 100"):
        evalnb.run(_suite(make_suite), [Model("m", base_url=server.base_url)], epochs=epochs, progress=False)
    assert server.request_count == 0


def test_cli_run_takes_epochs(make_suite, sampled, tmp_path, evalnb_home):
    server, _ = sampled
    suite = _suite(make_suite)
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(suite.to_dict()), encoding="utf-8")
    manifest = json.loads(path.read_text())
    for task in manifest["tasks"]:
        task["dataset"]["path"] = "data/t.jsonl"  # relative: a manifest file's paths stay in its folder
    path.write_text(json.dumps(manifest), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "evalnb", "run", str(path), "--model", f"m@{server.base_url}",
                          "--epochs", "2", "--no-progress"], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "EVALNB_HOME": str(evalnb_home)})
    assert out.returncode == 0, out.stderr
    assert server.request_count == 2 * N
    assert "epochs: 2 (n counts items" in out.stdout
    run_id = out.stdout.split("run_id: ")[1].split()[0]
    assert evalnb.load_run(run_id).run["epochs"] == 2
