"""A run's user code runs in the run's own sandbox pools, sized by grader_concurrency and
closed with the run: preprocessors too (they used to go to a process-wide pool that stayed)."""

from __future__ import annotations

import pytest

import evalnb
from evalnb import Model
from helpers.runner_kit import child_pids, rows

pytestmark = pytest.mark.usefixtures("evalnb_home")

PREPROCESS = """
import os

def transform(row):
    return {**row, "pp_worker": os.getcwd()}
"""

GRADER = """
import os

def grade(sample, item):
    return {"scores": {"s": 1}, "judge": {"worker": os.getcwd(), "pp_worker": item["pp_worker"]}}
"""


def test_preprocessors_share_the_runs_pool_and_it_closes_with_the_run(make_suite, model_server):
    from evalnb.sandbox import preprocessing

    suite = make_suite({"t": rows(6)}, t={"preprocess": {"type": "python", "contract": "row", "source": PREPROCESS},
                                          "grader": {"source": GRADER}, "metrics": [{"id": "s"}]})
    server = model_server()
    before = child_pids()
    default = preprocessing._default_pool  # other tests may have made the process-wide pool
    started = default.workers_started if default is not None else 0

    result = evalnb.run(suite, [Model("m", base_url=server.base_url)], grader_concurrency=1, progress=False)

    judged = list(result.samples.judge)
    assert len(judged) == 6 and {j["worker"] for j in judged} == {j["pp_worker"] for j in judged}  # one worker
    assert len({j["worker"] for j in judged}) == 1
    assert preprocessing._default_pool is default  # the run made no process-wide pool...
    assert default is None or default.workers_started == started  # ...nor used the one there is
    assert child_pids() - before == set()  # every worker of the run is gone
