"""The metrics lm-eval tasks use, computed as lm-eval computes them: the same run on one
LocalModelServer through lm-eval's own `local-completions` (its evaluator: process_results,
filters, aggregations) and through evalnb give the same task metrics.

- wmt16-en-de: corpus-level ``bleu``, ``ter`` and ``chrf`` (sacrebleu) over generated text;
- truthfulqa_gen: a custom ``process_results`` (sacrebleu and rouge-score, ``bleu_max``,
  ``rouge1_acc``...), run in the sandbox from the carried ``utils.py``;
- a local multiple-choice task with ``f1``, ``mcc``, ``brier_score`` and a ``!function``
  aggregation (a weighted F1 from its own utils.py) over scored log-likelihoods.
"""

from __future__ import annotations

import hashlib
import warnings

import pytest

pytest.importorskip("lm_eval")
pytest.importorskip("tenacity")
pytest.importorskip("sacrebleu")
pytest.importorskip("rouge_score")
pytest.importorskip("sklearn")

from helpers.lm_eval_data import EN, QUESTIONS, truthfulqa_gen, wmt16  # noqa: E402
from helpers.lm_eval_kit import lm_eval_task, mirror  # noqa: E402

import evalnb  # noqa: E402
from evalnb import Suite  # noqa: E402
from evalnb.providers import Model  # noqa: E402
from evalnb.testing import LocalModelServer  # noqa: E402

pytestmark = pytest.mark.usefixtures("evalnb_home")

# what the stand-in model answers: exact, close and wrong translations
ANSWERS = [" Das Haus ist klein.", " Ich mag Tee sehr.", " Wo ist Bahnhof", " Der Hund schläft.",
           " Wir treffen uns morgen um zwölf.", " Dieses Buch ist gut."]
def _run_both(tasks: dict, suite: Suite, responder=None, **server_args):
    from lm_eval import evaluator
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    with LocalModelServer(responder, **server_args) as server:
        lm = LocalCompletionsAPI(base_url=f"{server.base_url}/completions", model=server.model,
                                 tokenizer_backend="remote", num_concurrent=1, max_retries=1)
        oracle = evaluator.evaluate(lm=lm, task_dict=tasks, log_samples=True, bootstrap_iters=0, verbosity="ERROR")
        result = evalnb.run(suite, [Model(server.model, base_url=server.base_url, api="completions")])
    assert result.samples.error.isna().all(), result.samples.error.dropna().tolist()
    return oracle, result


def _metrics(result, task: str) -> dict[str, float]:
    rows = result.metrics[result.metrics.task_id == task]
    return dict(zip(rows.metric, rows["mean"]))


