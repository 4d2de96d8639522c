"""lm-eval parity at scale: registry tasks of every shape, run by lm-eval's own
``local-completions`` model and by evalnb against one server, compared per task.

32 registry tasks, 0-shot, on small local datasets in each task's real schema (the row makers
in ``tests/helpers/lm_eval_data.py``): multiple choice (arc, mmlu subtasks, hellaswag, boolq,
piqa, sciq, openbookqa, copa, truthfulqa_mc1), empty contexts (blimp), multiple inputs
(winogrande), contexts ending in whitespace (lambada_openai with double spaces), perplexity
(lambada, pile_arxiv), generation with and without settings (gsm8k, nq_open, triviaqa, the
unscramble tasks), and the metrics of part 2 (cola's ``mcc``, wmt16's corpus ``bleu``/``ter``/
``chrf``, truthfulqa_gen's ``process_results`` with sacrebleu and rouge-score).

The server is a ``LocalModelServer(bpe_spaces=True)`` in this process (log-probabilities a
known function of the text, whitespace split as GPT-2 splits it; generation answers: each
item's gold for about half the prompts, a wrong answer for the rest), or, with ``--base-url``,
a real vLLM server (``../shared/realserver``; start it with ``--enable-tokenizer-info-endpoint``).
Per task it reports: docs; log-likelihoods equal (``==``) and is_greedy equal of all choices;
generation request bodies equal (lm-eval's stop list minus the eos it appends); and lm-eval's
metrics (``name,filter``) equal to evalnb's (within 1e-9). Run by hand:

    PYTHONPATH=. /work/main/.venv/bin/python benchmarks/lm_eval_parity_registry.py [--base-url URL --model M]

The table goes in benchmarks/README.md ("lm-eval parity at scale").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

for _var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(_var, "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers import lm_eval_data as data  # noqa: E402


def _mmlu(name: str) -> tuple:
    return ("cais/mmlu", {name: {"dev": data._mmlu("dev", 5), "test": data._mmlu("test", 5)}})


def _arc(config: str) -> tuple:
    return ("allenai/ai2_arc", {config: {"train": data._arc("train", 3), "test": data._arc("test", 5)}})


# task -> (shape, dataset_path, {config: {split: rows}})
SAMPLE = {
    "arc_easy": ("choice", *_arc("ARC-Easy")),
    "arc_challenge": ("choice", *_arc("ARC-Challenge")),
    "mmlu_abstract_algebra": ("choice", *_mmlu("abstract_algebra")),
    "mmlu_anatomy": ("choice", *_mmlu("anatomy")),
    "mmlu_astronomy": ("choice", *_mmlu("astronomy")),
    "hellaswag": ("choice", *data.DATASETS["hellaswag"]),
    "boolq": ("choice", *data.DATASETS["boolq"]),
    "truthfulqa_mc1": ("choice", *data.DATASETS["truthfulqa_mc1"]),
    "piqa": ("choice", "baber/piqa", {None: {"train": data.piqa(3), "validation": data.piqa(6)}}),
    "sciq": ("choice, empty support", "allenai/sciq", {None: {"train": data.sciq(2), "test": data.sciq(6)}}),
    "openbookqa": ("choice", "allenai/openbookqa", {"main": {"train": data.openbookqa(2),
                                                              "test": data.openbookqa(6)}}),
    "copa": ("choice, !function", "aps/super_glue", {"copa": {"train": data.copa(2), "validation": data.copa(6)}}),
    "blimp_adjunct_island": ("empty context", "nyu-mll/blimp", {"adjunct_island": {"train": data.blimp(6)}}),
    "blimp_anaphor_gender_agreement": ("empty context", "nyu-mll/blimp",
                                       {"anaphor_gender_agreement": {"train": data.blimp(5)}}),
    "blimp_wh_island": ("empty context", "nyu-mll/blimp", {"wh_island": {"train": data.blimp(5)}}),
    "winogrande": ("multiple input", "allenai/winogrande",
                   {"winogrande_xl": {"train": data.winogrande("train", 3),
                                      "validation": data.winogrande("validation", 6)}}),
    "lambada_openai": ("trailing space, perplexity", "EleutherAI/lambada_openai",
                       {"default": {"test": data.spaced_lambada(6)}}),
    "lambada_standard": ("perplexity", "cimec/lambada", {None: {"validation": data._lambada("v", 3),
                                                                "test": data._lambada("test", 6)}}),
    "pile_arxiv": ("rolling", *data.DATASETS["pile_arxiv"]),
    "cola": ("mcc", "nyu-mll/glue", {"cola": {"train": data.cola(3), "validation": data.cola(9)}}),
    "gsm8k": ("generation, regex filters", *data.DATASETS["gsm8k"]),
    "nq_open": ("generation, no token limit", *data.DATASETS["nq_open"]),
    "triviaqa": ("generation, several golds", *data.DATASETS["triviaqa"]),
    "anagrams1": ("generation, until only", *data.DATASETS["anagrams1"]),
    "anagrams2": ("generation, until only", "EleutherAI/unscramble",
                  {"mid_word_2_anagrams": {"validation": data.unscramble(5)}}),
    "cycle_letters": ("generation, until only", "EleutherAI/unscramble",
                      {"cycle_letters_in_word": {"validation": data.unscramble(5)}}),
    "random_insertion": ("generation, until only", "EleutherAI/unscramble",
                         {"random_insertion_in_word": {"validation": data.unscramble(5)}}),
    "reversed_words": ("generation, until only", "EleutherAI/unscramble",
                       {"reversed_words": {"validation": data.unscramble(5)}}),
    "wmt16-en-de": ("bleu/ter/chrf", "wmt/wmt16", {"de-en": {"train": data.wmt16("de-en")[:2],
                                                             "validation": data.wmt16("de-en")[:2],
                                                             "test": data.wmt16("de-en")}}),
    "wmt16-de-en": ("bleu/ter/chrf", "wmt/wmt16", {"de-en": {"train": data.wmt16("de-en")[:2],
                                                             "validation": data.wmt16("de-en")[:2],
                                                             "test": data.wmt16("de-en")}}),
    "wmt16-ro-en": ("bleu/ter/chrf", "wmt/wmt16", {"ro-en": {"train": data.wmt16("ro-en")[:2],
                                                             "validation": data.wmt16("ro-en")[:2],
                                                             "test": data.wmt16("ro-en")}}),
    "truthfulqa_gen": ("process_results (bleu, rouge)", "truthfulqa/truthful_qa",
                       {"generation": {"validation": data.truthfulqa_gen(4)}}),
}


def model(before: str, token: str) -> float:
    digest = hashlib.blake2b(f"{before[-48:]}\x00{token}".encode(), digest_size=4).digest()
    return -(int.from_bytes(digest, "little") % 4001) / 1000


def answers_for(suite) -> dict[str, str]:
    """prompt -> the stand-in model's answer: the gold for about half the prompts, else a wrong one."""
    out = {}
    for task in suite.tasks:
        if task.loglikelihood is not None:
            continue
        for item in suite.items(task.id):
            gold = item.row.get("lm_eval", {}).get("gold", item.target)
            gold = gold[0] if isinstance(gold, list) else gold
            right = int(hashlib.sha256(item.prompt.encode()).hexdigest(), 16) % 2 == 0
            text = str(gold) if right else "I have no comment."
            out[item.prompt] = text if text.startswith(" ") else " " + text
    return out


