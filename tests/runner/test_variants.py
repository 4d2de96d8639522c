"""Prompt variants in one run: every (model, variant) a candidate, paired by item, stored and resumed.

The stand-in server reads the prompt (helpers.variant_kit): the "defined" variant's added
sentence turns the factual reviews from wrong to right, so its effect is known item by item.
"""

from __future__ import annotations

import re

import pytest

import evalnb
from evalnb import Model
from evalnb.errors import ManifestError
from evalnb.store import Store
from helpers.variant_kit import DEFINED, DEFINITION, N_ROWS, reads_prompt, sentiment_manifest

pytestmark = pytest.mark.usefixtures("evalnb_home")

VARIANTS = {"plain": {}, "defined": {"prompt_template": DEFINED}}


@pytest.fixture
def suite(tmp_path):
    return evalnb.Suite.from_dict(sentiment_manifest(tmp_path / "data"), base_dir=tmp_path / "data")


@pytest.fixture
def server(model_server):
    return model_server(reads_prompt)


def _models(server):
    return [Model("strong", base_url=server.base_url, api="chat"), Model("weak", base_url=server.base_url)]


def test_variants_times_models_in_one_run(suite, server):
    result = evalnb.run(suite, _models(server), variants=VARIANTS, progress=False)
    assert result.status == "completed"
    assert result.variants == ["plain", "defined"]
    s = result.samples
    assert list(s.columns[:3]) == ["task_id", "model", "variant"]
    assert set(s["task_id"]) == {"reviews"}
    assert len(s) == 2 * 2 * N_ROWS
    # each variant's own prompt was sent: the sentence is in every "defined" prompt and no "plain" one
    assert s.loc[s.variant == "defined", "prompt"].str.contains(DEFINITION, regex=False).all()
    assert not s.loc[s.variant == "plain", "prompt"].str.contains(DEFINITION, regex=False).any()
    m = result.metrics.set_index(["model", "variant"])["mean"]
    assert m[("strong", "plain")] == pytest.approx(20 / 30)  # the 10 factual reviews read as positive
    assert m[("strong", "defined")] == pytest.approx(1.0)
    assert m[("weak", "defined")] == pytest.approx(29 / 30)  # item 5 misread under both
    assert server.request_count == 2 * 2 * N_ROWS


def test_paired_variants_equal_the_difference_by_hand(suite, server):
    result = evalnb.run(suite, _models(server), variants=VARIANTS, progress=False)
    table = result.paired("defined", "plain").set_index("model")
    s = result.samples
    for model in ("strong", "weak"):
        mine = s[s.model == model].pivot(index="sample_index", columns="variant", values="exact_match")
        diffs = mine["defined"] - mine["plain"]
        row = table.loc[model]
        assert (row.variant_a, row.variant_b, row.task_id) == ("defined", "plain", "reviews")
        assert row.n_pairs == N_ROWS
        assert row.mean_diff == pytest.approx(diffs.mean())
        assert row.stderr == pytest.approx(diffs.std(ddof=1) / N_ROWS ** 0.5)
        assert row.n01 == int(((mine["defined"] == 0) & (mine["plain"] == 1)).sum())
        assert row.n10 == int(((mine["defined"] == 1) & (mine["plain"] == 0)).sum()) == 10
    # two models within each variant, and paired_all covers both kinds
    models = result.paired("strong", "weak")
    assert list(models["variant"]) == ["plain", "defined"]
    everything = result.paired_all()
    assert len(everything) == 2 + 2


def test_a_variant_that_changes_nothing_is_not_sent_twice(suite, server):
    result = evalnb.run(suite, _models(server), variants={"plain": {}, "same": {}}, progress=False)
    assert server.request_count == 2 * N_ROWS  # one call per (model, item), not per variant
    s = result.samples
    assert s.groupby("variant").size().to_dict() == {"plain": 2 * N_ROWS, "same": 2 * N_ROWS}
    assert (s.status == "completed").all()
    a = s[s.variant == "plain"].set_index(["model", "sample_index"])["output_text"]
    b = s[s.variant == "same"].set_index(["model", "sample_index"])["output_text"]
    assert a.equals(b.reindex(a.index))
    # and a later run whose variant equals the first run's prompt reuses its calls
    before = server.request_count
    evalnb.run(suite, _models(server), variants={"plain": {}, "defined": {"prompt_template": DEFINED}}, progress=False)
    assert server.request_count - before == 2 * N_ROWS  # only the "defined" prompts


