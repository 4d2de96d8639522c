"""evalnb.run scores an imported multiple-choice task by log-likelihood over /v1/completions:
metrics equal lm-eval's own process_results on the same log-probabilities, paired statistics
work as for every metric, and a model that cannot score is refused before any item is sent."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("lm_eval")

from helpers.lm_eval_data import DATASETS  # noqa: E402
from helpers.lm_eval_kit import lm_eval_task, mirror  # noqa: E402

import evalnb  # noqa: E402
from evalnb import Suite  # noqa: E402
from evalnb.errors import ProviderError  # noqa: E402
from evalnb.providers import Model, ModelClient  # noqa: E402
from evalnb.testing import LocalModelServer  # noqa: E402

pytestmark = pytest.mark.usefixtures("evalnb_home")


def sharp(before: str, token: str) -> float:
    return -(len(token) - 0.75 * token.count("e")) - 0.001 * len(before)


def flat(before: str, token: str) -> float:
    return -0.5 * len(token) - 0.4 * token.count("o")


@pytest.fixture(scope="module")
def arc(tmp_path_factory: pytest.TempPathFactory) -> tuple[Suite, str]:
    path, configs = DATASETS["arc_easy"]
    folder = str(mirror(tmp_path_factory.mktemp("hf"), path, configs))
    return Suite.from_lm_eval("arc_easy", num_fewshot=0, dataset_paths={path: folder}), folder


def expected_means(suite: Suite, folder: str, fn) -> dict[str, float]:
    """lm-eval's own acc/acc_norm on the log-probabilities the server gives."""
    items = suite.items("arc_easy")
    oracle = lm_eval_task("arc_easy", folder, 0)

    async def score(server):
        async with ModelClient(Model("m", base_url=server.base_url, api="completions")) as client:
            return [await client.loglikelihoods([(i.prompt, c) for c in i.continuations]) for i in items]

    with LocalModelServer(token_logprobs=fn) as server:
        results = asyncio.run(score(server))
    per_doc = [oracle.process_results(doc, [(r.logprob, r.is_greedy) for r in lls])
               for doc, lls in zip(oracle.eval_docs, results)]
    return {m: sum(d[m] for d in per_doc) / len(per_doc) for m in ("acc", "acc_norm")}


def test_a_run_scores_choices_by_loglikelihood_as_lm_eval_does(arc) -> None:
    suite, folder = arc
    n = len(suite.items("arc_easy"))
    with LocalModelServer(token_logprobs=sharp) as s1, LocalModelServer(token_logprobs=flat) as s2:
        models = [Model("sharp", base_url=s1.base_url, api="completions"),
                  Model("flat", base_url=s2.base_url, api="completions")]
        result = evalnb.run(suite, models, concurrency=4)
        assert s1.calls("/v1/completions") == n + 1  # the up-front check, then one call per item (all choices)
        sent = sorted(r.body["prompt"][0] and len(r.body["prompt"]) for r in s1.requests[1:])
    assert sent == sorted(len(i.continuations) for i in suite.items("arc_easy"))
    metrics = result.metrics.set_index(["model", "metric"])["mean"]
    for label, fn in (("sharp", sharp), ("flat", flat)):
        want = expected_means(suite, folder, fn)
        assert metrics[(label, "acc")] == pytest.approx(want["acc"])
        assert metrics[(label, "acc_norm")] == pytest.approx(want["acc_norm"])
    sample = result.samples[result.samples.model == "sharp"].iloc[0]
    stored = json.loads(sample.output_text)
    assert len(stored["loglikelihoods"]) == len(stored["is_greedy"]) >= 3  # each choice's summed logprob kept
    paired = result.paired("sharp", "flat", metric="acc")
    assert int(paired["n_pairs"].iloc[0]) == n


def test_a_model_that_cannot_score_is_refused_before_any_item(arc) -> None:
    suite, _ = arc
    with LocalModelServer(echo_logprobs=False) as server:
        with pytest.raises(ProviderError, match="cannot run: .*did not echo"):
            evalnb.run(suite, [Model("llama", base_url=server.base_url, api="completions")])
        assert server.calls("/v1/completions") == 1
    with LocalModelServer() as server:
        with pytest.raises(ProviderError, match="api='completions'"):
            evalnb.run(suite, [Model("chatty", base_url=server.base_url, api="chat")])
        assert server.request_count == 0


