"""Grader contracts, return shapes, ctx and the model bridge, with real sandbox workers."""

from __future__ import annotations

import asyncio
import math
import time
from types import SimpleNamespace

import pytest

from evalnb.errors import ProviderError, SandboxError
from evalnb.scoring.grading import (
    SAMPLE_KEYS,
    BatchGrade,
    Grader,
    SampleGrade,
    grader_sample,
    make_item,
    normalize_batch,
    normalize_grade,
)
from evalnb.sandbox import SandboxPool


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(2) as p:
        yield p


def sample(i: int, output: str = "a", **extra) -> dict:
    return {
        "task_id": "t", "model": "cand", "sample_index": i, "prompt": f"p{i}", "target": "a",
        "output_text": output, "extracted_output": output, "dataset_row": {"q": i},
        "response_id": f"r{i}", "usage": {"input_tokens": 1}, "status": "scoring", "latency_s": 0.1, **extra,
    }  # fmt: skip


def item(i: int, target: str = "a") -> dict:
    return make_item({"q": i, "target": "raw"}, prompt=f"p{i}", target=target, choices=["a", "b"], sample_index=i)


# -- return shapes (pure) ------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, scores",
    [
        (1, {"score": 1.0}),
        (0.25, {"score": 0.25}),
        (True, {"score": 1.0}),
        (False, {"score": 0.0}),
        (None, {"score": None}),
        (math.nan, {"score": None}),
        ({"scores": {"acc": True, "f1": 0.5, "skip": None}}, {"acc": 1.0, "f1": 0.5, "skip": None}),
        ({"scores": {}}, {}),
    ],
)
def test_normalize_grade_accepts_every_documented_shape(value, scores):
    grade = normalize_grade(value, "score")
    assert grade == SampleGrade(scores=scores)


def test_normalize_grade_keeps_judge_and_metadata():
    grade = normalize_grade({"scores": {"acc": 1}, "judge": {"why": "ok"}, "metadata": {"n": 2}}, "score")
    assert grade == SampleGrade(scores={"acc": 1.0}, judge={"why": "ok"}, metadata={"n": 2})


def test_normalize_grade_uses_metric_id_for_bare_values():
    assert normalize_grade(0.5, "exact_match").scores == {"exact_match": 0.5}


@pytest.mark.parametrize(
    "value, message",
    [
        ("yes", "grade returned a string ('yes'); expected a number"),
        ([1, 2], "grade returned a list ([1, 2])"),
        ({"accuracy": 1}, "a dict without 'scores' (keys: accuracy)"),
        ({"scores": {"a": 1}, "extra": 2}, "unexpected key(s) extra; allowed: scores, judge, metadata"),
        ({"scores": [1]}, "'scores' as a list ([1])"),
        ({"scores": {"acc": "high"}}, "scores['acc'] = a string ('high')"),
        ({"scores": {"acc": [1]}}, "scores['acc'] = a list"),
        ({"scores": {"bad id!": 1}}, "metric id 'bad id!'"),
        (math.inf, "scores must be finite"),
        ({"scores": {"a": -math.inf}}, "scores['a']"),
        (10**400, "too large"),
    ],
)
def test_normalize_grade_names_what_was_returned(value, message):
    grade = normalize_grade(value, "score")
    assert grade.failed and grade.scores == {}
    assert message in grade.error


def test_normalize_batch_shapes():
    assert normalize_batch(0.75, "acc", 2) == BatchGrade(metrics={"acc": 0.75})
    assert normalize_batch(True, "acc", 2) == BatchGrade(metrics={"acc": 1.0})
    assert normalize_batch(None, "acc", 2) == BatchGrade()
    got = normalize_batch({"metrics": {"macro_f1": 0.5, "n": 3, "nothing": None}}, "acc", 2)
    assert got == BatchGrade(metrics={"macro_f1": 0.5, "n": 3.0})
    got = normalize_batch({"samples": [None, 1, {"scores": {"x": 0}, "judge": "j"}, "bad"]}, "acc", 4)
    assert got.metrics == {} and got.error is None
    assert got.sample_updates[0] is None
    assert got.sample_updates[1] == SampleGrade(scores={"acc": 1.0})
    assert got.sample_updates[2] == SampleGrade(scores={"x": 0.0}, judge="j")
    assert "grade_batch samples[3] returned a string" in got.sample_updates[3].error


