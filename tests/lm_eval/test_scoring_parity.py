"""Scores equal lm-eval's own: the generated grader against lm-eval's process_results and filters.

Multiple choice: log-likelihoods come from a real /v1/completions server (LocalModelServer,
whose log-probabilities are a known function of the tokens) through ModelClient; lm-eval's
``process_results`` gets the same numbers; acc and acc_norm agree, and both agree with the
argmax worked out here from first principles. Generation: lm-eval's gsm8k filter pipelines
and exact_match run on the same outputs as evalnb's grader.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("lm_eval")

from helpers.lm_eval_data import DATASETS  # noqa: E402
from helpers.lm_eval_kit import lm_eval_task, mirror  # noqa: E402

from evalnb import Suite  # noqa: E402
from evalnb.providers import Model, ModelClient  # noqa: E402
from evalnb.testing import LocalModelServer  # noqa: E402

pytestmark = pytest.mark.usefixtures("evalnb_home")


def known(before: str, token: str) -> float:
    """Longer tokens are less likely; a word with an 'e' is a little likelier (so choices differ)."""
    return -(len(token) - 0.75 * token.count("e")) - 0.001 * len(before)


def grader(task) -> dict:
    """The task's grader, loaded from the manifest's own source."""
    namespace: dict = {}
    exec(compile(task.grader.source, "<grader>", "exec"), namespace)  # noqa: S102 - our generated code
    return namespace


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hf")
    return {task: str(mirror(root, path, configs)) for task, (path, configs) in DATASETS.items()}


@pytest.mark.parametrize("task_name", ["arc_easy", "hellaswag", "truthfulqa_mc1"])
def test_acc_and_acc_norm_equal_lm_evals_process_results(task_name: str, folders: dict[str, str]) -> None:
    suite = Suite.from_lm_eval(task_name, num_fewshot=0, dataset_paths={DATASETS[task_name][0]: folders[task_name]})
    task = suite.task(task_name)
    items = suite.items(task_name)
    grade = grader(task)["grade"]
    oracle = lm_eval_task(task_name, folders[task_name], 0)
    docs = list(oracle.eval_docs)

    async def score_all(server):
        async with ModelClient(Model("m", base_url=server.base_url, api="completions")) as client:
            return [await client.loglikelihoods([(item.prompt, c) for c in item.continuations]) for item in items]

    with LocalModelServer(token_logprobs=known) as server:
        results = asyncio.run(score_all(server))
        assert server.calls("/v1/completions") == len(items)  # one call per item, all its choices
    seen = set()
    for item, doc, lls in zip(items, docs, results):
        ours = grade({"loglikelihoods": [r.logprob for r in lls], "is_greedy": [r.is_greedy for r in lls]},
                     item.as_grader_item())["scores"]
        theirs = oracle.process_results(doc, [(r.logprob, r.is_greedy) for r in lls])
        assert ours["acc"] == theirs["acc"]
        if "acc_norm" in theirs:
            assert ours["acc_norm"] == theirs["acc_norm"]
        # first principles: argmax of the summed logprobs (first on ties) vs the gold index
        choices = item.row["lm_eval"]["choices"]
        sums = [sum(known(item.prompt + c[:k], t) for t, k in _tokens(item.prompt, c)) for c in item.continuations]
        assert [r.logprob for r in lls] == pytest.approx(sums)
        best = max(range(len(sums)), key=lambda i: (sums[i], -i))
        best_norm = max(range(len(sums)), key=lambda i: (sums[i] / len(choices[i]), -i))
        assert ours["acc"] == float(best == int(item.target))
        assert ours.get("acc_norm", float(best_norm == int(item.target))) == float(best_norm == int(item.target))
        seen.add(ours["acc"])
    assert seen == {0.0, 1.0} or task_name == "truthfulqa_mc1"  # the data has right and wrong answers


def _tokens(prompt: str, continuation: str) -> list[tuple[str, int]]:
    """The continuation's tokens (as the server splits prompt + continuation) and where they start in it."""
    from evalnb.testing._logprobs import tokenize

    full = prompt + continuation
    pieces = tokenize(full)
    out = []
    for j, (token, offset) in enumerate(pieces):
        end = pieces[j + 1][1] if j + 1 < len(pieces) else len(full)
        if end > len(prompt):
            out.append((token, offset - len(prompt)))
    return out


OUTPUTS = [
    "He has 14 apples.\n#### 14",        # strict and flexible
    "The answer is $1,234.",             # flexible only (after regexes_to_ignore)
    "I think 3 or maybe 4",              # flexible picks the last number
    "#### 4\n\nQuestion: next",
    "no idea",                            # [invalid] for strict
    "The total is 2. So #### 2",
]


def test_gsm8k_filters_and_exact_match_equal_lm_evals(folders: dict[str, str]) -> None:
    suite = Suite.from_lm_eval("gsm8k", num_fewshot=0, dataset_paths={DATASETS["gsm8k"][0]: folders["gsm8k"]})
    task = suite.task("gsm8k")
    grade = grader(task)["grade"]
    items = suite.items("gsm8k")
    oracle = lm_eval_task("gsm8k", folders["gsm8k"], 0)
    oracle.build_all_requests()
    instances = oracle.instances
    checked = 0
    for output in OUTPUTS:
        for inst in instances:
            inst.resps = [output]
            inst.filtered_resps = {}
        oracle.apply_filters()
        for inst, item in zip(instances, items):
            ours = grade({"output_text": output}, item.as_grader_item())["scores"]
            for key in ("strict-match", "flexible-extract"):
                theirs = oracle.process_results(inst.doc, [inst.filtered_resps[key]])
                assert ours[f"exact_match.{key}"] == theirs["exact_match"], (output, key)
                checked += theirs["exact_match"]
    assert checked > 0  # some outputs were right, so the comparison is not all zeros


def test_triviaqa_multiple_targets_and_remove_whitespace_equal_lm_evals(folders: dict[str, str]) -> None:
    suite = Suite.from_lm_eval("triviaqa", dataset_paths={DATASETS["triviaqa"][0]: folders["triviaqa"]})
    task = suite.task("triviaqa")
    assert [m.id for m in task.metrics] == ["exact_match.remove_whitespace"]
    grade = grader(task)["grade"]
    items = suite.items("triviaqa")
    oracle = lm_eval_task("triviaqa", folders["triviaqa"], 0)
    oracle.build_all_requests()
    right = 0
    for output in ["  city 1 ", "C2", "Paris France", "paris, france!", "nowhere", "City 3."]:
        for inst in oracle.instances:
            inst.resps = [output]
            inst.filtered_resps = {}
        oracle.apply_filters()
        for inst, item in zip(oracle.instances, items):
            ours = grade({"output_text": output}, item.as_grader_item())["scores"]["exact_match.remove_whitespace"]
            theirs = oracle.process_results(inst.doc, [inst.filtered_resps["remove_whitespace"]])["exact_match"]
            assert ours == theirs, (output, item.target)
            right += theirs
    assert right > 0
