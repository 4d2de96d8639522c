"""lm-eval's own `local-completions` model is the oracle of evalnb's log-likelihood runs.

Both score the same multiple-choice tasks (arc_easy, an mmlu subtask, hellaswag, boolq, on the
tiny local Hugging Face folders of test_parity.py) against the same LocalModelServer: lm-eval
tokenizes through the server's vLLM-style ``/tokenize`` (``tokenizer_backend="remote"``), sends
token ids with ``echo`` and reads ``token_logprobs[ctxlen:-1]``; evalnb sends text and finds the
continuation by ``text_offset``. Each choice's summed log-probability and ``is_greedy``, and
each task's acc / acc_norm, must agree. Nothing may leave 127.0.0.1: the sockets are watched.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
from collections import Counter
from collections.abc import Iterator

import pytest

pytest.importorskip("lm_eval")
pytest.importorskip("tenacity")  # lm-eval's `api` extra (the dev extra installs it)

from helpers.lm_eval_data import DATASETS  # noqa: E402
from helpers.lm_eval_kit import lm_eval_task, mirror  # noqa: E402

import evalnb  # noqa: E402
from evalnb import Suite  # noqa: E402
from evalnb.providers import Model  # noqa: E402
from evalnb.testing import LocalModelServer  # noqa: E402

pytestmark = pytest.mark.usefixtures("evalnb_home")
TASKS = ["arc_easy", "mmlu_abstract_algebra", "hellaswag", "boolq"]


def model(before: str, token: str) -> float:
    """A stand-in model: log-probabilities in [-4, 0] from a hash of the recent text and the token,
    so about one token in six beats the server's greedy alternative (-0.7) and is_greedy varies."""
    digest = hashlib.blake2b(f"{before[-48:]}\x00{token}".encode(), digest_size=4).digest()
    return -(int.from_bytes(digest, "little") % 4001) / 1000


@pytest.fixture
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[list]:
    """Every socket connect and name lookup goes to 127.0.0.1, else it is refused and recorded."""
    attempts: list = []
    connect, lookup = socket.socket.connect, socket.getaddrinfo

    def local(host: object) -> bool:
        return host in ("127.0.0.1", "localhost", "::1", b"127.0.0.1", b"localhost")

    def guarded_connect(sock: socket.socket, address: object) -> object:
        if isinstance(address, tuple) and not local(address[0]):
            attempts.append(address)
            raise ConnectionRefusedError(f"test: no traffic off 127.0.0.1 ({address!r})")
        return connect(sock, address)

    def guarded_lookup(host: object, *args: object, **kwargs: object) -> object:
        if host is not None and not local(host):
            attempts.append(host)
            raise socket.gaierror(f"test: no name lookups off 127.0.0.1 ({host!r})")
        return lookup(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_lookup)
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(var, "1")
    yield attempts


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hf")
    return {task: str(mirror(root, *DATASETS[task])) for task in TASKS}


def lm_eval_run(server: LocalModelServer, folders: dict[str, str]) -> dict:
    """lm-eval's evaluator with its `local-completions` model on the server (no index rescan)."""
    from lm_eval import evaluator
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    lm = LocalCompletionsAPI(base_url=f"{server.base_url}/completions", model=server.model,
                             tokenizer_backend="remote", num_concurrent=1, max_retries=1)
    tasks = {task: lm_eval_task(task, folders[task], 0) for task in TASKS}
    return evaluator.evaluate(lm=lm, task_dict=tasks, log_samples=True, bootstrap_iters=0, verbosity="ERROR")


def test_evalnb_scores_multiple_choice_as_lm_evals_local_completions(folders, loopback_only) -> None:
    suite = Suite.from_lm_eval(TASKS, num_fewshot=0, dataset_paths={DATASETS[t][0]: folders[t] for t in TASKS})
    with LocalModelServer(token_logprobs=model) as server:
        oracle = lm_eval_run(server, folders)
        assert server.calls("/tokenize") > 0 and server.calls("/tokenizer_info") > 0
        lm_prompts = Counter(server.vocab.decode(p) for r in server.requests if r.path == "/v1/completions"
                             for p in r.body["prompt"])
        assert all(isinstance(p[0], int) for r in server.requests if r.path == "/v1/completions"
                   for p in r.body["prompt"])  # lm-eval sent token ids
        before = len(server.requests)
        result = evalnb.run(suite, [Model(server.model, base_url=server.base_url, api="completions")])
        ours = Counter(p for r in server.requests[before:] if r.path == "/v1/completions"
                       for p in r.body["prompt"])
    assert ours.pop("The sky is blue") == 1  # evalnb's up-front check that the model can score
    assert loopback_only == []
    assert ours == lm_prompts  # the same context + continuation texts reached the server from both

    compared = greedy_seen = 0
    for task in TASKS:
        samples = result.samples[result.samples.task_id == task].sort_values("sample_index")
        theirs = sorted(oracle["samples"][task], key=lambda s: s["doc_id"])
        assert len(samples) == len(theirs) == len(suite.items(task)) > 0
        for (_, sample), want in zip(samples.iterrows(), theirs):
            got = json.loads(sample.output_text)
            lls = [ll for ll, _ in want["filtered_resps"]]
            greedy = [g for _, g in want["filtered_resps"]]
            assert got["loglikelihoods"] == pytest.approx(lls, abs=1e-9), (task, sample.sample_index)
            assert got["is_greedy"] == greedy, (task, sample.sample_index)
            assert sample.acc == want["acc"]
            if "acc_norm" in want:
                assert sample.acc_norm == want["acc_norm"]
            compared += len(lls)
            greedy_seen += sum(greedy)
        metrics = result.metrics[result.metrics.task_id == task].set_index("metric")["mean"]
        for name in ("acc", "acc_norm"):
            if f"{name},none" in oracle["results"][task]:
                assert metrics[name] == pytest.approx(oracle["results"][task][f"{name},none"], abs=1e-12), (task, name)
    assert compared == sum(lm_prompts.values()) > 60
    assert 0 < greedy_seen < compared  # is_greedy was compared both ways, not only all-False
    accs = [oracle["results"][t]["acc,none"] for t in TASKS]
    assert any(0 < a < 1 for a in accs)  # scores that can tell a wrong argmax from a right one