@pytest.mark.parametrize(
    "value, message",
    [
        ("x", "grade_batch returned a string"),
        ({}, "a dict without 'metrics' or 'samples'"),
        ({"metrics": {}, "scores": {}}, "unexpected key(s) scores"),
        ({"metrics": {"a": "b"}}, "metrics['a'] = a string"),
        ({"metrics": [1]}, "'metrics' as a list"),
        ({"samples": [1]}, "1 'samples' entries for 2 samples"),
        ({"samples": {"0": 1}}, "'samples' as a dict"),
        (math.inf, "finite"),
    ],
)
def test_normalize_batch_errors(value, message):
    got = normalize_batch(value, "acc", 2)
    assert got.failed and message in got.error


def test_make_item_puts_rendered_fields_on_top_and_keeps_the_row():
    row = {"question": "q", "target": "raw", "prompt": "raw", "sample_index": 99, "choices": ["x"]}
    got = make_item(row, prompt="P", target="T", choices=["a", "b"], sample_index=3)
    assert got == {"question": "q", "target": "T", "prompt": "P", "choices": ["a", "b"], "sample_index": 3, "row": row}
    assert make_item(row, prompt="P", target="T", choices=None, sample_index=0)["choices"] == ["x"]
    assert make_item({"q": 1}, prompt="P", target=None, choices=None, sample_index=0)["choices"] is None


def test_grader_sample_has_exactly_the_documented_keys():
    got = grader_sample(sample(0))
    assert tuple(got) == SAMPLE_KEYS
    assert "status" not in got and "latency_s" not in got


# -- spec parsing ----------------------------------------------------------------------------
def test_spec_defaults_and_derived_execution(pool):
    g = Grader({"source": "def grade(s, i): return 1"}, task_id="t", pool=pool)
    assert (g.contract, g.execution, g.model_access, g.metric_id) == ("sample", "per_sample", "none", "score")
    assert (g.timeout_seconds, g.max_model_calls) == (120, 64)
    g = Grader({"contract": "batch", "source": "def grade_batch(s): return 1"}, task_id="t", pool=pool)
    assert (g.execution, g.model_access) == ("aggregate", "none")
    g = Grader({"contract": "model_backed", "source": "def grade(s, i, ctx): return 1"}, task_id="t", pool=pool)
    assert (g.execution, g.model_access) == ("per_sample", "mka1")
    g = Grader({"contract": "model_backed", "source": "def grade_batch(s, ctx): return 1"}, task_id="t", pool=pool)
    assert g.execution == "aggregate"
    spec = SimpleNamespace(type="python", contract="model_backed", execution="aggregate", model_access="none",
                           metric_id="judge", source="def grade(s, i): return 1", file_id=None,
                           timeout_seconds=5, max_model_calls=0)  # fmt: skip
    g = Grader(spec, task_id="t", pool=pool)  # attribute access, like the manifest's pydantic model
    assert (g.execution, g.model_access, g.metric_id, g.timeout_seconds, g.max_model_calls) == ("aggregate", "none", "judge", 5, 0)


@pytest.mark.parametrize(
    "spec, message",
    [
        ({}, "needs source or file_id"),
        ({"source": "x", "file_id": "f"}, "exactly one"),
        ({"source": "x", "contract": "pairwise"}, "contract must be one of"),
        ({"source": "x", "execution": "sometimes"}, "execution must be one of"),
        ({"source": "x", "model_access": "openai"}, "model_access must be one of"),
        ({"source": "x", "timeout_seconds": 0}, "timeout_seconds must be a number from 1 to 600"),
        ({"source": "x", "timeout_seconds": 601}, "timeout_seconds"),
        ({"source": "x", "max_model_calls": 501}, "max_model_calls"),
        ({"source": "x", "max_model_calls": -1}, "max_model_calls"),
        ({"source": "x", "metric_id": "a b"}, "metric_id"),
        ({"source": "x", "type": "js"}, "type must be 'python'"),
    ],
)
def test_bad_specs_name_the_task_and_field(pool, spec, message):
    with pytest.raises(SandboxError, match="task 'qa'") as err:
        Grader(spec, task_id="qa", pool=pool)
    assert message in str(err.value)