def test_stored_resumed_and_old_runs_keep_their_shape(suite, server, evalnb_home):
    plain_run = evalnb.run(suite, _models(server), progress=False)
    assert "variant" not in plain_run.samples.columns and "variant" not in plain_run.metrics.columns
    result = evalnb.run(suite, _models(server), variants=VARIANTS, progress=False, name="two prompts")
    sent = server.request_count
    store = Store()
    store.update_run(result.run_id, status="failed")
    again = evalnb.resume(result.run_id, progress=False)
    assert server.request_count == sent  # every sample was kept
    assert again.variants == ["plain", "defined"]
    assert again.metrics[["model", "variant", "mean"]].equals(result.metrics[["model", "variant", "mean"]])
    loaded = evalnb.load_run(result.run_id)
    assert list(loaded.samples.columns[:3]) == ["task_id", "model", "variant"]


def test_name_of_both_a_model_and_a_variant_is_refused(suite, server):
    with pytest.raises(ManifestError, match="both a variant name and a model label"):
        evalnb.run(suite, _models(server), variants={"strong": {}, "defined": {"prompt_template": DEFINED}},
                   progress=False)
    assert server.request_count == 0


@pytest.mark.parametrize("variants, where", [
    ({"v": {"prompt_templte": "x {{text}}"}}, "variants['v'].prompt_templte: not a field a variant can override; "
                                               "did you mean prompt_template?"),
    ({"v": {"tasks": {"nope": {"prompt_template": "x"}}}}, "variants['v'].tasks['nope']: unknown task"),
    ({"v": {"prompt_template": ""}}, "variants['v'].prompt_template"),
    ({"v": {"generation": {"temperature": 9}}}, "variants['v'].generation.temperature"),
    ({"bad name!": {}}, "variant name"),
    ({"v": "not a dict"}, "variants['v']: must be a dict"),
    ([("v", {})], "variants: must be a dict"),
])
def test_bad_variants_fail_before_any_call(suite, server, variants, where):
    with pytest.raises(ManifestError) as caught:
        evalnb.run(suite, _models(server), variants=variants, progress=False)
    assert where in str(caught.value)
    assert server.request_count == 0
    assert evalnb.runs().empty


def test_one_task_variant_and_instructions(tmp_path, server):
    data = sentiment_manifest(tmp_path / "data")
    data["tasks"].append({**data["tasks"][0], "id": "control"})
    suite = evalnb.Suite.from_dict(data, base_dir=tmp_path / "data")
    variants = {"plain": {}, "system": {"instructions": DEFINITION, "tasks": {"control": {"instructions": None}}}}
    result = evalnb.run(suite, [Model("strong", base_url=server.base_url, api="chat")], variants=variants,
                        progress=False)
    systems = [r.body["messages"][0]["content"] for r in server.requests if r.body["messages"][0]["role"] == "system"]
    assert systems == [DEFINITION] * N_ROWS  # only the reviews task of the "system" variant got it
    m = result.metrics.set_index(["task_id", "variant"])["mean"]
    assert m[("reviews", "system")] == pytest.approx(1.0)
    assert m[("control", "system")] == pytest.approx(20 / 30)


