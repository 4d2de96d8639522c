"""The executor interface (runner.executors.base) and the typed sample (evalnb.sample).

A third executor is written here against the public interface alone, the way a provider
batch executor would be: it takes each unit's request body from the run, sends it itself
(to a real server on 127.0.0.1), hands back replies and failures, and keeps per-run state
in the store. The run must come out exactly as with the local executor.
"""

from __future__ import annotations

import dataclasses

import httpx
import pytest

import evalnb
from evalnb import Model
from evalnb.runner.executors.base import Executor, RunContext, Unit
from evalnb.runner.executors.local import LocalExecutor
from evalnb.sample import GENERATION_FIELDS, GRADING_FIELDS, ITEM_FIELDS, SAMPLE_FIELDS, STORED_FIELDS, Sample
from evalnb.store import Store
from evalnb.testing import Fault
from helpers.runner_kit import rows

pytestmark = pytest.mark.usefixtures("evalnb_home")


class SendItMyself:
    """Collects units, sends their requests in one go at `drain` (like a batch), hands back."""

    name = "send-it-myself"

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.state_seen: dict | None = None

    async def start(self, ctx: RunContext) -> None:
        self.ctx, self.waiting = ctx, []

    async def submit(self, units: list[Unit]) -> None:
        for unit in units:
            if unit.output is not None:
                self.ctx.answered(unit)
            else:
                self.waiting.append(unit)
        self.ctx.save_state("batch-1", [u.id for u in self.waiting])

    async def drain(self) -> None:
        self.state_seen = self.ctx.load_state()
        async with httpx.AsyncClient() as client:
            for unit in self.waiting:
                req = self.ctx.request(unit)
                self.bodies.append(req.body)
                reply = await client.post(req.model.base_url.rstrip("/") + req.path, json=req.body)
                if reply.status_code != 200:
                    self.ctx.fail(unit, f"HTTP {reply.status_code}", status=reply.status_code)
                    continue
                data = reply.json()
                self.ctx.reply(unit, {"output_text": data["choices"][0]["message"]["content"],
                                      "usage": {"input_tokens": data["usage"]["prompt_tokens"],
                                                "output_tokens": data["usage"]["completion_tokens"]},
                                      "response_id": data.get("id"), "latency_s": 0.01, "reply": data})
        self.ctx.save_state("batch-1", None)

    async def close(self) -> None:
        pass


def test_the_shipped_executors_implement_the_protocol():
    from evalnb.runner.executors.ray_driver import RayExecutor

    assert isinstance(LocalExecutor(), Executor)
    assert isinstance(RayExecutor(), Executor)
    assert isinstance(SendItMyself(), Executor)


def test_an_executor_written_against_the_interface_runs_a_suite(make_suite, model_server):
    n = 40
    suite = make_suite({"qa": rows(n)})
    server = model_server(faults=[Fault(match="ITEM-7:", status=400)])
    model = Model("m", base_url=server.base_url, api="chat")
    mine = SendItMyself()
    result = evalnb.run(suite, [model], executor=mine, progress=False)
    assert server.request_count == n and len(mine.bodies) == n
    # the body the engine would have sent: the model name and the rendered prompt
    assert all(b["model"] == "m" and b["messages"][-1]["content"].startswith("ITEM-") for b in mine.bodies)
    samples = result.samples.set_index("sample_index")
    assert (samples.drop(index=7)["status"] == "completed").all()
    [failed] = [s for s in Store().samples(result.run_id) if s["sample_index"] == 7]
    assert failed["status"] == "failed" and failed["error"]["stage"] == "generation" and failed["error"]["status"] == 400
    # extraction and grading were the engine's: every 5th item is answered wrong by model "m"
    scores = samples.drop(index=7)["score"]
    assert scores.sum() == sum(1 for i in range(n) if i != 7 and i % 5 != 4)
    assert samples.loc[0, "output_tokens"] >= 1 and not samples.loc[0, "cached"]
    # its per-run state was in the store while it waited, and is gone once handed back
    assert sorted(mine.state_seen["batch-1"]) == sorted(f"qa/m/{i}/0" for i in range(n))
    assert Store().executor_state(result.run_id, "send-it-myself") == {}
    # a second run answers from the output cache: handed back with ctx.answered, no request
    server.reset()
    again = SendItMyself()
    evalnb.run(suite, [model], executor=again, progress=False, reuse=True)
    assert server.request_count == 1 and len(again.bodies) == 1  # only the failed item is asked again


def test_executor_state_survives_the_process(evalnb_home):
    store = Store()
    store.save_suite("v1", {"tasks": []})
    run_id = store.create_run("v1", models=[{"name": "m", "base_url": "http://127.0.0.1:9/v1"}], generation={})
    store.save_executor_state(run_id, "batch", "b-1", {"ids": [1, 2], "submitted": True})
    store.save_executor_state(run_id, "other", "b-1", 1)
    assert Store().executor_state(run_id, "batch") == {"b-1": {"ids": [1, 2], "submitted": True}}
    store.delete_run(run_id)
    assert Store().executor_state(run_id, "other") == {}


def test_a_sample_missing_a_template_field_is_flagged_when_rendered(make_suite, model_server):
    data = [{"q": f"ITEM-{i}: what number is this?", "a": str(i), **({"hint": "h"} if i % 3 else {})}
            for i in range(9)]
    suite = make_suite({"qa": data}, qa={"prompt_template": "{{q}} {{hint}}"})
    server = model_server()
    result = evalnb.run(suite, [Model("m", base_url=server.base_url, api="chat")], progress=False)
    assert result.status == "completed"
    stored = Store().samples(result.run_id)
    assert [s["missing_field"] for s in stored] == [0 if i % 3 else 1 for i in range(9)]


def test_the_sample_type_says_which_fields_exist_at_which_stage():
    assert ITEM_FIELDS[:4] == ("task_id", "model", "sample_index", "epoch") and "missing_field" in ITEM_FIELDS
    assert "output_text" in GENERATION_FIELDS and "extracted_output" in GENERATION_FIELDS
    assert {"scores", "judge", "status", "error"} <= set(GRADING_FIELDS)
    names = [f.name for f in dataclasses.fields(Sample)]
    assert names == [*ITEM_FIELDS, *GENERATION_FIELDS, *GRADING_FIELDS]
    assert set(STORED_FIELDS) <= set(SAMPLE_FIELDS) and "judge_calls" not in SAMPLE_FIELDS
    s = Sample("t", "m", 0, 0, "p", "p", "a", {"x": 1})
    assert s.status == "scoring" and s.scores == {} and s.get("output_text") is None
    with pytest.raises(AttributeError):
        s.not_a_field = 1  # slots: a misspelt field fails at once


def test_browse_never_reads_a_sample_field_as_a_metric():
    from evalnb.widgets.browse_widget import KNOWN_COLUMNS

    assert set(SAMPLE_FIELDS) <= KNOWN_COLUMNS and "missing_field" in KNOWN_COLUMNS