def test_limits_at_both_edges_are_accepted(pool):
    for timeout, calls in ((1, 0), (600, 500)):
        g = Grader({"source": "x", "timeout_seconds": timeout, "max_model_calls": calls}, task_id="t", pool=pool)
        assert (g.timeout_seconds, g.max_model_calls) == (timeout, calls)


def test_file_id_source(pool, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "home"))
    from evalnb.data import upload_store
    path = tmp_path / "grader.py"
    path.write_text("def grade(sample, item):\n    return {'scores': {'len': len(sample['output_text'])}}\n")
    file_id = upload_store.upload(path)
    g = Grader({"file_id": file_id}, task_id="t", pool=pool)
    assert g.grade_samples_sync([sample(0, "abc")], [item(0)], model="m") == [SampleGrade(scores={"len": 3.0})]
    with pytest.raises(SandboxError, match="could not be read"):
        Grader({"file_id": "file-missing"}, task_id="t", pool=pool)


# -- per-sample grading with real workers ----------------------------------------------------
EXACT = "def grade(sample, item):\n    return sample['extracted_output'] == item['target']\n"


def test_sample_contract_scores_many_samples_in_order(pool):
    g = Grader({"source": EXACT, "metric_id": "exact_match"}, task_id="t", pool=pool)
    outputs = ["a" if i % 3 else "b" for i in range(3000)]
    grades = g.grade_samples_sync([sample(i, o) for i, o in enumerate(outputs)], [item(i) for i in range(3000)], model="m")
    assert [gr.scores["exact_match"] for gr in grades] == [1.0 if o == "a" else 0.0 for o in outputs]


def test_grade_sees_the_documented_sample_and_item(pool):
    source = "def grade(sample, item):\n    return {'scores': {}, 'judge': {'sample': sample, 'item': item}}\n"
    g = Grader({"source": source}, task_id="t", pool=pool)
    (got,) = g.grade_samples_sync([sample(4)], [item(4, target="T")], model="m")
    assert got.judge["sample"] == grader_sample(sample(4))
    assert got.judge["item"] == item(4, target="T")
    assert got.judge["item"]["row"] == {"q": 4, "target": "raw"}


def test_every_return_shape_through_the_sandbox(pool):
    source = """
import math
def grade(sample, item):
    return [1, 0.5, True, None, math.nan, {"scores": {"a": 1, "b": None}, "judge": "j", "metadata": {"m": 1}},
            "nope", {"accuracy": 1}][sample["sample_index"]]
"""
    g = Grader({"source": source, "metric_id": "m"}, task_id="t", pool=pool)
    grades = g.grade_samples_sync([sample(i) for i in range(8)], [item(i) for i in range(8)], model="m")
    assert [gr.scores for gr in grades[:5]] == [{"m": 1.0}, {"m": 0.5}, {"m": 1.0}, {"m": None}, {"m": None}]
    assert grades[5] == SampleGrade(scores={"a": 1.0, "b": None}, judge="j", metadata={"m": 1})
    assert "grade returned a string ('nope')" in grades[6].error
    assert "without 'scores'" in grades[7].error


def test_raising_grader_fails_only_that_sample(pool):
    source = "def grade(sample, item):\n    if sample['sample_index'] == 1:\n        raise KeyError('answer')\n    return 1\n"
    g = Grader({"source": source}, task_id="t", pool=pool)
    grades = g.grade_samples_sync([sample(i) for i in range(3)], [item(i) for i in range(3)], model="m")
    assert grades[1] == SampleGrade(error="KeyError: 'answer' (line 3)")
    assert grades[0].scores == grades[2].scores == {"score": 1.0}


