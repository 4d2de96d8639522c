"""Every context shape scored as lm-eval's `local-completions` scores it, to the last digit.

Against one LocalModelServer with ``bpe_spaces=True`` (whitespace split as GPT-2's
pre-tokenizer splits it, so a context ending in whitespace does not end on a token boundary)
lm-eval 0.4.13 runs its own tasks (remote tokenizer, token ids) and evalnb runs the imported
ones; every choice's summed log-probability and is_greedy and every acc must be equal:

- an empty context (blimp: ``doc_to_text: ""``): lm-eval conditions on the prefix token
  (BOS, else EOS) and scores the whole continuation; evalnb reads the token from
  ``/tokenizer_info`` and does the same;
- a context ending in whitespace (lambada_openai rows with a double space before the last
  word, a local task whose prompt ends in a space): lm-eval moves the whitespace into the
  continuation and scores it;
- multiple inputs (winogrande: one context per choice, one continuation, acc over contexts).
"""

from __future__ import annotations

import hashlib
import json
import warnings

import pytest

pytest.importorskip("lm_eval")
pytest.importorskip("tenacity")

from helpers.lm_eval_data import blimp, spaced_lambada, winogrande  # noqa: E402
from helpers.lm_eval_kit import lm_eval_task, mirror  # noqa: E402

import evalnb  # noqa: E402
from evalnb import Suite  # noqa: E402
from evalnb.errors import LmEvalImportError  # noqa: E402
from evalnb.providers import Model  # noqa: E402
from evalnb.testing import LocalModelServer  # noqa: E402

pytestmark = pytest.mark.usefixtures("evalnb_home")


def model(before: str, token: str) -> float:
    """Log-probabilities in [-4, 0] from a hash of the recent text and the token (is_greedy varies)."""
    digest = hashlib.blake2b(f"{before[-48:]}\x00{token}".encode(), digest_size=4).digest()
    return -(int.from_bytes(digest, "little") % 4001) / 1000