def test_cli_variant_files(tmp_path, server, capsys):
    import json

    from evalnb.cli import main

    folder = tmp_path / "data"
    (folder / "suite.json").parent.mkdir(parents=True, exist_ok=True)
    (folder / "suite.json").write_text(json.dumps(sentiment_manifest(folder)), encoding="utf-8")
    (tmp_path / "plain.yaml").write_text("", encoding="utf-8")
    (tmp_path / "defined.yaml").write_text("prompt_template: |-\n  " + DEFINED.replace("\n", "\n  ") + "\n",
                                           encoding="utf-8")
    code = main(["run", str(folder / "suite.json"), "--model", f"strong@{server.base_url},api=chat",
                 "--variant", f"plain={tmp_path / 'plain.yaml'}", "--variant", f"defined={tmp_path / 'defined.yaml'}",
                 "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"reviews\s+strong · plain\s+exact_match\s+30\s+0\s+0\s+0\.6667", out), out
    assert re.search(r"reviews\s+strong · defined\s+exact_match\s+30\s+0\s+0\s+1\.0000", out), out
    (tmp_path / "typo.yaml").write_text("prompt_templat: x\n", encoding="utf-8")
    before = server.request_count
    code = main(["run", str(folder / "suite.json"), "--model", f"strong@{server.base_url},api=chat",
                 "--variant", f"typo={tmp_path / 'typo.yaml'}", "--no-progress"])
    captured = capsys.readouterr()
    assert code != 0 and "variants['typo'].prompt_templat" in captured.err + captured.out
    assert server.request_count == before


def test_estimate_counts_every_variant(suite, server):
    table = evalnb.estimate(suite, _models(server), variants=VARIANTS).table
    assert list(table.columns[:3]) == ["task_id", "model", "variant"]
    assert len(table) == 4 and (table["calls"] == N_ROWS).all()
    by = table.set_index(["model", "variant"])["input_tokens"]
    assert by[("strong", "defined")] > by[("strong", "plain")]  # the added sentence is counted
    assert server.request_count == 0


def test_estimate_counts_a_no_change_variant_once_as_the_run_sends_it(suite, server):
    """plain: {}, same: {"generation": {}} (asks exactly what plain asks), defined: its own prompt."""
    variants = {"plain": {}, "same": {"generation": {}}, "defined": {"prompt_template": DEFINED}}
    estimate = evalnb.estimate(suite, _models(server), variants=variants)
    by = estimate.table.set_index(["model", "variant"])["calls"]
    assert by[("strong", "plain")] == by[("strong", "defined")] == N_ROWS
    assert by[("strong", "same")] == by[("weak", "same")] == 0  # plain's calls answer it
    assert estimate.table.set_index(["model", "variant"]).loc[("weak", "same"), "input_tokens"] == 0
    evalnb.run(suite, _models(server), variants=variants, progress=False)
    assert estimate.calls == server.request_count == 2 * 2 * N_ROWS


def test_batch_executor_runs_variants_like_a_local_run(suite, server, monkeypatch):
    monkeypatch.setenv("EVALNB_BATCH_POLL_S", "0.05")
    batch = evalnb.run(suite, _models(server), variants=VARIANTS, progress=False, executor="batch", reuse=False)
    assert server.batched_requests == 2 * 2 * N_ROWS
    local = evalnb.run(suite, _models(server), variants=VARIANTS, progress=False, reuse=False)
    keys = ["model", "variant", "metric", "n", "mean"]
    assert batch.metrics[keys].equals(local.metrics[keys])


@pytest.mark.slow
def test_ray_executor_runs_variants_like_a_local_run(suite, server, ray_runtime):
    from evalnb import RayExecutor

    variants = {**VARIANTS, "system": {"instructions": DEFINITION}}  # a task-level generation setting too
    ray_run = evalnb.run(suite, _models(server), variants=variants, progress=False, reuse=False,
                         executor=RayExecutor(num_workers=1))
    local = evalnb.run(suite, _models(server), variants=variants, progress=False, reuse=False)
    keys = ["model", "variant", "metric", "n", "mean"]
    assert ray_run.status == "completed"
    assert ray_run.metrics[keys].equals(local.metrics[keys])
    assert ray_run.metrics.set_index(["model", "variant"]).loc[("strong", "system"), "mean"] == pytest.approx(1.0)


def test_the_docs_page_runs(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    blocks = re.findall(r"```python\n(.*?)```", (root / "docs" / "variants.md").read_text(encoding="utf-8"), re.S)
    script = tmp_path / "variants_doc.py"
    script.write_text("\n".join(blocks), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(root), "EVALNB_HOME": str(tmp_path / "home")}
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[+Neutral means the review only states facts.+]" in proc.stdout
    assert "did you mean prompt_template?" in proc.stdout


def test_resume_sends_only_the_failed_calls_of_a_variant(suite, model_server):
    from evalnb.testing import Fault

    down = {"now": True}

    def responder(body):  # the "defined" prompts of items 3 and 4 fail (503) until the server recovers
        text = body["messages"][-1]["content"]
        if down["now"] and DEFINITION in text and ("item 3:" in text or "item 4:" in text):
            return Fault(status=503)
        return reads_prompt(body)

    flaky = model_server(responder)
    models = [Model("strong", base_url=flaky.base_url, api="chat")]
    first = evalnb.run(suite, models, variants=VARIANTS, progress=False, generation={"max_retries": 0})
    failed = first.samples[first.samples.status == "failed"]
    assert set(zip(failed.variant, failed.sample_index)) == {("defined", 3), ("defined", 4)}
    down["now"] = False
    sent = flaky.request_count
    again = evalnb.resume(first.run_id, progress=False)
    resent = flaky.requests[sent:]
    assert len(resent) == 2 and all(DEFINITION in r.body["messages"][-1]["content"] for r in resent)
    assert (again.samples.status == "completed").all()
    assert again.metrics.set_index("variant").loc["defined", "mean"] == pytest.approx(1.0)


def test_identical_requests_are_sent_once_in_provider_batches(suite, server, monkeypatch):
    monkeypatch.setenv("EVALNB_BATCH_POLL_S", "0.05")
    same = {"plain": {}, "same": {}, "defined": {"prompt_template": DEFINED}}
    result = evalnb.run(suite, _models(server), variants=same, progress=False, executor="batch", reuse=False)
    assert server.batched_requests == 2 * 2 * N_ROWS  # plain and defined; "same" is answered by plain's calls
    s = result.samples
    assert (s.status == "completed").all() and len(s) == 3 * 2 * N_ROWS
    twin = s[s.variant == "same"]
    assert twin["cached"].all() and (twin["cost_usd"].fillna(0) == 0).all()
    m = result.metrics.set_index(["model", "variant"])["mean"]
    assert m[("strong", "same")] == m[("strong", "plain")]


def test_a_failed_request_fails_its_twin_too_and_resume_sends_it_once(suite, model_server):
    from evalnb.testing import Fault

    down = {"now": True}

    def responder(body):
        text = body["messages"][-1]["content"]
        if down["now"] and "item 7:" in text:
            return Fault(status=503)
        return reads_prompt(body)

    flaky = model_server(responder)
    models = [Model("strong", base_url=flaky.base_url, api="chat")]
    first = evalnb.run(suite, models, variants={"plain": {}, "same": {}}, progress=False,
                       generation={"max_retries": 0})
    assert flaky.request_count == N_ROWS
    failed = first.samples[first.samples.status == "failed"]
    assert sorted(failed.variant) == ["plain", "same"] and set(failed.sample_index) == {7}
    assert failed["error"].str.contains("503").all()
    down["now"] = False
    again = evalnb.resume(first.run_id, progress=False)
    assert flaky.request_count == N_ROWS + 1  # the one request, for both variants
    assert (again.samples.status == "completed").all()


@pytest.mark.slow
def test_identical_requests_are_sent_once_on_ray(suite, server, ray_runtime):
    from evalnb import RayExecutor

    result = evalnb.run(suite, _models(server), variants={"plain": {}, "same": {}}, progress=False, reuse=False,
                        executor=RayExecutor(num_workers=1))
    assert server.request_count == 2 * N_ROWS
    assert (result.samples.status == "completed").all() and len(result.samples) == 2 * 2 * N_ROWS


def test_variant_names_are_pairwise_candidates(suite, server, model_server):
    """Pairwise judging (issue 32) takes a variant name as a candidate: every sample of that variant."""
    judge_server = model_server(lambda body: "The first one reads better. [[A]]")
    result = evalnb.run(suite, [Model("strong", base_url=server.base_url, api="chat")], variants=VARIANTS,
                        progress=False)
    pairs = result.pairwise("defined", "plain", judge_model=Model("judge", base_url=judge_server.base_url),
                            template="Q: {{prompt}}\nA: {{output_a}}\nB: {{output_b}}\nWhich is better?")
    assert len(pairs) == N_ROWS and set(pairs["task_id"]) == {"reviews"}
    assert judge_server.request_count > 0


def test_public_task_ids_are_the_tasks_own(suite, server):
    result = evalnb.run(suite, _models(server), variants=VARIANTS, progress=False)
    assert result.task_ids == ["reviews"]
    assert result.summarize(task_id="reviews")["variant"].tolist() == ["plain", "plain", "defined", "defined"]
    with pytest.raises(ValueError, match="unknown task_id 'nope'"):
        result.paired("defined", "plain", task_id="nope")


def test_progress_counts_each_model_and_variant_as_its_own_candidate(suite, server, widget_displays, capsys):
    result = evalnb.run(suite, _models(server), variants=VARIANTS, progress=True)
    [panel] = widget_displays
    assert sorted(panel.rows) == sorted(result.candidates) and len(panel.rows) == 4  # no bare "strong" row
    means = result.metrics.set_index(["model", "variant"])["mean"]
    for model, variant in means.index:
        bar, text = panel.rows[f"{model} · {variant}"]
        assert (bar.value, bar.max) == (N_ROWS, N_ROWS)
        assert f"{N_ROWS}/{N_ROWS}" in text.value and f"={means[(model, variant)]:.3f}" in text.value
    assert "strong · defined" in panel.static_html() and ">strong<" not in panel.static_html()
    # the text line: the same candidates, and no bare model with "0/0"
    evalnb.run(suite, _models(server), variants=VARIANTS, progress="text", reuse=False, name="again")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"strong · plain: {N_ROWS}/{N_ROWS}" in line and f"weak · defined: {N_ROWS}/{N_ROWS}" in line
    assert "strong: " not in line and "0/0" not in line
    assert "=0.967" in line  # weak · defined: item 5 misread


def test_a_models_own_counters_show_beside_its_variants_only_when_they_say_something():
    from evalnb.runner.progress import RunProgress, TextDisplay

    p = RunProgress(run_id="eval_run_x")
    p.model("m", "t@a").total = 2
    p.model("m", "t@b").total = 2
    p.model("m")  # its client's counters (retries, rate limits): nothing yet
    assert [m.label for m in p.rows()] == ["m · a", "m · b"]
    p.model("m").retries = 3
    assert [(m.label, m.describe()) for m in p.rows()][-1] == ("m (all variants)", "3 retries")
    assert p.models["m"].label == "m" and p.total == 4  # the counters themselves are untouched
    plain = RunProgress(run_id="eval_run_y")
    plain.model("m", "t").total = 1  # a run without variants: the model is the candidate
    assert [(m.label, m.describe()) for m in plain.rows()] == [("m", "0/1")]
    import io

    out = io.StringIO()
    TextDisplay(p, out).update(final=True)
    assert "m · a: 0/2 | m · b: 0/2 | m (all variants): 3 retries" in out.getvalue()


def test_a_graders_judge_calls_count_for_their_model_and_variant(make_suite, model_server, widget_displays):
    from helpers.runner_kit import rows

    candidate, judge = model_server(), model_server(lambda body: "yes")
    source = ("def grade(sample, item, ctx):\n"
              "    return ctx.responses_create(input='ok? ' + sample['output_text'])['output_text'] == 'yes'\n")
    suite = make_suite({"t": rows(3)}, t={"grader": {"contract": "model_backed", "source": source}})
    evalnb.run(suite, [Model("m", base_url=candidate.base_url)], judge_model=Model("j", base_url=judge.base_url),
               variants={"a": {}, "b": {"prompt_template": "{{q}} Answer briefly."}}, progress=True)
    [panel] = widget_displays
    assert sorted(panel.rows) == ["m · a", "m · b"]
    for name in ("m · a", "m · b"):
        assert "3/3" in panel.rows[name][1].value and "3 judge calls" in panel.rows[name][1].value