def test_load_failures_fail_every_sample_with_one_clear_message(pool):
    for source, message in [
        ("def grade(sample, item)\n    return 1\n", "failed to load: SyntaxError: expected ':' (line 1)"),
        ("import not_a_module_xyz\ndef grade(s, i): return 1\n", "ModuleNotFoundError: No module named 'not_a_module_xyz' (line 1)"),
        ("def grade_batch(samples): return 1\n", "needs grade(sample, item[, ctx]), but its code does not define it"),
    ]:
        g = Grader({"source": source}, task_id="qa", pool=pool)
        grades = g.grade_samples_sync([sample(0), sample(1)], [item(0), item(1)], model="m")
        assert all(gr.failed and message in gr.error and "task 'qa'" in gr.error for gr in grades), grades
        with pytest.raises(SandboxError, match="task 'qa'"):
            asyncio.run(g.check())


def test_calling_the_wrong_execution_is_a_programming_error(pool):
    g = Grader({"source": EXACT}, task_id="t", pool=pool)
    with pytest.raises(ValueError, match=r"runs 'per_sample'; call grade_samples\(\)"):
        asyncio.run(g.grade_batch([sample(0)], [item(0)], model="m"))
    b = Grader({"contract": "batch", "source": "def grade_batch(s): return 1"}, task_id="t", pool=pool)
    with pytest.raises(ValueError, match=r"runs 'aggregate'; call grade_batch\(\)"):
        asyncio.run(b.grade_samples([sample(0)], [item(0)], model="m"))
    with pytest.raises(ValueError, match="1 samples but 2 items"):
        asyncio.run(g.grade_samples([sample(0)], [item(0), item(1)], model="m"))


# -- ctx -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "signature, gets_ctx",
    [
        ("grade(sample, item)", False),
        ("grade(sample, item, ctx)", True),
        ("grade(sample, item, ctx=None)", True),
        ("grade(*args)", True),
        ("grade(sample, *rest)", True),
        ("grade(sample, item, *, ctx=None)", False),
    ],
)
def test_ctx_is_passed_only_when_accepted(pool, signature, gets_ctx):
    source = f"def {signature}:\n    c = locals().get('ctx') or (locals().get('args') or locals().get('rest') or [None, None, None])[-1]\n" \
             "    return {'scores': {}, 'judge': None if c is None or isinstance(c, dict) else [c.task_id, c.model, c.run_id, c.metadata]}\n"  # fmt: skip
    g = Grader({"source": source}, task_id="qa", pool=pool, run_id="run_1", metadata={"k": "v"})
    (got,) = g.grade_samples_sync([sample(0)], [item(0)], model="cand-1")
    assert not got.failed, got.error
    assert got.judge == (["qa", "cand-1", "run_1", {"k": "v"}] if gets_ctx else None)


def test_grade_batch_ctx_and_items(pool):
    source = """
def grade_batch(samples, ctx):
    correct = [s["output_text"] == s["item"]["target"] for s in samples]
    return {"metrics": {"accuracy": sum(correct) / len(correct)},
            "samples": [{"scores": {"ok": c}, "judge": ctx.model} if s["sample_index"] != 2 else None
                        for s, c in zip(samples, correct)]}
"""
    g = Grader({"contract": "batch", "source": source}, task_id="t", pool=pool)
    outputs = ["a", "b", "a", "a"]
    got = g.grade_batch_sync([sample(i, o) for i, o in enumerate(outputs)], [item(i) for i in range(4)], model="cand")
    assert got.metrics == {"accuracy": 0.75} and got.error is None
    assert got.sample_updates[2] is None
    assert got.sample_updates[1] == SampleGrade(scores={"ok": 0.0}, judge="cand")


def test_grade_batch_number_and_failure(pool):
    g = Grader({"contract": "batch", "metric_id": "f1", "source": "def grade_batch(samples):\n    return len(samples) / 10\n"},
               task_id="t", pool=pool)  # fmt: skip
    assert g.grade_batch_sync([sample(0), sample(1)], [item(0), item(1)], model="m") == BatchGrade(metrics={"f1": 0.2})
    g = Grader({"contract": "batch", "source": "def grade_batch(samples):\n    return 1 / 0\n"}, task_id="t", pool=pool)
    got = g.grade_batch_sync([sample(0)], [item(0)], model="m")
    assert got == BatchGrade(error="ZeroDivisionError: division by zero (line 2)")
    g = Grader({"contract": "batch", "timeout_seconds": 1, "source": "def grade_batch(samples):\n    while True: pass\n"},
               task_id="t", pool=pool)  # fmt: skip
    assert g.grade_batch_sync([sample(0)], [item(0)], model="m").error == "grade_batch timed out after 1 s"