def test_generation_kwargs_become_each_tasks_own_settings(tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("gen")
    paths = {}
    for task in ("gsm8k", "triviaqa"):
        path, configs = DATASETS[task]
        paths[path] = str(mirror(root, path, configs))
    suite = Suite.from_lm_eval(["gsm8k", "triviaqa"], num_fewshot=0, dataset_paths=paths)
    assert suite.task("gsm8k").generation.stop == ["Question:", "</s>", "<|im_end|>"]
    assert suite.task("triviaqa").generation.stop == ["\n", ".", ","]
    with LocalModelServer({"Tom has": "He has 4.\n#### 4"}) as server:
        result = evalnb.run(suite, [Model("m", base_url=server.base_url, api="chat")],
                            generation={"max_gen_toks": 77, "stop": ["run-level"]})
        bodies = {(r.body["messages"][-1]["content"].startswith("Question: Tom")): r.body for r in server.requests}
    gsm8k_body, trivia_body = bodies[True], bodies[False]
    assert gsm8k_body["stop"] == ["Question:", "</s>", "<|im_end|>"] and trivia_body["stop"] == ["\n", ".", ","]
    assert gsm8k_body["max_tokens"] == 77 and trivia_body["max_tokens"] == 77  # the run's fills in around
    assert gsm8k_body["temperature"] == 0.0
    assert set(result.metrics.metric) == {"exact_match.strict-match", "exact_match.flexible-extract",
                                          "exact_match.remove_whitespace"}


def _folder(tmp_path_factory: pytest.TempPathFactory, task: str) -> tuple[str, str]:
    path, configs = DATASETS[task]
    return path, str(mirror(tmp_path_factory.mktemp(task), path, configs))


def test_a_loglikelihood_task_reports_perplexity_and_acc_as_lm_eval(tmp_path_factory: pytest.TempPathFactory) -> None:
    from lm_eval.api.metrics import mean, perplexity

    path, folder = _folder(tmp_path_factory, "lambada_openai")
    suite = Suite.from_lm_eval("lambada_openai", dataset_paths={path: folder})
    items = suite.items("lambada_openai")
    oracle = lm_eval_task("lambada_openai", folder, 0)
    oracle.build_all_requests()
    assert [(i.prompt, i.continuations[0]) for i in items] == [tuple(inst.arguments) for inst in oracle.instances]
    with LocalModelServer(token_logprobs={" kettle": -0.2, " river": -0.3}) as server:
        model = Model("m", base_url=server.base_url, api="completions")
        result = evalnb.run(suite, [model])

        async def score():
            async with ModelClient(model) as client:
                return [(await client.loglikelihoods([(i.prompt, i.continuations[0])]))[0] for i in items]
        scored = asyncio.run(score())
    per_doc = [oracle.process_results(inst.doc, [(s.logprob, s.is_greedy)]) for inst, s in zip(oracle.instances, scored)]
    got = result.metrics.set_index("metric")["mean"]
    assert got["perplexity"] == pytest.approx(perplexity([d["perplexity"] for d in per_doc]))
    assert got["acc"] == pytest.approx(mean([d["acc"] for d in per_doc]))
    assert 0 < got["acc"] < 1


def test_a_rolling_task_reports_word_and_byte_perplexity_and_bits_per_byte(tmp_path_factory) -> None:
    from lm_eval.api.metrics import bits_per_byte, weighted_perplexity

    path, folder = _folder(tmp_path_factory, "pile_arxiv")
    suite = Suite.from_lm_eval("pile_arxiv", dataset_paths={path: folder})
    items = suite.items("pile_arxiv")
    assert items[0].continuations == (items[0].target,) and items[0].target.startswith("We prove theorem 0.")
    oracle = lm_eval_task("pile_arxiv", folder, 0)
    oracle.build_all_requests()
    assert [i.target for i in items] == [inst.arguments[0] for inst in oracle.instances]
    with LocalModelServer(token_logprobs=flat) as server:
        model = Model("m", base_url=server.base_url, api="completions")
        result = evalnb.run(suite, [model])

        async def score():
            async with ModelClient(model) as client:
                return [(await client.loglikelihoods([("", i.target)]))[0].logprob for i in items]
        lls = asyncio.run(score())
    per_doc = [oracle.process_results(inst.doc, (ll,)) for inst, ll in zip(oracle.instances, lls)]
    got = result.metrics.set_index("metric")["mean"]
    assert got["word_perplexity"] == pytest.approx(weighted_perplexity([d["word_perplexity"] for d in per_doc]))
    assert got["byte_perplexity"] == pytest.approx(weighted_perplexity([d["byte_perplexity"] for d in per_doc]))
    assert got["bits_per_byte"] == pytest.approx(bits_per_byte([d["bits_per_byte"] for d in per_doc]))


@pytest.mark.slow
@pytest.mark.usefixtures("ray_runtime")
def test_on_ray_log_likelihood_and_task_settings_give_the_local_runs_samples(arc, tmp_path_factory) -> None:
    # Ray workers score continuations and send each task's own settings as the local executor
    # does: the same requests reach the server, and the same samples and metrics come back
    from evalnb.runner.executors.ray_driver import RayExecutor

    suite, _ = arc
    root = tmp_path_factory.mktemp("gen_ray")
    path, configs = DATASETS["gsm8k"]
    gen_suite = Suite.from_lm_eval("gsm8k", num_fewshot=0, dataset_paths={path: str(mirror(root, path, configs))})
    compared = ["task_id", "model", "sample_index", "status", "prompt", "target", "output_text", "extracted_output"]

    def run(executor):
        with LocalModelServer(token_logprobs=sharp) as s1, LocalModelServer({"Tom has": "He has 4.\n#### 4"}) as s2:
            ll = evalnb.run(suite, [Model("sharp", base_url=s1.base_url, api="completions")], concurrency=4,
                            reuse=False, executor=executor, progress=False)
            gen = evalnb.run(gen_suite, [Model("m", base_url=s2.base_url, api="chat")], reuse=False,
                             generation={"max_gen_toks": 77}, executor=executor, progress=False)
            sent = (sorted(json.dumps(r.body, sort_keys=True) for r in s1.requests),
                    sorted(json.dumps(r.body, sort_keys=True) for r in s2.requests))
        return ll, gen, sent

    local_ll, local_gen, local_sent = run("local")
    ray_ll, ray_gen, ray_sent = run(RayExecutor(num_workers=2, shard_size=8))
    assert ray_ll.run["summary"]["options"]["executor"]["type"] == "ray"
    assert ray_sent == local_sent  # every request body, the up-front check and each task's stops included
    assert any('"stop": ["Question:"' in body for body in ray_sent[1])
    for ours, theirs in ((ray_ll, local_ll), (ray_gen, local_gen)):
        assert ours.status == theirs.status == "completed"
        left = ours.samples.sort_values(["task_id", "sample_index"])[compared].reset_index(drop=True)
        right = theirs.samples.sort_values(["task_id", "sample_index"])[compared].reset_index(drop=True)
        assert len(left) > 0 and left.equals(right)
        assert ours.metrics.drop(columns=["error"]).equals(theirs.metrics.drop(columns=["error"]))
    assert set(ray_ll.metrics.metric) >= {"acc", "acc_norm"}
    assert json.loads(ray_ll.samples.output_text.iloc[0])["loglikelihoods"]


def test_in_provider_batches_log_likelihood_gives_the_local_runs_samples(arc, tmp_path_factory) -> None:
    # the batch's lines are the live calls' bodies (every continuation in one /v1/completions
    # request), and its answers are read as the live replies are: the same samples and metrics
    from evalnb.store import Store

    suite, _ = arc
    compared = ["task_id", "model", "sample_index", "status", "prompt", "target", "output_text", "extracted_output"]
    with LocalModelServer(token_logprobs=sharp) as server:
        model = [Model("sharp", base_url=server.base_url, api="completions")]
        local = evalnb.run(suite, model, concurrency=4, progress=False, store=Store(tmp_path_factory.mktemp("l") / "s"))
        live_bodies = sorted(json.dumps(r.body, sort_keys=True) for r in server.requests[1:])  # after the check
        batched = evalnb.run(suite, model, progress=False, executor=evalnb.BatchExecutor(poll_interval=0.05),
                             store=Store(tmp_path_factory.mktemp("b") / "s"))
        lines = [json.loads(x) for b in server.batches.values()
                 for x in server.batches_book.files[b["input_file_id"]].content.splitlines()]
    assert batched.status == local.status == "completed"
    assert sorted(json.dumps(line["body"], sort_keys=True) for line in lines) == live_bodies
    assert {line["url"] for line in lines} == {"/v1/completions"}
    left = batched.samples.sort_values("sample_index")[compared].reset_index(drop=True)
    right = local.samples.sort_values("sample_index")[compared].reset_index(drop=True)
    assert len(left) == len(suite.items("arc_easy")) and left.equals(right)
    assert batched.metrics.drop(columns=["error"]).equals(local.metrics.drop(columns=["error"]))


def test_the_batch_executor_refuses_task_settings_and_unechoing_servers_before_any_item(arc, tmp_path_factory):
    suite, _ = arc
    path, configs = DATASETS["gsm8k"]
    gen_suite = Suite.from_lm_eval("gsm8k", num_fewshot=0,
                                   dataset_paths={path: str(mirror(tmp_path_factory.mktemp("gsm"), path, configs))})
    with LocalModelServer(token_logprobs=sharp) as server:
        with pytest.raises(ProviderError, match="own generation settings run only with the local or Ray"):
            evalnb.run(gen_suite, [Model("m", base_url=server.base_url, api="chat")], executor="batch",
                       progress=False)
        assert server.request_count == 0
    with LocalModelServer(echo_logprobs=False) as server:
        with pytest.raises(ProviderError, match="cannot run: .*did not echo"):
            evalnb.run(suite, [Model("llama", base_url=server.base_url, api="completions")], executor="batch",
                       progress=False)
        assert server.calls("/v1/completions") == 1 and not server.batches  # the check, no batch