def run(args) -> list[dict]:
    import evalnb
    from evalnb.testing import LocalModelServer
    from helpers.lm_eval_kit import lm_eval_task, mirror
    from lm_eval import evaluator
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    tasks = list(SAMPLE)
    root = Path(tempfile.mkdtemp(prefix="lm-eval-parity-"))
    os.environ["HF_DATASETS_CACHE"] = str(root / "hf-cache")  # datasets caches local folders by name
    os.environ.setdefault("EVALNB_HOME", str(root / "home"))
    folders = {t: str(mirror(root, f"{t}/{SAMPLE[t][1]}", SAMPLE[t][2])) for t in tasks}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        suites = {t: evalnb.Suite.from_lm_eval(t, num_fewshot=0, dataset_paths={SAMPLE[t][1]: folders[t]})
                  for t in tasks}
        suite = evalnb.Suite.from_dict({"tasks": [s.to_dict()["tasks"][0] for s in suites.values()]})
    answers = answers_for(suite)
    holder: dict = {}

    def respond(body: dict) -> str | None:
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            prompt = prompt[0]
        if isinstance(prompt, list):  # lm-eval's token ids
            prompt = holder["server"].vocab.decode(prompt)
        return answers.get(prompt, " 42")

    server = None if args.base_url else LocalModelServer(respond, token_logprobs=model, bpe_spaces=True)
    if server is not None:
        server.start()
        holder["server"] = server
    base, name = (server.base_url, server.model) if server else (args.base_url.rstrip("/"), args.model)
    try:
        lm = LocalCompletionsAPI(base_url=f"{base}/completions", model=name, tokenizer_backend="remote",
                                 num_concurrent=1, max_retries=2)
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            oracle = evaluator.evaluate(lm=lm, task_dict={t: lm_eval_task(t, folders[t], 0) for t in tasks},
                                        log_samples=True, bootstrap_iters=0, verbosity="ERROR")
        lm_s = time.perf_counter() - started
        before = len(server.requests) if server else 0
        started = time.perf_counter()
        result = evalnb.run(suite, [evalnb.Model(name, base_url=base, api="completions")], concurrency=4)
        ours_s = time.perf_counter() - started
        bodies = _bodies(server, before) if server else None
    finally:
        if server is not None:
            server.stop()
    print(f"lm-eval: {lm_s:.1f} s, evalnb: {ours_s:.1f} s")
    return [_compare(t, suite, result, oracle, bodies) for t in tasks]