# -- the model bridge ------------------------------------------------------------------------
class Responder:
    """An in-process async bridge that counts calls (what the runner would provide)."""

    def __init__(self, delay: float = 0.0, fail: bool = False):
        self.calls: list[tuple[str, dict]] = []
        self.delay, self.fail = delay, fail

    async def __call__(self, kind: str, request: dict) -> dict:
        self.calls.append((kind, request))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail:
            raise ProviderError("upstream said no", status=400)
        if kind == "responses":
            return {"id": "resp_1", "output": [{"type": "message", "content": [{"type": "output_text", "text": f"echo:{request['input']}"}]}]}
        return {"object": "list", "data": [{"object": "embedding", "embedding": [0.5, 0.25], "index": 0}]}


JUDGE = """
def grade(sample, item, ctx):
    texts = [ctx.responses_create(input=f"q{k}", temperature=0)["output_text"] for k in range(item["n"])]
    return {"scores": {"score": 1}, "judge": texts}
"""


def judge_items(counts):
    return [dict(item(i), n=n) for i, n in enumerate(counts)]


def test_bridge_calls_reach_the_responder_and_limit_is_exact(pool):
    bridge = Responder()
    g = Grader({"contract": "model_backed", "source": JUDGE, "max_model_calls": 3}, task_id="t", pool=pool, bridge=bridge)
    grades = g.grade_samples_sync([sample(i) for i in range(3)], judge_items([0, 3, 4]), model="m")
    assert grades[0].judge == []
    assert grades[1].judge == ["echo:q0", "echo:q1", "echo:q2"]  # output_text filled in from "output"
    assert "ModelCallLimitError: max_model_calls (3) reached" in grades[2].error
    assert len(bridge.calls) == 3 + 3
    assert bridge.calls[0] == ("responses", {"input": "q0", "temperature": 0, "model": "auto"})


def test_zero_model_calls_allowed(pool):
    bridge = Responder()
    g = Grader({"contract": "model_backed", "source": JUDGE, "max_model_calls": 0}, task_id="t", pool=pool, bridge=bridge)
    grades = g.grade_samples_sync([sample(0), sample(1)], judge_items([0, 1]), model="m")
    assert grades[0].scores == {"score": 1.0}
    assert "max_model_calls (0)" in grades[1].error
    assert bridge.calls == []


def test_model_access_none_refuses_and_the_grader_can_catch_it(pool):
    bridge = Responder()
    source = """
def grade(sample, item, ctx):
    try:
        ctx.embeddings_create(input="x")
    except RuntimeError as exc:
        if sample["sample_index"] == 0:
            return {"scores": {"score": 0}, "judge": str(exc)}
        raise
"""
    g = Grader({"contract": "model_backed", "model_access": "none", "source": source}, task_id="t", pool=pool, bridge=bridge)
    grades = g.grade_samples_sync([sample(0), sample(1)], [item(0), item(1)], model="m")
    assert "model_access 'none'" in grades[0].judge
    assert "ModelAccessError" in grades[1].error
    assert bridge.calls == []


BYPASS = """
def grade(sample, item, ctx):
    raw = ctx._send                                    # skip the worker-side checks entirely
    out = []
    for k in range(3):
        try:
            out.append(raw("embeddings", {"model": "auto", "input": "x"})["data"][0]["embedding"])
        except RuntimeError as exc:
            out.append(str(exc))
    return {"scores": {}, "judge": out}
"""


