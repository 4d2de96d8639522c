"""lm-eval parity on a real vLLM server: the same multiple-choice tasks scored by lm-eval's own
``local-completions`` model and by evalnb, against one vLLM server, compared per choice.

The server is /work/shared/realserver's (vLLM CPU serving ``tiny-arith``, a byte-level Llama
trained on "What is A + B?" and "Compare A and B."; context 128 tokens). vLLM serves
``/tokenize`` and, when started with ``--enable-tokenizer-info-endpoint``, ``/tokenizer_info``,
so lm-eval runs with ``tokenizer_backend="remote"`` (token ids, ``token_logprobs[ctxlen:-1]``)
while evalnb sends text and finds each continuation by ``text_offset``. Three small local tasks
(written here as lm-eval task YAMLs over local Hugging Face folders, 0-shot, short items):

- ``tiny_arith_chat``: ``<|user|>What is A + B?\\n<|assistant|>`` (the chat template's special
  tokens as text), choices the sum and three near misses, ``target_delimiter: ""``;
- ``tiny_compare_chat``: ``<|user|>Compare A and B.\\n<|assistant|>``, choices more/less/equal;
- ``tiny_arith_plain``: ``Question: What is A + B?\\nAnswer:``, choices `` 57`` ... (lm-eval's
  default delimiter: a space moved from context to continuation);
- ``tiny_compare_symbols``: as tiny_compare_chat with choices ``→ more``, ``← less``, ``≈ equal``:
  a continuation that starts with a multi-byte character, which a byte-level tokenizer splits
  into byte tokens vLLM echoes as ``""`` (zero characters) and then the character.

Run by hand, with the server up (``bash /work/shared/realserver/setup.sh 8012``, then restart it
with ``serve.sh MODEL 8012 --enable-tokenizer-info-endpoint``)::

    PYTHONPATH=. /work/main/.venv/bin/python benchmarks/lm_eval_parity_vllm.py --port 8012 [--n 40]

Prints per-task agreement (choices whose summed log-probability agrees within --tol, is_greedy
equal) and acc / acc_norm of both; the numbers go in benchmarks/README.md ("lm-eval parity on vLLM").
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import tempfile
import time
from pathlib import Path

for _var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(_var, "1")

TASKS = {
    "tiny_arith_chat": {"doc_to_text": "<|user|>What is {{a}} + {{b}}?\n<|assistant|>", "target_delimiter": ""},
    "tiny_compare_chat": {"doc_to_text": "<|user|>Compare {{a}} and {{b}}.\n<|assistant|>", "target_delimiter": ""},
    "tiny_arith_plain": {"doc_to_text": "Question: What is {{a}} + {{b}}?\nAnswer:", "target_delimiter": " "},
    "tiny_compare_symbols": {"doc_to_text": "<|user|>Compare {{a}} and {{b}}.\n<|assistant|>", "target_delimiter": ""},
}


def rows(task: str, n: int, rng: random.Random) -> list[dict]:
    out = []
    for i in range(n):
        a, b = rng.randrange(100), rng.randrange(100)
        if task in ("tiny_compare_chat", "tiny_compare_symbols"):
            if i % 5 == 0:
                b = a
            # symbols: choices that start with a multi-byte character (2 and 3 bytes in UTF-8)
            choices = ["more", "less", "equal"] if task == "tiny_compare_chat" else ["→ more", "← less", "≈ equal"]
            label = 0 if a > b else 1 if a < b else 2
        else:
            s = a + b
            wrong = [x for x in (s + 1, s - 1, s + 10, s - 10, s + 2) if x >= 0 and x != s][:3]
            choices = [str(x) for x in [s] + wrong]
            rng.shuffle(choices)
            label = choices.index(str(s))
        out.append({"a": a, "b": b, "choices": choices, "label": label})
    return out


def write_tasks(root: Path, n: int, seed: int) -> dict[str, tuple[Path, Path]]:
    """Per task: (its YAML, its local Hugging Face folder with one ``test`` split)."""
    import yaml

    rng = random.Random(seed)
    out = {}
    for task, fields in TASKS.items():
        folder = root / task
        (folder / "data").mkdir(parents=True)
        (folder / "data" / "test.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows(task, n, rng)), encoding="utf-8")
        (folder / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n"
                                          "  - split: test\n    path: data/test.jsonl\n---\n", encoding="utf-8")
        config = {"task": task, "dataset_path": f"local/{task}", "test_split": "test",
                  "output_type": "multiple_choice", "doc_to_choice": "choices", "doc_to_target": "label",
                  **fields, "metric_list": [{"metric": "acc"}, {"metric": "acc_norm"}]}
        path = root / f"{task}.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
        out[task] = (path, folder)
    return out


def loopback_only() -> list:
    """Refuse (and record) any connection or name lookup that is not 127.0.0.1."""
    attempts: list = []
    connect, lookup = socket.socket.connect, socket.getaddrinfo

    def local(host: object) -> bool:
        return host in ("127.0.0.1", "localhost", b"127.0.0.1", b"localhost")

    def guarded_connect(sock, address):
        if isinstance(address, tuple) and not local(address[0]):
            attempts.append(address)
            raise ConnectionRefusedError(f"no traffic off 127.0.0.1 ({address!r})")
        return connect(sock, address)

    def guarded_lookup(host, *args, **kwargs):
        if host is not None and not local(host):
            attempts.append(host)
            raise socket.gaierror(f"no lookups off 127.0.0.1 ({host!r})")
        return lookup(host, *args, **kwargs)

    socket.socket.connect = guarded_connect
    socket.getaddrinfo = guarded_lookup
    return attempts


def run_lm_eval(base: str, model: str, tasks: dict[str, tuple[Path, Path]], max_length: int) -> tuple[dict, float]:
    from lm_eval import evaluator
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.models.openai_completions import LocalCompletionsAPI
    from lm_eval.tasks._yaml_loader import load_yaml

    built = {}
    for task, (path, folder) in tasks.items():
        config = load_yaml(str(path), resolve_func=True)
        config["dataset_path"] = str(folder)
        built[task] = ConfigurableTask(config=config)
    lm = LocalCompletionsAPI(base_url=f"{base}/v1/completions", model=model, tokenizer_backend="remote",
                             num_concurrent=1, max_retries=2, max_length=max_length)
    started = time.perf_counter()
    out = evaluator.evaluate(lm=lm, task_dict=built, log_samples=True, bootstrap_iters=0, verbosity="ERROR")
    return out, time.perf_counter() - started


def run_evalnb(base: str, model: str, tasks: dict[str, tuple[Path, Path]]) -> tuple[object, object, float]:
    import evalnb

    suite = evalnb.Suite.from_lm_eval([str(path) for path, _ in tasks.values()], num_fewshot=0,
                                      dataset_paths={f"local/{t}": str(folder) for t, (_, folder) in tasks.items()})
    started = time.perf_counter()
    result = evalnb.run(suite, [evalnb.Model(model, base_url=f"{base}/v1", api="completions")], concurrency=4)
    return suite, result, time.perf_counter() - started


def compare(suite, result, oracle: dict, tol: float) -> list[dict]:
    rows_out = []
    for task in TASKS:
        samples = result.samples[result.samples.task_id == task].sort_values("sample_index")
        theirs = sorted(oracle["samples"][task], key=lambda s: s["doc_id"])
        items = suite.items(task)
        assert len(samples) == len(theirs) == len(items), (task, len(samples), len(theirs), len(items))
        choices = agree = greedy_agree = greedy_true = docs_same_choice = 0
        worst, examples = 0.0, []
        for item, (_, sample), want in zip(items, samples.iterrows(), theirs):
            assert item.prompt == want["arguments"][0][0], (task, item.prompt, want["arguments"][0][0])
            got = json.loads(sample.output_text)
            for k, ((ll, greedy), ours, ours_greedy) in enumerate(
                    zip(want["filtered_resps"], got["loglikelihoods"], got["is_greedy"])):
                choices += 1
                diff = abs(ours - ll)
                worst = max(worst, diff)
                agree += diff <= tol
                greedy_agree += ours_greedy == greedy
                greedy_true += bool(greedy)
                if diff > tol and len(examples) < 3:
                    examples.append({"doc": int(sample.sample_index), "choice": item.continuations[k],
                                     "evalnb": ours, "lm_eval": ll})
            docs_same_choice += (sample.acc == want["acc"]) and (sample.acc_norm == want["acc_norm"])
        metrics = result.metrics[result.metrics.task_id == task].set_index("metric")["mean"]
        res = oracle["results"][task]
        rows_out.append({"task": task, "docs": len(items), "choices": choices, "loglik_agree": agree,
                         "max_abs_diff": worst, "is_greedy_agree": greedy_agree, "greedy": greedy_true, "docs_same_scores": docs_same_choice,
                         "acc_evalnb": float(metrics["acc"]), "acc_lm_eval": res["acc,none"],
                         "acc_norm_evalnb": float(metrics["acc_norm"]), "acc_norm_lm_eval": res["acc_norm,none"],
                         "examples": examples})
    return rows_out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8012)
    parser.add_argument("--model", default="tiny-arith")
    parser.add_argument("--n", type=int, default=40, help="docs per task")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tol", type=float, default=1e-4, help="agreement tolerance on a summed log-probability")
    parser.add_argument("--max-length", type=int, default=128, help="the served model's context")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    base = f"http://127.0.0.1:{args.port}"
    attempts = loopback_only()
    with tempfile.TemporaryDirectory(prefix="lm-eval-parity-") as tmp:
        # datasets caches a local folder by its name and config, not its content: a fresh cache,
        # or lm-eval reads the rows of an earlier run with another --n
        os.environ["HF_DATASETS_CACHE"] = str(Path(tmp) / "hf-datasets-cache")
        tasks = write_tasks(Path(tmp), args.n, args.seed)
        os.environ.setdefault("EVALNB_HOME", str(Path(tmp) / "home"))
        oracle, lm_s = run_lm_eval(base, args.model, tasks, args.max_length)
        suite, result, ours_s = run_evalnb(base, args.model, tasks)
        table = compare(suite, result, oracle, args.tol)
    assert attempts == [], attempts
    print(f"lm-eval local-completions (remote tokenizer, 1 prompt a call): {lm_s:.1f} s; "
          f"evalnb (all choices of a doc in one call, concurrency 4): {ours_s:.1f} s")
    head = ("task", "docs", "choices", "loglik_agree", "max_abs_diff", "is_greedy_agree", "greedy", "docs_same_scores",
            "acc_evalnb", "acc_lm_eval", "acc_norm_evalnb", "acc_norm_lm_eval")
    print(" | ".join(head))
    for row in table:
        print(" | ".join(f"{row[h]:.4g}" if isinstance(row[h], float) else str(row[h]) for h in head))
        for example in row["examples"]:
            print("   differs:", example)
    if args.json:
        Path(args.json).write_text(json.dumps({"lm_eval_s": lm_s, "evalnb_s": ours_s, "rows": table}, indent=1))


if __name__ == "__main__":
    main()
