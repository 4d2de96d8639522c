"""``multi_choice_regex``, ``majority_vote``, ``take_first_k`` and ``repeats``: lm-eval's own filter
classes and ``process_results`` are the oracle for evalnb's generated grader.

Unit level: lm-eval's ``MultiChoiceRegexFilter`` / ``MajorityVoteFilter`` against
``run_pipeline`` on tricky outputs. Task level: registry tasks that use them
(``gpqa_diamond_generative_n_shot``, ``gsm8k_cot_self_consistency``) import from a tiny local
dataset folder, and their graders score as lm-eval's filter ensembles plus ``process_results``
score the same docs and answers.
"""

from __future__ import annotations

import random

import pytest

pytest.importorskip("lm_eval")

from helpers.lm_eval_data import DATASETS  # noqa: E402
from helpers.lm_eval_kit import lm_eval_task, mirror  # noqa: E402

from evalnb import Suite  # noqa: E402
from evalnb.errors import LmEvalImportError  # noqa: E402
from evalnb.suite.lm_eval_grading import run_pipeline  # noqa: E402

pytestmark = pytest.mark.usefixtures("evalnb_home")

CHOICES = [
    ["Guilty", "Guilty of Romance", "Not guilty!", "«None»"],
    ["3.5 m/s", "3.5", "35 m/s", "It depends (on wind)"],
    ["Paris", "paris, France", "Lyon", "Nice"],
]
OUTPUTS = [
    "The answer is (B).",
    "I think (A) and then (C)",                   # group_select 0 vs -1
    "Guilty of Romance, clearly",                 # longest choice must win over its prefix
    "guilty of romance",                          # ignore_case
    "The verdict: not guilty",                    # ignore_punctuation on the choice "Not guilty!"
    "None",                                       # «None» with unicode punctuation removed
    "Answer: C",                                  # ': C' letter fallback
    "Answer:D because",
    "It depends on wind",
    "3.5",
    "nothing matches here",                       # fallback
    "",
    "PARIS, FRANCE.",
    "(E) is not a choice",
]
CONFIGS = [
    {"regex_pattern": r"(\([A-Z]\))", "group_select": -1, "ignore_case": True, "ignore_punctuation": True},  # gpqa
    {"regex_pattern": r"(\([A-Z]\))", "group_select": 0, "ignore_case": True, "ignore_punctuation": True},  # mmlu
    {"regex_pattern": r"answer is \(?([A-D])\)?", "fallback": "[none]"},
    {"regex_pattern": r"#### (\-?[0-9\.\,]+)", "regexes_to_ignore": [r",", r"\s+m/s"], "ignore_case": True},
    {"regex_pattern": r"(\((A)\))|(\((B)\))", "group_select": 0},  # tuples with empty groups
]


@pytest.mark.parametrize("config", CONFIGS, ids=range(len(CONFIGS)))
def test_multi_choice_regex_equals_lm_evals_filter(config: dict) -> None:
    from lm_eval.filters.extraction import MultiChoiceRegexFilter

    docs = [{"choices": c} for c in CHOICES for _ in OUTPUTS]
    resps = [[o] for _ in CHOICES for o in OUTPUTS]
    theirs = MultiChoiceRegexFilter(**config).apply(resps, docs)
    ours = [run_pipeline([{"function": "multi_choice_regex", **config}], r, d) for r, d in zip(resps, docs)]
    assert ours == [t[0] for t in theirs]
    assert len(set(ours)) > 3  # the outputs take different branches (regex, choice text, letter, fallback)
    # several answers for one doc: each filtered, in order
    theirs_many = MultiChoiceRegexFilter(**config).apply([OUTPUTS], [{"choices": CHOICES[0]}])
    steps = [{"function": "multi_choice_regex", **config}, {"function": "majority_vote"}]
    assert run_pipeline(steps[:1] + [{"function": "take_first_k", "k": len(OUTPUTS)}], list(OUTPUTS),
                        {"choices": CHOICES[0]}) == theirs_many[0][0]
    from lm_eval.filters.selection import MajorityVoteFilter

    assert run_pipeline(steps, list(OUTPUTS), {"choices": CHOICES[0]}) == \
        list(MajorityVoteFilter().apply(theirs_many, None))[0][0]


VOTES = [
    ["7", "8", "8", "7"],             # a tie: the first seen wins (Counter.most_common)
    ["8", "7", "7", "8"],
    ["x", "y", "z", "y"],
    ["only"],
    ["b", "a", "a", "b", "b"],
]


def test_majority_vote_and_take_first_k_equal_lm_evals_filters() -> None:
    from lm_eval.filters.selection import MajorityVoteFilter, TakeKFilter

    assert [run_pipeline([{"function": "majority_vote"}], v, {}) for v in VOTES] == \
        [r[0] for r in MajorityVoteFilter().apply(VOTES, None)]
    firsts = [v for v in VOTES if len(v) >= 2]
    assert [run_pipeline([{"function": "take_first_k", "k": 2}, {"function": "majority_vote"}], v, {})
            for v in firsts] == [r[0] for r in MajorityVoteFilter().apply(TakeKFilter(k=2).apply(firsts, None), None)]
    assert run_pipeline([{"function": "majority_vote"}], VOTES[0], {}) == "7"