def test_parent_enforces_limits_even_when_worker_checks_are_bypassed(pool):
    bridge = Responder()
    g = Grader({"contract": "model_backed", "source": BYPASS, "max_model_calls": 1}, task_id="t", pool=pool, bridge=bridge)
    (got,) = g.grade_samples_sync([sample(0)], [item(0)], model="m")
    assert got.judge[0] == [0.5, 0.25]
    assert got.judge[1:] == ["max_model_calls (1) reached for this grader execution"] * 2
    assert len(bridge.calls) == 1
    g = Grader({"contract": "model_backed", "model_access": "none", "source": BYPASS}, task_id="t", pool=pool, bridge=bridge)
    (got,) = g.grade_samples_sync([sample(0)], [item(0)], model="m")
    assert all("model_access 'none'" in text for text in got.judge)
    assert len(bridge.calls) == 1


def test_max_model_calls_counts_per_batch_execution(pool):
    bridge = Responder()
    source = """
def grade_batch(samples, ctx):
    done = 0
    for s in samples:
        try:
            ctx.responses_create(input=s["sample_index"]); done += 1
        except RuntimeError:
            pass
    return {"metrics": {"judged": done}}
"""
    g = Grader({"contract": "model_backed", "source": source, "max_model_calls": 2}, task_id="t", pool=pool, bridge=bridge)
    assert g.execution == "aggregate"
    got = g.grade_batch_sync([sample(i) for i in range(5)], [item(i) for i in range(5)], model="m")
    assert got.metrics == {"judged": 2.0}
    assert len(bridge.calls) == 2


def test_bridge_errors_and_missing_bridge_reach_user_code(pool):
    g = Grader({"contract": "model_backed", "source": JUDGE}, task_id="t", pool=pool, bridge=Responder(fail=True))
    (got,) = g.grade_samples_sync([sample(0)], judge_items([1]), model="m")
    assert "ModelCallError: ProviderError: upstream said no" in got.error
    g = Grader({"contract": "model_backed", "source": JUDGE}, task_id="t", pool=pool, bridge=None)
    (got,) = g.grade_samples_sync([sample(0)], judge_items([1]), model="m")
    assert "no model bridge is configured" in got.error


def test_slow_bridge_is_bounded_by_the_grader_timeout(pool):
    bridge = Responder(delay=5)
    g = Grader({"contract": "model_backed", "source": JUDGE, "timeout_seconds": 1}, task_id="t", pool=pool, bridge=bridge)
    started = time.monotonic()
    grades = g.grade_samples_sync([sample(0), sample(1)], judge_items([1, 0]), model="m")
    assert time.monotonic() - started < 3
    assert "timeout" in grades[0].error or "timed out" in grades[0].error
    assert grades[1].scores == {"score": 1.0}


def test_bridge_runs_on_the_callers_running_loop(pool):
    """Inside a notebook the runner's loop is running; the bridge must run on that loop."""
    loops = []

    async def bridge(kind, request):
        loops.append(asyncio.get_running_loop())
        return {"output_text": "fine"}

    async def main():
        g = Grader({"contract": "model_backed", "source": JUDGE}, task_id="t", pool=pool, bridge=bridge)
        grades = await asyncio.gather(*[g.grade_samples([sample(i)], judge_items([2]), model="m") for i in range(3)])
        return asyncio.get_running_loop(), grades

    loop, grades = asyncio.run(main())
    assert all(g[0].judge == ["fine", "fine"] for g in grades)
    assert len(loops) == 6 and all(lp is loop for lp in loops)


# -- compact wire form ------------------------------------------------------------------------
def _round_trip(s: dict, it: dict):
    import json

    from evalnb.scoring.grading import pack_grade_call
    from evalnb.sandbox.worker import _grade_unpacker

    packed = json.loads(json.dumps(pack_grade_call(s, it)))
    return packed, _grade_unpacker({"sample_keys": list(SAMPLE_KEYS)})(packed)


