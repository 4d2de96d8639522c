"""lm-eval is the oracle: for real registry tasks on local copies of their datasets, evalnb's
Items (prompt, target, continuations) equal the requests lm-eval builds itself, string for string.

Six shapes: gsm8k (generation, regex filters), mmlu_abstract_algebra (literal choices, include
chain, description, first_n few-shot), arc_easy (choices from a field), hellaswag
(process_docs !function), boolq (yes/no), truthfulqa_mc1 (Jinja with {% set %}).
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("lm_eval")

from helpers.lm_eval_data import DATASETS  # noqa: E402
from helpers.lm_eval_kit import lm_eval_requests, mirror  # noqa: E402

from evalnb import Suite  # noqa: E402

pytestmark = pytest.mark.usefixtures("evalnb_home")
TASKS = [t for t in DATASETS if t not in ("lambada_openai", "pile_arxiv")]  # those two: test_run_loglikelihood.py


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hf")
    return {task: str(mirror(root, path, configs)) for task, (path, configs) in DATASETS.items()}


def _suite(task: str, folders: dict[str, str], shots: int) -> Suite:
    return Suite.from_lm_eval(task, num_fewshot=shots, dataset_paths={DATASETS[task][0]: folders[task]})


@pytest.mark.parametrize("task", TASKS)
def test_zero_shot_prompts_targets_continuations_equal_lm_evals(task: str, folders: dict[str, str]) -> None:
    suite = _suite(task, folders, 0)
    items = suite.items(task)
    oracle = lm_eval_requests(task, folders[task], 0)
    assert len(items) == len(oracle) > 0
    for item, want in zip(items, oracle):
        assert item.prompt == want["context"]
        if want["continuations"]:
            assert list(item.continuations) == want["continuations"]
            gold = want["target"]
            gold = want["choices"].index(gold) if isinstance(gold, str) else gold
            assert item.target == str(gold)
        else:
            assert item.continuations is None
            gold = want["target"]  # several golds (triviaqa's aliases) are a JSON list, as templates render lists
            assert item.target == (json.dumps(gold, ensure_ascii=False) if isinstance(gold, list) else str(gold))


# first_n (mmlu) is exact; for the default sampler the examples differ, so those tasks check
# that each example is a pool doc rendered exactly as lm-eval renders it.
@pytest.mark.parametrize("task", ["mmlu_abstract_algebra"])
@pytest.mark.parametrize("shots", [1, 3])
def test_first_n_fewshot_prompts_equal_lm_evals(task: str, shots: int, folders: dict[str, str]) -> None:
    items = _suite(task, folders, shots).items(task)
    oracle = lm_eval_requests(task, folders[task], shots)
    assert [item.prompt for item in items] == [want["context"] for want in oracle]
    assert items[0].description.startswith("The following are multiple choice questions")
    assert len(items[0].fewshot) == shots


@pytest.mark.parametrize("task", ["arc_easy", "hellaswag", "boolq", "gsm8k"])
def test_default_sampler_examples_render_as_lm_eval_renders_them(task: str, folders: dict[str, str]) -> None:
    from helpers.lm_eval_kit import lm_eval_task

    shots = 2
    items = _suite(task, folders, shots).items(task)
    oracle = lm_eval_requests(task, folders[task], 0)
    lm = lm_eval_task(task, folders[task], shots)
    # lm-eval's own rendering of every pool doc as a one-doc few-shot block
    rendered = set()
    for doc in lm.sampler.df:
        block = "".join(m.to_text() for m in lm.build_qa_turn(
            q=lm.doc_to_text(doc, lm.fewshot_cfg.doc_to_text),
            c=lm.doc_to_choice(doc, lm.fewshot_cfg.doc_to_choice) if lm.fewshot_cfg.doc_to_choice else None,
            a=lm.doc_to_target(doc, lm.fewshot_cfg.doc_to_target),
            tgt_delim=lm.fewshot_cfg.target_delimiter, few_delim=lm.fewshot_cfg.fewshot_delimiter))
        rendered.add(block)
    for item, want in zip(items, oracle):
        texts = [shot.text for shot in item.fewshot]
        assert len(texts) == shots and len({s.row_index for s in item.fewshot}) == shots
        assert all(text in rendered for text in texts)
        assert item.prompt == item.description + "".join(texts) + want["context"][len(item.description):]
    # deterministic: the same examples on a second import
    again = _suite(task, folders, shots).items(task)
    assert [i.prompt for i in again] == [i.prompt for i in items]


def test_suite_round_trips_and_carries_the_hook_source(folders: dict[str, str]) -> None:
    suite = _suite("hellaswag", folders, 0)
    assert Suite.from_dict(suite.to_dict()) == suite
    task = suite.task("hellaswag")
    assert "def process_docs(dataset" in task.preprocess.source  # hellaswag's utils.py, carried in
    assert task.loglikelihood is not None and task.loglikelihood.type == "multiple_choice"
    assert [m.id for m in task.metrics] == ["acc", "acc_norm"]
    assert suite.validate() == []


@pytest.mark.parametrize("shots", [0, 3])
def test_inline_fewshot_samples_equal_lm_evals(shots: int, folders: dict[str, str]) -> None:
    """gsm8k_cot writes its examples into the config (fewshot_config.samples, first_n)."""
    suite = Suite.from_lm_eval("gsm8k_cot", num_fewshot=shots, dataset_paths={DATASETS["gsm8k"][0]: folders["gsm8k"]})
    items = suite.items("gsm8k_cot")
    oracle = lm_eval_requests("gsm8k_cot", folders["gsm8k"], shots)
    assert [item.prompt for item in items] == [want["context"] for want in oracle]
    assert [item.target for item in items] == [str(want["target"]) for want in oracle]
    if shots:
        assert items[0].prompt.startswith("Q: There are 15 trees in the grove.")
