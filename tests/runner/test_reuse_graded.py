"""A re-run of an unchanged suite takes whole graded samples from the identical earlier run.

The grader below returns a fresh random number each time it runs, so equal scores prove a
sample was copied and different scores prove it was graded again.
"""

from __future__ import annotations

import pytest

import evalnb
from helpers.runner_kit import rows

pytestmark = pytest.mark.usefixtures("evalnb_home")

RANDOM = "import random\n\ndef grade(sample, item):\n    return {'scores': {'r': random.random()}}\n"


def _scores(result):
    frame = result.samples.set_index(["model", "sample_index"])
    return frame["r"].to_dict()


def _suite(make_suite, data=None, **task):
    return make_suite({"t": data or rows(8)}, t={"grader": {"source": RANDOM}, "metrics": [{"id": "r"}], **task})


def test_an_identical_rerun_copies_graded_samples(make_suite, model_server):
    server = model_server()
    models = [evalnb.Model("good", base_url=server.base_url), evalnb.Model("okay", base_url=server.base_url)]
    suite = _suite(make_suite)
    first = evalnb.run(suite, models, progress=False)
    sent = server.request_count
    second = evalnb.run(suite, models, progress=False)
    assert second.run_id != first.run_id and second.status == "completed"
    assert server.request_count == sent  # no model call
    assert _scores(second) == _scores(first)  # not graded again
    assert len(second.samples) == 16 and (second.samples["status"] == "completed").all()
    assert second.metrics.set_index("model")["n"].to_dict() == {"good": 8, "okay": 8}
    pd_first = first.samples.drop(columns=["r"]).reset_index(drop=True)
    pd_second = second.samples.drop(columns=["r"]).reset_index(drop=True)
    assert pd_first[["prompt", "target", "output_text", "extracted_output"]].equals(
        pd_second[["prompt", "target", "output_text", "extracted_output"]])


def test_a_changed_row_is_graded_again_and_the_rest_copied(make_suite, model_server):
    server = model_server()
    models = [evalnb.Model("good", base_url=server.base_url)]
    data = rows(6)
    first = evalnb.run(_suite(make_suite, data), models, progress=False)
    edited = [dict(r) for r in data]
    edited[2]["a"] = "changed target"
    second = evalnb.run(_suite(make_suite, edited), models, progress=False)
    a, b = _scores(first), _scores(second)
    assert a[("good", 2)] != b[("good", 2)]
    assert all(a[k] == b[k] for k in a if k != ("good", 2))


@pytest.mark.parametrize("change", ["reuse_false", "grader", "metadata"])
def test_no_copy_when_anything_that_decides_grading_changed(make_suite, model_server, change):
    server = model_server()
    models = [evalnb.Model("good", base_url=server.base_url)]
    first = evalnb.run(_suite(make_suite), models, progress=False, metadata={"exp": "a"})
    suite, options = _suite(make_suite), {"metadata": {"exp": "a"}}
    if change == "reuse_false":
        options["reuse"] = False
    elif change == "grader":
        suite = make_suite({"t": rows(8)}, t={"grader": {"source": RANDOM + "# v2\n"}, "metrics": [{"id": "r"}]})
    else:
        options["metadata"] = {"exp": "b"}
    second = evalnb.run(suite, models, progress=False, **options)
    a, b = _scores(first), _scores(second)
    assert all(a[k] != b[k] for k in a)  # every sample graded anew


def test_batch_graded_tasks_are_graded_again(make_suite, model_server):
    server = model_server()
    batch = "import random\n\ndef grade_batch(samples):\n    return {'metrics': {'m': random.random()}}\n"
    suite = make_suite({"t": rows(4)}, t={"grader": {"contract": "batch", "source": batch}})
    models = [evalnb.Model("good", base_url=server.base_url)]
    first = evalnb.run(suite, models, progress=False).metrics.set_index("metric")["mean"]["m"]
    second = evalnb.run(suite, models, progress=False).metrics.set_index("metric")["mean"]["m"]
    assert first != second