def test_a_token_straddling_the_boundary_is_where_lm_eval_and_evalnb_differ(loopback_only) -> None:
    """No task above has it (their choices start with a space); with real BPE it is the same.

    A context ending inside a word ("Ans" + "wer"): the joint text has one token " Answer".
    lm-eval splits the joint encoding after the context's own token count, so the continuation
    gets no token and scores 0.0; evalnb counts the straddling token for the continuation.
    """
    from lm_eval.api.instance import Instance
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    from evalnb.providers import ModelClient

    pairs = [("Q: Ans", "wer"), ("Q: Answer:", " yes")]
    with LocalModelServer(token_logprobs=model) as server:
        lm = LocalCompletionsAPI(base_url=f"{server.base_url}/completions", model=server.model,
                                 tokenizer_backend="remote", max_retries=1)
        theirs = lm.loglikelihood([Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)],
                                  disable_tqdm=True)

        async def score():
            async with ModelClient(Model(server.model, base_url=server.base_url, api="completions")) as client:
                return await client.loglikelihoods(pairs)
        ours = asyncio.run(score())
    assert loopback_only == []
    assert theirs[0] == (0, True)  # an empty slice: nothing scored
    assert ours[0].logprob == pytest.approx(model("Q:", " Answer"))
    assert ours[1].logprob == pytest.approx(theirs[1][0]) and ours[1].is_greedy == theirs[1][1]


def test_choices_starting_with_a_multi_byte_character_on_a_byte_level_tokenizer(tmp_path, loopback_only) -> None:
    """`byte_fallback` splits "→" into three byte tokens, echoed "", "", "→" at one offset, as
    vLLM echoes a byte-level tokenizer's (the realserver's tiny-arith): the zero-width tokens at
    the context's end are the continuation's, for lm-eval's token split and for evalnb alike."""
    import yaml

    folder = tmp_path / "symbols"
    (folder / "data").mkdir(parents=True)
    rows = [{"a": a, "b": b, "label": 0 if a > b else 1 if a < b else 2} for a, b in [(3, 5), (9, 2), (4, 4), (7, 1)]]
    (folder / "data" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (folder / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n"
                                      "  - split: test\n    path: data/test.jsonl\n---\n", encoding="utf-8")
    config = {"task": "compare_symbols", "dataset_path": "local/compare_symbols", "test_split": "test",
              "output_type": "multiple_choice", "doc_to_text": "Compare {{a}} and {{b}}.\nAnswer:",
              "doc_to_choice": ["→ more", "← less", "≈ equal"], "doc_to_target": "label", "target_delimiter": "",
              "metric_list": [{"metric": "acc"}, {"metric": "acc_norm"}]}
    path = tmp_path / "compare_symbols.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    suite = Suite.from_lm_eval(str(path), dataset_paths={"local/compare_symbols": str(folder)})

    from lm_eval import evaluator
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    task = ConfigurableTask(config={**config, "dataset_path": str(folder)})
    with LocalModelServer(token_logprobs=model, byte_fallback=True) as server:
        lm = LocalCompletionsAPI(base_url=f"{server.base_url}/completions", model=server.model,
                                 tokenizer_backend="remote", max_retries=1)
        oracle = evaluator.evaluate(lm=lm, task_dict={"compare_symbols": task}, log_samples=True,
                                    bootstrap_iters=0, verbosity="ERROR")
        result = evalnb.run(suite, [Model(server.model, base_url=server.base_url, api="completions")])
        echoed = [r for r in server.requests if r.path == "/v1/completions" and r.body["prompt"] != ["The sky is blue"]]
    assert loopback_only == []
    samples = result.samples.sort_values("sample_index")
    theirs = sorted(oracle["samples"]["compare_symbols"], key=lambda s: s["doc_id"])
    assert len(samples) == len(theirs) == 4 and len(echoed) == 12 + 4  # lm-eval: a call per choice; evalnb: per doc
    for (_, sample), want in zip(samples.iterrows(), theirs):
        got = json.loads(sample.output_text)
        assert got["loglikelihoods"] == pytest.approx([ll for ll, _ in want["filtered_resps"]], abs=1e-9)
        assert got["is_greedy"] == [g for _, g in want["filtered_resps"]]
    metrics = result.metrics.set_index("metric")["mean"]
    assert metrics["acc"] == pytest.approx(oracle["results"]["compare_symbols"]["acc,none"])
    assert metrics["acc_norm"] == pytest.approx(oracle["results"]["compare_symbols"]["acc_norm,none"])
    # the byte tokens were there: three tokens at the first choice's offset, two of them ""
    prompt = echoed[-1].body["prompt"][0]
    assert prompt == "Compare 7 and 1.\nAnswer:→ more"
    assert [t for t, o in server.vocab.tokenize(prompt) if o == len("Compare 7 and 1.\nAnswer:")] == ["", "", "→"]
