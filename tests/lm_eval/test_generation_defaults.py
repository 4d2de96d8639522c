"""lm-eval's generation defaults, exactly: the bodies evalnb sends for generation tasks equal the
ones lm-eval's own `local-completions` sends to the same LocalModelServer.

gsm8k sets ``until`` and ``temperature`` but no token limit, nq_open the same with
``do_sample: false``, anagrams1 only ``until``: lm-eval fills greedy ``temperature`` 0,
``max_tokens`` 256 and ``seed`` 1234, and so must evalnb. Three layers: the YAML's settings win,
then the run's ``generation``, then lm-eval's defaults.
"""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("lm_eval")
pytest.importorskip("tenacity")

from helpers.lm_eval_data import DATASETS  # noqa: E402
from helpers.lm_eval_kit import lm_eval_task, mirror  # noqa: E402

import evalnb  # noqa: E402
from evalnb import Suite  # noqa: E402
from evalnb.providers import Model  # noqa: E402
from evalnb.testing import LocalModelServer  # noqa: E402

pytestmark = pytest.mark.usefixtures("evalnb_home")
TASKS = ["gsm8k", "nq_open", "anagrams1"]
EOS = "<|endoftext|>"  # LocalModelServer's tokenizer's eos (its /tokenizer_info)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hf")
    return {task: str(mirror(root, *DATASETS[task])) for task in TASKS}


@pytest.fixture(scope="module")
def suite(folders: dict[str, str]) -> Suite:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Suite.from_lm_eval(TASKS, num_fewshot=0, dataset_paths={DATASETS[t][0]: folders[t] for t in TASKS})


def _bodies(server: LocalModelServer, since: int = 0) -> list[dict]:
    return [r.body for r in server.requests[since:] if r.path == "/v1/completions" and not r.body.get("echo")]


def _lm_eval_bodies(server: LocalModelServer, folders: dict[str, str]) -> dict[str, dict]:
    """lm-eval's bodies keyed by the prompt text (it sends token ids; the server decodes them)."""
    from lm_eval import evaluator
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    lm = LocalCompletionsAPI(base_url=f"{server.base_url}/completions", model=server.model,
                             tokenizer_backend="remote", num_concurrent=1, max_retries=1)
    tasks = {task: lm_eval_task(task, folders[task], 0) for task in TASKS}
    evaluator.evaluate(lm=lm, task_dict=tasks, bootstrap_iters=0, verbosity="ERROR")
    out = {}
    for body in _bodies(server):
        for prompt in body["prompt"]:  # lm-eval batches one prompt per request here
            out[server.vocab.decode(prompt)] = {**body, "prompt": server.vocab.decode(prompt)}
    return out


def test_generation_bodies_equal_lm_evals_local_completions(suite, folders) -> None:
    with LocalModelServer() as server:
        theirs = _lm_eval_bodies(server, folders)
        before = len(server.requests)
        result = evalnb.run(suite, [Model(server.model, base_url=server.base_url, api="completions")])
        ours = {b["prompt"]: b for b in _bodies(server, before)}
    assert result.samples.error.isna().all()
    assert len(ours) == len(theirs) == sum(len(suite.items(t)) for t in TASKS)
    for prompt, want in theirs.items():
        got = ours[prompt]
        # lm-eval adds the tokenizer's eos to the stops (handle_stop_sequences): a server stops there anyway
        assert want["stop"][-1] == EOS
        assert got == {**want, "stop": want["stop"][:-1]}, prompt
        assert got["temperature"] == 0 and got["max_tokens"] == 256 and got["seed"] == 1234


def test_the_yaml_wins_then_the_run_then_lm_evals_defaults(suite) -> None:
    with LocalModelServer() as server:
        evalnb.run(suite, [Model(server.model, base_url=server.base_url, api="completions")],
                   generation={"temperature": 0.5, "max_output_tokens": 40, "stop": ["###"]})
        sent = _bodies(server)
    by_task = {}
    for body in sent:
        task = next(t for t in TASKS if any(i.prompt == body["prompt"] for i in suite.items(t)))
        by_task[task] = body
    assert by_task["gsm8k"]["temperature"] == 0.0  # gsm8k's YAML sets it: the task's wins
    assert by_task["gsm8k"]["stop"] == ["Question:", "</s>", "<|im_end|>"]
    assert by_task["anagrams1"]["temperature"] == 0.5  # anagrams1 sets none: the run's
    assert by_task["anagrams1"]["stop"] == ["\n"]
    assert {b["max_tokens"] for b in by_task.values()} == {40}  # no YAML sets it: the run's beats the default


def test_the_manifest_marks_the_defaults_and_the_preview_says_where_each_value_came_from(suite) -> None:
    task = suite.to_dict()["tasks"][TASKS.index("anagrams1")]
    assert task["generation"] == {"stop": ["\n"], "defaults": {"temperature": 0.0, "max_output_tokens": 256,
                                                               "seed": 1234}}
    assert Suite.from_dict(suite.to_dict()).to_dict() == suite.to_dict()
    widget = evalnb.preview(suite, "anagrams1", model=Model("m", base_url="http://127.0.0.1:9/v1", api="completions"),
                            generation={"temperature": 0.25})
    assert widget.generation_sources == {"stop": "task", "temperature": "run", "max_output_tokens": "default",
                                         "extra_body": "default"}
    assert widget.request == {"model": "m", "prompt": suite.items("anagrams1")[0].prompt, "temperature": 0.25,
                              "stop": ["\n"], "max_tokens": 256, "seed": 1234}
    assert "max_output_tokens=256 (default)" in widget.request_html.value
    assert "temperature=0.25 (run)" in widget.request_html.value