def _bodies(server, before: int) -> tuple[dict, dict]:
    theirs, ours = {}, {}
    for i, r in enumerate(server.requests):
        if r.path != "/v1/completions" or r.body.get("echo"):
            continue
        prompt = r.body["prompt"]
        if i < before:
            for p in prompt:
                text = server.vocab.decode(p) if isinstance(p, list) else p
                stop = list(r.body.get("stop") or [])
                theirs[text] = {**r.body, "prompt": text, "stop": stop[:-1] if stop[-1:] == ["<|endoftext|>"] else stop}
        else:
            ours[prompt] = r.body
    return theirs, ours


def _compare(task: str, suite, result, oracle: dict, bodies) -> dict:
    samples = result.samples[result.samples.task_id == task].sort_values("sample_index")
    firsts = {}  # lm-eval logs a doc once per filter pipeline: one per doc
    for entry in oracle["samples"][task]:
        firsts.setdefault(entry["doc_id"], entry)
    theirs = [firsts[k] for k in sorted(firsts)]
    row = {"task": task, "shape": SAMPLE[task][0], "docs": len(theirs), "evalnb_docs": len(samples),
           "errors": int(samples.error.notna().sum())}
    ll = ll_equal = greedy_equal = gen = gen_equal = 0
    for (_, sample), want in zip(samples.iterrows(), theirs):
        if suite.task(task).loglikelihood is not None:
            got = json.loads(sample.output_text or "{}")
            resps = want["filtered_resps"] if isinstance(want["filtered_resps"][0], (list, tuple)) else \
                [(r, None) for r in want["filtered_resps"]]
            for (lp, greedy), ours, og in zip(resps, got.get("loglikelihoods", []), got.get("is_greedy", [])):
                ll += 1
                ll_equal += ours == lp
                greedy_equal += greedy is None or og == greedy
        elif bodies is not None:
            gen += 1
            mine = bodies[1].get(suite.items(task)[int(sample.sample_index)].prompt)
            gen_equal += mine is not None and mine == bodies[0].get(mine["prompt"])
    row.update(choices=ll, loglik_equal=ll_equal, greedy_equal=greedy_equal, bodies=gen, bodies_equal=gen_equal)
    metrics = result.metrics[result.metrics.task_id == task].set_index("metric")["mean"]
    compared = equal = 0
    for key, value in oracle["results"][task].items():
        if "," not in key or "_stderr" in key or not isinstance(value, (int, float)):
            continue
        name, filt = key.split(",", 1)
        ours_key = name if filt == "none" else f"{name}.{filt}"
        ours_key = "".join(c if c.isalnum() or c in "_.-" else "_" for c in ours_key)
        compared += 1
        if ours_key in metrics.index and abs(float(metrics[ours_key]) - float(value)) <= 1e-9:
            equal += 1
        if len(row.setdefault("values", [])) < 2:
            row["values"].append(f"{ours_key} {float(value):.4g}")
    row.update(metrics=compared, metrics_equal=equal)
    row["values"] = ", ".join(row.get("values", []))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="a real vLLM server's /v1 URL (default: a LocalModelServer here)")
    parser.add_argument("--model", default="tiny-arith")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    rows = run(args)
    head = ("task", "shape", "docs", "choices", "loglik_equal", "greedy_equal", "bodies", "bodies_equal",
            "metrics", "metrics_equal", "errors", "values")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(str(row[h]) for h in head) + " |")
    agree = sum(r["metrics"] == r["metrics_equal"] and r["loglik_equal"] == r["choices"]
                and r["bodies_equal"] == r["bodies"] and not r["errors"] for r in rows)
    print(f"{agree} of {len(rows)} tasks agree on every compared number")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