DATA = {
    "blimp_adjunct_island": ("nyu-mll/blimp", {"adjunct_island": {"train": blimp(6)}}),
    "winogrande": ("allenai/winogrande", {"winogrande_xl": {"train": winogrande("train", 4),
                                                            "validation": winogrande("validation", 6)}}),
    "lambada_openai": ("EleutherAI/lambada_openai", {"default": {"test": spaced_lambada(6)}}),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hf")
    # folder names of their own: the datasets library caches a local folder by its name
    return {task: str(mirror(root, "shapes/" + task, DATA[task][1])) for task in DATA}


def _compare(oracle: dict, result, tasks: list[str]) -> int:
    """Every sample's log-likelihoods, is_greedy and acc equal lm-eval's; returns choices compared."""
    compared = 0
    for task in tasks:
        samples = result.samples[result.samples.task_id == task].sort_values("sample_index")
        theirs = sorted(oracle["samples"][task], key=lambda s: s["doc_id"])
        assert len(samples) == len(theirs) > 0, task
        assert samples.error.isna().all(), samples.error.tolist()
        for (_, sample), want in zip(samples.iterrows(), theirs):
            got = json.loads(sample.output_text)
            assert got["loglikelihoods"] == [ll for ll, _ in want["filtered_resps"]], (task, sample.sample_index)
            assert got["is_greedy"] == [g for _, g in want["filtered_resps"]], (task, sample.sample_index)
            assert sample.acc == want["acc"], (task, sample.sample_index)
            compared += len(got["loglikelihoods"])
        metrics = result.metrics[result.metrics.task_id == task].set_index("metric")["mean"]
        assert metrics["acc"] == pytest.approx(oracle["results"][task]["acc,none"], abs=1e-12), task
    return compared


def _run_both(tasks: dict, suite: Suite) -> tuple[dict, object, LocalModelServer]:
    from lm_eval import evaluator
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    with LocalModelServer(token_logprobs=model, bpe_spaces=True) as server:
        lm = LocalCompletionsAPI(base_url=f"{server.base_url}/completions", model=server.model,
                                 tokenizer_backend="remote", num_concurrent=1, max_retries=1)
        oracle = evaluator.evaluate(lm=lm, task_dict=tasks, log_samples=True, bootstrap_iters=0, verbosity="ERROR")
        result = evalnb.run(suite, [Model(server.model, base_url=server.base_url, api="completions")])
    return oracle, result, server


@pytest.mark.parametrize("task", list(DATA))
def test_each_shape_scores_as_lm_evals_local_completions(task: str, folders: dict[str, str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        suite = Suite.from_lm_eval(task, num_fewshot=0, dataset_paths={DATA[task][0]: folders[task]})
    oracle, result, server = _run_both({task: lm_eval_task(task, folders[task], 0)}, suite)
    assert _compare(oracle, result, [task]) >= 6
    if task == "blimp_adjunct_island":  # conditioned on the prefix token, read once from /tokenizer_info
        assert server.calls("/tokenizer_info") >= 2
        assert all(p.startswith("<|endoftext|>") for r in server.requests[-1:] for p in r.body["prompt"])
    if task == "winogrande":
        item = suite.items(task)[0]
        assert item.prompt == "" and len(item.contexts) == 2 and len(item.continuations) == 1
    if task == "lambada_openai":
        assert any(i.prompt.endswith(" ") for i in suite.items(task))  # the shape is there


def test_a_prompt_ending_in_a_space_and_a_few_shot_multiple_input_task(tmp_path, folders) -> None:
    """A local task whose prompt ends in a space (as leaderboard_gpqa's and french_bench's do)
    and winogrande with 2 examples written into the config (first_n: the same for both)."""
    import yaml

    rows = [{"q": f"Is {i} even?", "label": i % 2} for i in range(5)]
    folder = mirror(tmp_path, "local/spaced", {None: {"test": rows}})
    config = {"task": "spaced", "dataset_path": "local/spaced", "test_split": "test", "output_type": "multiple_choice",
              "doc_to_text": "Question: {{q}}\nAnswer: ", "doc_to_choice": ["yes", "no"], "doc_to_target": "label",
              "target_delimiter": "", "metric_list": [{"metric": "acc"}, {"metric": "acc_norm"}]}
    path = tmp_path / "spaced.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    suite = Suite.from_lm_eval(str(path), dataset_paths={"local/spaced": str(folder)})

    from lm_eval.api.task import ConfigurableTask

    oracle, result, _ = _run_both({"spaced": ConfigurableTask(config={**config, "dataset_path": str(folder)})}, suite)
    assert _compare(oracle, result, ["spaced"]) == 10
    assert suite.items("spaced")[0].prompt.endswith("Answer: ")


def test_multiple_input_few_shot_prompts_equal_lm_evals(folders) -> None:
    from helpers.lm_eval_kit import lm_eval_requests

    suite = Suite.from_lm_eval("winogrande", num_fewshot=2, dataset_paths={DATA["winogrande"][0]: folders["winogrande"]})
    items = suite.items("winogrande")
    oracle = lm_eval_requests("winogrande", folders["winogrande"], 2)
    assert len(items) == len(oracle) == 6
    pool = set()  # each training doc as lm-eval renders a shot: its gold context, the target, the delimiter
    for row in winogrande("train", 4):
        blank = row["sentence"].index("_")
        pool.add(f"{row['sentence'][:blank]}{row['option' + row['answer']]} {row['sentence'][blank + 1:].strip()}\n\n")
    for item, want in zip(items, oracle):
        # lm-eval's default sampler draws other examples; each of ours is a pool doc rendered as lm-eval renders it
        assert len(item.fewshot) == 2 and {s.text for s in item.fewshot} <= pool
        assert [item.prompt + c for c in item.contexts][0].endswith(want["context"][0].split("\n\n")[-1])
    zero = Suite.from_lm_eval("winogrande", num_fewshot=0, dataset_paths={DATA["winogrande"][0]: folders["winogrande"]})
    for item, want in zip(zero.items("winogrande"), lm_eval_requests("winogrande", folders["winogrande"], 0)):
        assert [item.prompt + c for c in item.contexts] == want["context"]
        assert list(item.continuations) * 2 == want["continuations"]


def test_a_multiple_input_shape_that_cannot_be_scored_is_refused_at_import(tmp_path) -> None:
    import yaml

    config = {"task": "odd", "dataset_path": "x/y", "test_split": "test", "output_type": "generate_until",
              "doc_to_text": 0, "doc_to_target": "a"}
    path = tmp_path / "odd.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    with pytest.raises(LmEvalImportError, match="'odd'.*doc_to_text is a choice index"):
        Suite.from_lm_eval(str(path))


def test_an_empty_context_on_a_server_without_tokenizer_info_is_a_clear_error(folders) -> None:
    suite = Suite.from_lm_eval("blimp_adjunct_island", dataset_paths={DATA["blimp_adjunct_island"][0]:
                                                                       folders["blimp_adjunct_island"]})
    with LocalModelServer(token_logprobs=model, tokenizer_api=False) as server:
        result = evalnb.run(suite, [Model(server.model, base_url=server.base_url, api="completions")])
        scored = [r for r in server.requests if r.path == "/v1/completions" and r.body["prompt"] != ["The sky is blue"]]
    assert scored == []  # nothing was scored without the prefix token
    assert len(result.samples) == 6
    assert result.samples.error.str.contains("tokenizer_info").all()
    assert result.samples.error.str.contains("empty context").all()


def test_contexts_are_for_multiple_choice_only() -> None:
    from evalnb.errors import ManifestError

    task = {"id": "t", "dataset": {"rows": [{"q": "a"}]}, "prompt_template": "{{q}}", "target_template": "x",
            "grader": {"type": "exact_match"},
            "loglikelihood": {"type": "loglikelihood", "continuations": "q", "contexts": "q"}}
    with pytest.raises(ManifestError, match=r"loglikelihood\.contexts: contexts are for type 'multiple_choice' only"):
        Suite.from_dict({"tasks": [task]})


def test_a_second_run_of_a_rolling_task_reads_each_texts_own_cached_answer(tmp_path) -> None:
    """Rolling items all have the empty prompt; their request keys differ by the scored text, so
    the output cache gives each text its own log-likelihood (not the first text's for all)."""
    from helpers.lm_eval_data import DATASETS

    path, configs = DATASETS["pile_arxiv"]
    suite = Suite.from_lm_eval("pile_arxiv", dataset_paths={path: str(mirror(tmp_path, path, configs))})
    with LocalModelServer(token_logprobs=model) as server:
        runs = [evalnb.run(suite, [Model(server.model, base_url=server.base_url, api="completions")])
                for _ in range(2)]
        scored = [r for r in server.requests if r.path == "/v1/completions" and r.body["prompt"] != ["The sky is blue"]]
    first, second = (r.samples.sort_values("sample_index").output_text.tolist() for r in runs)
    assert len(scored) == len(first) == 4  # the second run asked nothing: every answer came from the cache
    assert second == first and len(set(first)) == 4
    assert runs[1].metrics.set_index("metric")["mean"].to_dict() == runs[0].metrics.set_index("metric")["mean"].to_dict()


def test_in_provider_batches_an_empty_context_is_conditioned_as_in_a_live_run(folders, tmp_path) -> None:
    from evalnb.store import Store

    suite = Suite.from_lm_eval("blimp_adjunct_island", dataset_paths={DATA["blimp_adjunct_island"][0]:
                                                                       folders["blimp_adjunct_island"]})
    compared = ["sample_index", "status", "output_text", "acc"]
    with LocalModelServer(token_logprobs=model) as server:
        models = [Model(server.model, base_url=server.base_url, api="completions")]
        live = evalnb.run(suite, models, progress=False, store=Store(tmp_path / "live"))
        batched = evalnb.run(suite, models, progress=False, store=Store(tmp_path / "batch"),
                             executor=evalnb.BatchExecutor(poll_interval=0.05))
        lines = [json.loads(x) for b in server.batches.values()
                 for x in server.batches_book.files[b["input_file_id"]].content.splitlines()]
    assert batched.status == live.status == "completed"
    assert len(lines) == 6 and all(p.startswith("<|endoftext|>") for line in lines for p in line["body"]["prompt"])
    left = batched.samples.sort_values("sample_index")[compared].reset_index(drop=True)
    right = live.samples.sort_values("sample_index")[compared].reset_index(drop=True)
    assert left.equals(right)