def _gpqa(split: str, n: int) -> list[dict]:
    return [{"Question": f"Which {split} compound #{i} is stable?", "Correct Answer": f"Compound {i} [title] A",
             "Incorrect Answer 1": f"Compound {i} B", "Incorrect Answer 2": "Neither (really)",
             "Incorrect Answer 3": f"  Compound {i} A or B  "} for i in range(n)]


def _instances(item_row: dict, resps: list[str]):
    from lm_eval.api.instance import Instance

    return [Instance(request_type="generate_until", doc=item_row, arguments=("", {}), idx=0, resps=list(resps))]


def _oracle_scores(oracle, row: dict, resps: list[str]) -> dict[str, float]:
    """lm-eval's filter ensembles and process_results on one doc and its answers."""
    out = {}
    for ensemble in oracle._filters:  # noqa: SLF001 - lm-eval's own filter pipelines
        (inst,) = _instances(row, resps)
        ensemble.apply([inst])
        out[ensemble.name] = oracle.process_results(row, [inst.filtered_resps[ensemble.name]])["exact_match"]
    return out


def _grader(task) -> dict:
    namespace: dict = {}
    exec(compile(task.grader.source, "<grader>", "exec"), namespace)  # noqa: S102 - our generated code
    return namespace


def test_gpqa_generative_imports_and_its_multi_choice_regex_scores_as_lm_eval(tmp_path) -> None:
    folder = mirror(tmp_path, "Idavidrein/gpqa", {"gpqa_diamond": {"train": _gpqa("train", 5)}})
    suite = Suite.from_lm_eval("gpqa_diamond_generative_n_shot", num_fewshot=0,
                               dataset_paths={"Idavidrein/gpqa": str(folder)})
    task = suite.task("gpqa_diamond_generative_n_shot")
    assert [m.id for m in task.metrics] == ["exact_match.strict-match", "exact_match.flexible-extract"]
    grade = _grader(task)["grade"]
    oracle = lm_eval_task("gpqa_diamond_generative_n_shot", folder, 0)
    right = 0
    for item in suite.items("gpqa_diamond_generative_n_shot"):
        row = item.as_grader_item()
        choices = row["row"]["choices"]
        outputs = [f"The answer is {row['row']['answer']}.", f"I pick {choices[2]} here", "Answer: B",
                   f"(A) no, {row['row']['answer']}", f"{choices[0].upper()}!", "no idea", ""]
        for output in outputs:
            ours = grade({"output_text": output}, row)["scores"]
            theirs = _oracle_scores(oracle, row["row"], [output])
            assert ours == {f"exact_match.{k}": v for k, v in theirs.items()}, output
            right += theirs["flexible-extract"]
    assert right > 0


def test_gsm8k_self_consistency_repeats_map_to_epochs_and_majority_votes_as_lm_eval(tmp_path) -> None:
    path, configs = DATASETS["gsm8k"]
    folder = mirror(tmp_path, path, configs)
    with pytest.warns(UserWarning, match=r"gsm8k_cot_self_consistency.*epochs=64"):
        suite = Suite.from_lm_eval("gsm8k_cot_self_consistency", num_fewshot=0, dataset_paths={path: str(folder)})
    task = suite.task("gsm8k_cot_self_consistency")
    assert task.grader.contract == "batch" and task.metadata["lm_eval_repeats"] == 64
    assert [m.id for m in task.metrics] == ["exact_match.score-first", "exact_match.maj_64", "exact_match.maj_8"]
    grade_batch = _grader(task)["grade_batch"]
    oracle = lm_eval_task("gsm8k_cot_self_consistency", folder, 0)
    items = [i.as_grader_item() for i in suite.items("gsm8k_cot_self_consistency")]
    rng = random.Random(7)
    answers, samples = {}, []
    for item in items:
        gold = item["row"]["answer"].split("####")[-1].strip()
        pool = [f"So The answer is {gold}.", "The answer is 1,000.", "The answer is -3.", "I am not sure."]
        # the first 8: a tie between two answers, so lm-eval's tie rule decides maj@8
        first = [pool[1], pool[0], pool[0], pool[1], pool[2], pool[3], pool[3], pool[2]]
        answers[item["sample_index"]] = first + [rng.choice(pool) for _ in range(56)]
        for epoch, text in enumerate(answers[item["sample_index"]], start=1):
            samples.append({"sample_index": item["sample_index"], "epoch": epoch, "output_text": text, "item": item})
    rng.shuffle(samples)  # the store's order is not the epochs' order
    result = grade_batch(samples)
    assert set(result) == {"samples"} and len(result["samples"]) == len(samples)
    checked = 0
    for item in items:
        theirs = _oracle_scores(oracle, item["row"], answers[item["sample_index"]])
        expected = {f"exact_match.{k.replace('@', '_')}": v for k, v in theirs.items()}
        got = [entry["scores"] for s, entry in zip(samples, result["samples"]) if s["sample_index"] == item["sample_index"]]
        assert got == [expected] * 64
        checked += sum(theirs.values())
    assert checked > 0

    one_epoch = [s for s in samples if s["epoch"] == 1]
    with pytest.raises(ValueError, match=r"epochs=64"):
        grade_batch(one_epoch)