def test_corpus_bleu_ter_chrf_equal_lm_evals(tmp_path) -> None:
    rows = wmt16("de-en")
    folder = str(mirror(tmp_path, "metrics/wmt16", {"de-en": {"train": rows[:2], "validation": rows[:2],
                                                                "test": rows}}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        suite = Suite.from_lm_eval("wmt16-en-de", num_fewshot=0, dataset_paths={"wmt/wmt16": folder})
    assert suite.task("wmt16-en-de").grader.contract == "batch"
    oracle, result = _run_both({"wmt16-en-de": lm_eval_task("wmt16-en-de", folder, 0)}, suite,
                               {en: de for en, de in zip(EN, ANSWERS)})
    ours, theirs = _metrics(result, "wmt16-en-de"), oracle["results"]["wmt16-en-de"]
    assert set(ours) == {"bleu", "ter", "chrf"}
    for name in ("bleu", "ter", "chrf"):
        assert ours[name] == theirs[f"{name},none"], name
    assert 0 < ours["bleu"] < 100 and ours["ter"] > 0  # neither all right nor all wrong


def test_a_custom_process_results_with_bleu_and_rouge_equals_lm_evals(tmp_path) -> None:
    folder = str(mirror(tmp_path, "metrics/truthful_qa", {"generation": {"validation": truthfulqa_gen(4)}}))
    suite = Suite.from_lm_eval("truthfulqa_gen", dataset_paths={"truthfulqa/truthful_qa": folder})
    answers = {"sky": " The sky is blue.", "spider": " Six legs.", "Hamlet": " I have no comment.", "2+2": " Four"}
    oracle, result = _run_both({"truthfulqa_gen": lm_eval_task("truthfulqa_gen", folder, 0)}, suite,
                               {f"Q: {q}": a for q, a in zip(QUESTIONS, answers.values())})
    ours, theirs = _metrics(result, "truthfulqa_gen"), oracle["results"]["truthfulqa_gen"]
    names = [m.id for m in suite.task("truthfulqa_gen").metrics]
    assert len(names) == 12 and set(ours) == set(names)
    for name in names:
        assert ours[name] == pytest.approx(theirs[f"{name},none"], abs=1e-12), name
    assert 0 < ours["rouge1_acc"] < 1 and 0 < ours["bleu_acc"] < 1


WORDS = ["rain", "sun", "snow", "fog", "wind", "hail", "mist"]
UTILS = '''
from sklearn.metrics import f1_score


def weighted_f1_score(items):
    golds, preds = zip(*items)
    return f1_score(golds, preds, average="weighted")
'''


def model(before: str, token: str) -> float:
    digest = hashlib.blake2b(f"{before[-48:]}\x00{token}".encode(), digest_size=4).digest()
    return -(int.from_bytes(digest, "little") % 4001) / 1000


YAML = """task: {task}
dataset_path: local/binary
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{sentence}}}}\\nQuestion: Is it fine?\\nAnswer:"
doc_to_choice: ["no", "yes"]
doc_to_target: label
metric_list:
{metrics}"""


def test_f1_mcc_brier_and_a_function_aggregation_equal_lm_evals(tmp_path) -> None:
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.tasks._yaml_loader import load_yaml

    rows = [{"sentence": f"Sentence {i} says {WORDS[i % 7]}.", "label": i % 2} for i in range(20)]
    folder = mirror(tmp_path, "metrics/binary", {None: {"test": rows}})
    (tmp_path / "utils.py").write_text(UTILS, encoding="utf-8")
    metrics = {"binary_builtin": "  - metric: acc\n  - metric: f1\n  - metric: mcc\n  - metric: brier_score\n",
               "binary_weighted": "  - metric: f1\n    aggregation: !function utils.weighted_f1_score\n"}
    oracle_tasks = {}
    for task, listed in metrics.items():
        (tmp_path / f"{task}.yaml").write_text(YAML.format(task=task, metrics=listed), encoding="utf-8")
        loaded = load_yaml(str(tmp_path / f"{task}.yaml"), resolve_func=True)
        oracle_tasks[task] = ConfigurableTask(config={**loaded, "dataset_path": str(folder)})
    suite = Suite.from_lm_eval([str(tmp_path / f"{t}.yaml") for t in metrics], dataset_paths={"local/binary": str(folder)})
    oracle, result = _run_both(oracle_tasks, suite, token_logprobs=model)
    ours, theirs = _metrics(result, "binary_builtin"), oracle["results"]["binary_builtin"]
    assert set(ours) == {"acc", "f1", "mcc", "brier_score"}
    for name in ours:
        assert ours[name] == pytest.approx(theirs[f"{name},none"], abs=1e-12), name
    assert 0 < ours["f1"] < 1 and ours["brier_score"] > 0 and ours["mcc"] != 0
    weighted = _metrics(result, "binary_weighted")["f1"]
    assert weighted == pytest.approx(oracle["results"]["binary_weighted"]["f1,none"], abs=1e-12)
    assert weighted != ours["f1"]  # the task's own aggregation ran, not the built-in one


@pytest.mark.parametrize(("metrics", "message"), [
    ("  - metric: f1\n    aggregation: mean\n", r"metric 'f1' gives a \(gold, answer\) pair per doc, which aggregation 'mean'"),
    ("  - metric: rouge\n", r"metric 'rouge' is not supported for multiple_choice"),
    ("  - metric: acc\n    aggregation: geometric\n", r"metric 'acc': aggregation 'geometric' is not supported"),
])
def test_a_metric_lm_eval_cannot_aggregate_is_refused_at_import(tmp_path, metrics: str, message: str) -> None:
    from evalnb.errors import LmEvalImportError

    (tmp_path / "bad.yaml").write_text(YAML.format(task="bad", metrics=metrics), encoding="utf-8")
    with pytest.raises(LmEvalImportError, match=r"lm-eval task 'bad': " + message):
        Suite.from_lm_eval(str(tmp_path / "bad.yaml"))
