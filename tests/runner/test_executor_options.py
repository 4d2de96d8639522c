"""executor= as a run option: checked at once, stored with the run, given back to resume."""

from __future__ import annotations

import pytest

import evalnb
from evalnb import Model
from evalnb.runner.run_plan import make_plan
from evalnb.runner.executors.ray_driver import RayExecutor
from helpers.runner_kit import rows

pytestmark = pytest.mark.usefixtures("evalnb_home")


def test_ray_executor_options_are_checked_and_round_trip():
    ex = RayExecutor(3, concurrency_per_worker=8, resources={"num_cpus": 2}, shard_size=100)
    again = RayExecutor.from_record(ex.record())
    assert again.record() == ex.record() == {"type": "ray", "num_workers": 3, "concurrency_per_worker": 8,
                                             "resources": {"num_cpus": 2}, "address": None, "shard_size": 100}
    assert "num_workers=3" in repr(ex)
    for bad in ({"num_workers": 0}, {"concurrency_per_worker": 26}, {"concurrency_per_worker": True},
                {"shard_size": 0}, {"resources": ["cpu"]}):
        with pytest.raises(ValueError, match="RayExecutor"):
            RayExecutor(**bad)


def test_the_executor_is_a_stored_run_option(make_suite, model_server):
    suite = make_suite({"qa": rows(3)})
    with pytest.raises(ValueError, match="executor must be 'local', 'ray'"):
        make_plan(suite, [Model("m", base_url="http://127.0.0.1:1/v1")], executor="dask")
    plan = make_plan(suite, [Model("m", base_url="http://127.0.0.1:1/v1")], executor=RayExecutor(2))
    assert plan.stored_options()["executor"]["num_workers"] == 2
    assert make_plan(suite, ["m@http://127.0.0.1:1/v1"], executor=plan.stored_options()["executor"]).executor.num_workers == 2
    server = model_server()
    result = evalnb.run(suite, [Model("m", base_url=server.base_url, api="chat")], progress=False)
    assert result.run["summary"]["options"]["executor"] == "local"


def test_a_budget_on_ray_is_refused_before_anything_starts(make_suite, model_server):
    suite = make_suite({"qa": rows(3)})
    server = model_server()
    model = Model("m", base_url=server.base_url, price={"input": 1.0, "output": 1.0})
    for executor in ("ray", RayExecutor(num_workers=2)):
        with pytest.raises(ValueError, match="max_cost_usd: a budget needs executor='local'"):
            evalnb.run(suite, [model], executor=executor, max_cost_usd=1.0,
                       generation={"max_output_tokens": 10}, progress=False)
    assert server.request_count == 0
    # the same budget with the local executor runs
    plan = make_plan(suite, [model], max_cost_usd=1.0, generation={"max_output_tokens": 10})
    assert plan.max_cost_usd == 1.0 and plan.executor == "local"