def test_repeats_that_do_not_map_are_named(tmp_path) -> None:
    path, configs = DATASETS["gsm8k"]
    folder = mirror(tmp_path, path, configs)
    task = tmp_path / "t.yaml"
    task.write_text(f"task: rep\ndataset_path: {folder}\ndataset_name: main\ntest_split: test\n"
                    "output_type: generate_until\ndoc_to_text: '{{question}}'\ndoc_to_target: '{{answer}}'\n"
                    "repeats: 2\nfilter_list:\n  - name: m\n    filter:\n      - function: take_first_k\n"
                    "        k: 3\n      - function: majority_vote\n")
    with pytest.raises(LmEvalImportError, match=r"'rep'.*take_first_k k=3 must be from 1 to repeats \(2\)"):
        Suite.from_lm_eval(task)
    task.write_text(task.read_text().replace("repeats: 2", "repeats: 0"))
    with pytest.raises(LmEvalImportError, match=r"'rep'.*repeats must be an integer from 1 to 100"):
        Suite.from_lm_eval(task)


def test_a_run_with_epochs_equal_to_repeats_majority_votes_each_items_answers(tmp_path) -> None:
    """evalnb.run on a real server: epochs=3 gives each item lm-eval's 3 answers; the batch grader's
    scores equal lm-eval's filter ensembles on the stored answers, in epoch order."""
    import json
    import re
    import threading

    import evalnb
    from evalnb.providers import Model
    from evalnb.testing import LocalModelServer

    path, configs = DATASETS["gsm8k"]
    folder = mirror(tmp_path, path, configs)
    task = tmp_path / "rep3.yaml"
    task.write_text(f"task: rep3\ndataset_path: {folder}\ndataset_name: main\ntest_split: test\n"
                    "output_type: generate_until\ndoc_to_text: '{{question}}'\n"
                    "doc_to_target: \"{{answer.split('####')[-1].strip()}}\"\nrepeats: 3\n"
                    "generation_kwargs:\n  until: ['\\n\\n']\n  do_sample: true\n  temperature: 0.7\n"
                    "filter_list:\n  - name: first\n    filter:\n      - function: regex\n"
                    "      - function: take_first\n  - name: maj\n    filter:\n      - function: regex\n"
                    "      - function: majority_vote\n      - function: take_first\n")
    with pytest.warns(UserWarning, match="epochs=3"):
        suite = Suite.from_lm_eval(task)
    calls: dict[str, int] = {}
    lock = threading.Lock()

    def answer(body: dict) -> str:
        a, b = map(int, re.search(r"Tom has (\d+) apples and buys (\d+)", json.dumps(body)).groups())
        prompt = f"{a}+{b}"
        with lock:
            n = calls[prompt] = calls.get(prompt, -1) + 1
        right = (a % 2 == 0) == (n != 1)  # even items: right, wrong, right; odd: wrong, right, wrong
        return f"#### {a + b if right else 0}"

    with LocalModelServer(answer) as server:
        result = evalnb.run(suite, [Model("m", base_url=server.base_url)], epochs=3, progress=False)
    samples = result.samples.sort_values(["sample_index", "epoch"])
    assert len(samples) == 3 * len(suite.items("rep3"))
    oracle_task = lm_eval_task_from_yaml(task)
    by_item = {i.index: i.as_grader_item()["row"] for i in suite.items("rep3")}
    per_item = []
    for index, group in samples.groupby("sample_index"):
        theirs = _oracle_scores(oracle_task, by_item[index], list(group["output_text"]))
        for key, value in theirs.items():
            assert list(group[f"exact_match.{key}"]) == [value] * 3, (index, key)
        per_item.append(theirs["maj"])
    means = result.metrics.set_index("metric")["mean"]
    assert means["exact_match.maj"] == pytest.approx(sum(per_item) / len(per_item))
    assert 0 < means["exact_match.maj"] < 1

    with LocalModelServer(answer) as server:  # too few epochs: the task's error says what to pass
        short = evalnb.run(suite, [Model("m", base_url=server.base_url)], epochs=1, progress=False, reuse=False)
    errors = set(short.metrics["error"].dropna())
    assert errors and all("repeats: 3" in e and "epochs=3" in e for e in errors), errors


def lm_eval_task_from_yaml(path):
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.tasks._yaml_loader import load_yaml

    return ConfigurableTask(config=load_yaml(str(path), resolve_func=True))