def _cases():
    row = {"question": "q?", "target": "raw", "nested": {"a": [1, 2]}}
    full = make_item(row, prompt="P", target="T", choices=["x"], sample_index=1)
    yield "fully shared", dict(sample(1), dataset_row=row, prompt="P", target="T"), full, 7
    yield "copied row", dict(sample(1), dataset_row=dict(row), prompt="other", target="T"), full, 4
    yield "plain item", sample(2), {"target": "a", "prompt": "p"}, 0
    trimmed = dict(full)
    del trimmed["question"]
    yield "row key removed", dict(sample(3), dataset_row=row), trimmed, 0
    own_row = {"row": "its own", "x": 1}
    yield "row has a row key", dict(sample(4), dataset_row=own_row), make_item(own_row, prompt="P", target=None, choices=None, sample_index=4), 0
    changed = dict(full, question="changed", extra=[1])
    yield "item value changed", sample(5), changed, 0


@pytest.mark.parametrize("name, s, it, flags", list(_cases()), ids=[c[0] for c in _cases()])
def test_compact_grade_form_round_trips_exactly(name, s, it, flags):
    packed, (got_sample, got_item) = _round_trip(s, it)
    assert packed[0] == flags
    assert got_sample == grader_sample(s)
    assert got_item == it
    assert list(got_item) == list(it)  # key order too
    if flags & 1:
        assert packed[1].count(None) >= 1 and packed[2] == it["row"]


# -- the manifest's own pydantic models ---------------------------------------------------------
def test_grader_built_from_a_manifest_task(pool):
    from evalnb.suite import Suite

    def task(grader: dict):
        manifest = {"tasks": [{"id": "qa", "type": "qa", "dataset": {"path": "x.jsonl"}, "prompt_template": "{{q}}", "grader": grader}]}
        return Suite.from_dict(manifest).task("qa")

    t = task({"contract": "model_backed", "source": "def grade_batch(samples, ctx):\n    return {'metrics': {'n': len(samples)}}\n"})
    g = Grader(t.grader, task_id="qa", pool=pool)
    assert (g.execution, g.model_access, g.timeout_seconds, g.max_model_calls) == ("aggregate", "mka1", 120, 64)
    assert g.grade_batch_sync([sample(0), sample(1)], [item(0), item(1)], model="m") == BatchGrade(metrics={"n": 2.0})
    t = task({"source": EXACT, "metric_id": "em", "timeout_seconds": 5})
    g = Grader(t.grader, task_id="qa", pool=pool)
    assert [x.id for x in t.effective_metrics] == ["em"] and g.execution == "per_sample"
    grades = g.grade_samples_sync([sample(0, "a"), sample(1, "b")], [item(0), item(1)], model="m")
    assert [x.scores for x in grades] == [{"em": 1.0}, {"em": 0.0}]


def test_cancelling_during_a_model_call_kills_the_worker_promptly(pool):
    bridge = Responder(delay=30)
    g = Grader({"contract": "model_backed", "source": JUDGE, "timeout_seconds": 60}, task_id="t", pool=pool, bridge=bridge)

    async def main():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(g.grade_samples([sample(0)], judge_items([1]), model="m"), 0.5)

    asyncio.run(pool.warm())
    before = set(pool.worker_pids())
    assert len(before) == pool.size
    started = time.monotonic()
    asyncio.run(main())
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and before <= set(pool.worker_pids()):
        time.sleep(0.05)
    assert not before <= set(pool.worker_pids())  # the worker waiting on the bridge was killed
    assert time.monotonic() - started < 3
    assert len(bridge.calls) == 1
    assert g.grade_samples_sync([sample(0)], judge_items([0]), model="m")[0].scores == {"score": 1.0}


def test_ctx_helpers_are_safe_from_user_threads(pool):
    source = """
from concurrent.futures import ThreadPoolExecutor
def grade(sample, item, ctx):
    with ThreadPoolExecutor(4) as ex:
        texts = list(ex.map(lambda k: ctx.responses_create(input=k)["output_text"], range(8)))
    return {"scores": {}, "judge": texts}
"""
    bridge = Responder()
    g = Grader({"contract": "model_backed", "source": source}, task_id="t", pool=pool, bridge=bridge)
    (got,) = g.grade_samples_sync([sample(0)], [item(0)], model="m")
    assert got.judge == [f"echo:{k}" for k in range(8)], got.error
    assert len(bridge.calls) == 8
