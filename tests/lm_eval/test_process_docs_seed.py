"""A ``process_docs`` that shuffles gives lm-eval's prompts and gold, the same on every run.

lm-eval's ``simple_evaluate`` seeds ``random`` (0) and ``numpy.random`` (1234) before it builds
tasks, so leaderboard_gpqa_* / gpqa, whose ``process_docs`` shuffles each question's answers,
get the same order every time. The imported task's sandboxed preprocessor seeds the same way.
The oracle is lm-eval's own task building (``TaskManager``/``get_task_dict``) on the same folder
after those two seeds; the task is modelled on leaderboard gpqa's ``utils.py``, plus a numpy draw.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

from helpers.lm_eval_kit import mirror  # noqa: E402

from evalnb import Suite  # noqa: E402

pytestmark = pytest.mark.usefixtures("evalnb_home")

UTILS = '''import random
import numpy as np


def process_docs(dataset):
    def _process_doc(doc):
        choices = [doc["Incorrect Answer 1"], doc["Incorrect Answer 2"], doc["Incorrect Answer 3"], doc["Correct Answer"]]
        random.shuffle(choices)
        return {"choice1": choices[0], "choice2": choices[1], "choice3": choices[2], "choice4": choices[3],
                "answer": f"({'ABCD'[choices.index(doc['Correct Answer'])]})", "salt": str(int(np.random.randint(0, 1000)))}
    return dataset.map(_process_doc)
'''


CHOICES = ["(A)", "(B)", "(C)", "(D)"]


def _task(root: Path) -> Path:
    rows = [{"Question": f"Which is item {i}?", "Incorrect Answer 1": f"wrong a{i}", "Incorrect Answer 2": f"wrong b{i}",
             "Incorrect Answer 3": f"wrong c{i}", "Correct Answer": f"right {i}"} for i in range(8)]
    folder = root / "task"
    folder.mkdir()
    data = mirror(folder / "hf", "shuffled_mc", {None: {"train": rows}})  # a local dataset stays in the task folder
    (folder / "utils.py").write_text(UTILS)
    (folder / "shuffled_mc.yaml").write_text(
        f"task: shuffled_mc\ndataset_path: {data}\ntest_split: train\noutput_type: multiple_choice\n"
        "process_docs: !function utils.process_docs\n"
        'doc_to_text: "Q: {{Question}} {{salt}}\\n(A) {{choice1}}\\n(B) {{choice2}}\\n(C) {{choice3}}\\n(D) {{choice4}}\\nAnswer:"\n'
        'doc_to_choice: ["(A)", "(B)", "(C)", "(D)"]\ndoc_to_target: answer\nmetric_list:\n  - metric: acc\n')
    return folder


def _lm_eval(folder: Path) -> list[tuple[str, int]]:
    """Per doc: lm-eval's context and gold index, seeded as simple_evaluate seeds."""
    import numpy as np
    from lm_eval.tasks import TaskManager, get_task_dict

    random.seed(0)
    np.random.seed(1234)
    task = get_task_dict(["shuffled_mc"], TaskManager(include_path=str(folder)))["shuffled_mc"]
    task.build_all_requests()
    seen: dict[int, tuple[str, int]] = {}
    for inst in task.instances:
        seen.setdefault(inst.doc_id, (inst.arguments[0], CHOICES.index(task.doc_to_target(inst.doc))))
    return [seen[i] for i in sorted(seen)]


def test_a_shuffling_process_docs_gives_lm_evals_prompts_and_gold_on_every_run(tmp_path: Path) -> None:
    folder = _task(tmp_path)
    want = _lm_eval(folder)
    random.seed(99)  # whatever state the caller's generators are in
    runs = [[(i.prompt, i.target) for i in Suite.from_lm_eval(folder / "shuffled_mc.yaml").items("shuffled_mc")]
            for _ in range(2)]
    assert len(want) == 8 and len({gold for _, gold in want}) > 1  # the shuffle moved the gold around
    assert runs[0] == runs[1]
    assert [prompt for prompt, _ in runs[0]] == [prompt for prompt, _ in want]
    assert [int(gold) for _, gold in runs[0]] == [gold for _, gold in want]
