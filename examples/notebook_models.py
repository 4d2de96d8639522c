"""Candidate models for the example notebooks: local stand-ins by default, real ones on request.

The notebooks must run anywhere (CI, a laptop on a train), so by default they evaluate
*stand-in* models: one `evalnb.testing.LocalModelServer` on 127.0.0.1 whose scripted answers
imitate models of different quality. The stand-ins are deterministic (every mistake is decided
by a hash of the model name and the question), so the saved notebook outputs are reproducible
and `pytest --nbval` can compare them. Asked with ``temperature > 0`` they *sample*: the n-th
ask of the same prompt is its own draw (a hash of the ask number too), so epochs differ from
each other yet a fresh notebook run draws the same answers again. On the Belebele-style
questions a stand-in sometimes *misreads a passage* and then tends to miss every question about
it, as real models do: the reason clustered standard errors exist.

To evaluate real models instead, set before starting Jupyter (or `make demo`):

- ``OPENAI_API_KEY``: OpenAI models (default ``gpt-4.1-mini,gpt-4.1-nano``), or
- ``EVALNB_BASE_URL`` (any OpenAI-compatible server: vLLM, Ollama, llama.cpp, LM Studio...)
  with ``EVALNB_MODELS`` naming the models; the key is read from ``EVALNB_API_KEY`` (else
  ``OPENAI_API_KEY``) and ``EVALNB_API`` picks ``responses`` or ``chat`` (default: ``responses``
  for OpenAI, ``chat`` elsewhere);
- optionally ``EVALNB_JUDGE_MODEL`` (default: the first model) and ``EVALNB_EMBEDDING_MODEL``
  (default: evalnb's offline embedding model).

>>> setup = setup_models(2)          # stand-ins unless the variables above are set
>>> setup.models                     # [Model(...), Model(...)] to pass to evalnb.run
>>> setup.close()                    # stops the stand-in server (also done at exit)
"""

from __future__ import annotations

import atexit
import csv
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from evalnb import Model
from evalnb.testing import LocalModelServer

EXAMPLES = Path(__file__).resolve().parent
DEFAULT_OPENAI_MODELS = ("gpt-4.1-mini", "gpt-4.1-nano")
STANDIN_JUDGE = "standin-judge"

# How often each stand-in errs, per kind of question (fractions of items, decided per item).
# A "neutral_hint" rate applies when the prompt defines what a neutral review is, an "explain_hint"
# rate when an explanation prompt asks for the mechanism (`EXPLAIN_HINT`; never worse than "explain").
# "misread": the chance a model misreads a passage (then it misses each question on it with
# chance MISREAD_MISS); "choice": its error rate on a passage it read well; "sampled": the
# chance that an ask at temperature > 0 is a fresh draw instead of the model's usual answer.
PROFILES: dict[str, dict[str, float]] = {
    "standin-large": {"add": 0.03, "mul": 0.08, "neutral": 0.25, "neutral_hint": 0.05, "polar": 0.03,
                      "misread": 0.15, "choice": 0.03, "format": 0.0, "explain": 0.15, "explain_hint": 0.05,
                      "sampled": 0.3},
    "standin-small": {"add": 0.10, "mul": 0.40, "neutral": 0.85, "neutral_hint": 0.10, "polar": 0.08,
                      "misread": 0.35, "choice": 0.08, "format": 0.12, "explain": 0.60, "explain_hint": 0.25,
                      "sampled": 0.4},
    "standin-tiny": {"add": 0.35, "mul": 0.65, "neutral": 0.90, "neutral_hint": 0.60, "polar": 0.45,
                     "misread": 0.5, "choice": 0.30, "format": 0.25, "explain": 0.85, "explain_hint": 0.70,
                     "sampled": 0.5},
}
MISREAD_MISS = 0.9
NEUTRAL_HINT = "both good and bad"  # stand-ins "understand" a prompt that defines neutral like this
EXPLAIN_HINT = "name the mechanism"  # ... and explain better when the prompt asks for the mechanism

_ARITH = re.compile(r"What is (-?\d+) ([+\-*]) (-?\d+)\?")
_REVIEW = re.compile(r"Review: (.+)")
_QUESTION = re.compile(r"Question: (.+)")
_JUDGE = re.compile(r"## Reference answer\n(.*?)\n\n## Answer to grade\n(.*?)\n\n## Rubric", re.S)


# ---- which models -----------------------------------------------------------------------------
@dataclass
class ModelSetup:
    """The candidate models of a notebook, the judge model, and the stand-in server if any."""

    models: list[Model]
    judge: Model
    embedding: Model | None = None
    server: LocalModelServer | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def real(self) -> bool:
        return self.server is None

    def calls(self) -> int | None:
        """Model calls the stand-in server has answered so far (None for real endpoints)."""
        return None if self.server is None else self.server.request_count

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()

    def __repr__(self) -> str:
        kind = "real endpoint" if self.real else "local stand-ins"
        return f"ModelSetup({kind}: {', '.join(m.label for m in self.models)}; judge {self.judge.label})"


def real_endpoint_configured() -> bool:
    return bool(os.environ.get("EVALNB_BASE_URL") or os.environ.get("OPENAI_API_KEY"))


def setup_models(count: int = 2) -> ModelSetup:
    """``count`` candidate models (1-3): real ones if configured (see module doc), else stand-ins."""
    if not 1 <= count <= len(PROFILES):
        raise ValueError(f"count must be 1 to {len(PROFILES)}, got {count}")
    if real_endpoint_configured():
        return _real_models(count)
    server = LocalModelServer(Sampler(), latency=(0.002, 0.02), seed=0, model="standin").start()
    atexit.register(server.stop)
    names = list(PROFILES)[:count]
    return ModelSetup(
        models=[Model(name, base_url=server.base_url, api="responses") for name in names],
        judge=Model(STANDIN_JUDGE, base_url=server.base_url, api="responses"),
        server=server,
    )


def _real_models(count: int) -> ModelSetup:
    base_url = os.environ.get("EVALNB_BASE_URL") or None
    default_names = ",".join(DEFAULT_OPENAI_MODELS) if base_url is None else ""
    names = [n.strip() for n in os.environ.get("EVALNB_MODELS", default_names).split(",") if n.strip()]
    if not names:
        raise RuntimeError("EVALNB_BASE_URL is set: name the models to evaluate in EVALNB_MODELS (comma-separated)")
    if len(names) < count:
        raise RuntimeError(f"this notebook compares {count} models; EVALNB_MODELS names {len(names)}: {names}")
    api = os.environ.get("EVALNB_API") or ("responses" if base_url is None else "chat")
    key_env = next((k for k in ("EVALNB_API_KEY", "OPENAI_API_KEY") if os.environ.get(k)), None)

    def model(name: str) -> Model:
        if base_url is None:
            return Model(name, api=api)
        return Model(name, base_url=base_url, api=api, api_key_env=key_env)

    judge_name = os.environ.get("EVALNB_JUDGE_MODEL") or names[0]
    embedding_name = os.environ.get("EVALNB_EMBEDDING_MODEL")
    return ModelSetup(
        models=[model(n) for n in names[:count]],
        judge=model(judge_name),
        embedding=model(embedding_name) if embedding_name else None,
    )


# ---- the stand-ins' answers --------------------------------------------------------------------
class Sampler:
    """The server's responder: counts the asks of each (model, prompt) sent with temperature > 0.

    The n-th such ask is answered as draw n (`respond(body, ask=n)`), so repeated asks (epochs)
    are different draws, and a new server (a fresh notebook run) draws the same sequence again.
    """

    def __init__(self) -> None:
        self.asks: dict[tuple[str, str], int] = {}

    def __call__(self, body: dict) -> str:
        temperature = body.get("temperature")
        if not isinstance(temperature, (int, float)) or temperature <= 0:
            return respond(body)
        key = (str(body.get("model", "")), _prompt(body))
        ask = self.asks.get(key, 0)
        self.asks[key] = ask + 1
        return respond(body, ask=ask)


def respond(body: dict, ask: int | None = None) -> str:
    """The reply text of stand-in ``body["model"]`` to a Responses request.

    ``ask``: None for the model's usual (greedy) answer; n for the n-th sampled ask.
    """
    model = str(body.get("model", ""))
    prompt = _prompt(body)
    if model == STANDIN_JUDGE:
        return pairwise_verdict(prompt) if _PAIR.search(prompt) else judge_verdict(prompt)
    profile = PROFILES.get(model, PROFILES["standin-small"])
    if (m := _last(_ARITH, prompt)) is not None:
        return _arithmetic(model, profile, int(m.group(1)), m.group(2), int(m.group(3)))
    if (m := _last(_REVIEW, prompt)) is not None:
        return _sentiment(model, profile, m.group(1).strip(), NEUTRAL_HINT in prompt)
    if (m := _last(_QUESTION, prompt)) is not None:
        question = m.group(1).strip()
        if question in choice_key():
            return _choice(model, profile, question, ask)
        if question in explanations():
            return _explain(model, profile, question, EXPLAIN_HINT in prompt.lower())
    return "I am not sure."


def _prompt(body: dict) -> str:
    inp = body.get("input")
    if isinstance(inp, str):
        return inp
    if isinstance(inp, list):
        return "\n".join(m.get("content", "") for m in inp if isinstance(m, dict) and isinstance(m.get("content"), str))
    return ""


def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last match: with few-shot examples in the prompt, the evaluated question comes last."""
    found = None
    for found in pattern.finditer(text):
        pass
    return found


def errs(model: str, key: str, rate: float, salt: str = "") -> bool:
    """Whether ``model`` gets item ``key`` wrong: a fixed hash draw, so reruns agree."""
    digest = hashlib.sha256(f"{model}|{salt}|{key}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < rate


def _pick(model: str, key: str, options: list[str]) -> str:
    digest = hashlib.sha256(f"{model}|pick|{key}".encode()).digest()
    return options[digest[0] % len(options)]


def _arithmetic(model: str, profile: dict[str, float], a: int, op: str, b: int) -> str:
    question = f"{a} {op} {b}"
    value = a + b if op == "+" else a - b if op == "-" else a * b
    if errs(model, question, profile["mul" if op == "*" else "add"]):
        value += int(_pick(model, question, ["1", "-1", "10", "-10", "2"]))
    if errs(model, question, profile["format"], "format"):
        return f"{question} is about {value}, I think."
    return f"{question} = {value}. The answer is {value}."


@cache
def sentiment_key() -> dict[str, str]:
    with open(EXAMPLES / "quickstart" / "data" / "sentiment.csv", newline="", encoding="utf-8") as f:
        return {row["text"]: row["label"] for row in csv.DictReader(f)}


def _sentiment(model: str, profile: dict[str, float], review: str, hint: bool) -> str:
    gold = sentiment_key().get(review)
    if gold is None:
        return "Neutral."
    if gold == "neutral":
        rate = profile["neutral_hint" if hint else "neutral"]
        label = _pick(model, review, ["positive", "negative"]) if errs(model, review, rate) else gold
    else:
        label = ("negative" if gold == "positive" else "neutral") if errs(model, review, profile["polar"]) else gold
    style = _pick(model, "style" + review, ["{L}", "{L}.", "Sentiment: {l}", "{L} \u2014 based on the wording."])
    return style.replace("{L}", label.capitalize()).replace("{l}", label)


@cache
def choice_key() -> dict[str, tuple[str, int]]:
    """Question -> (passage link, correct option number 1-4), from the local Belebele-style folder."""
    key = {}
    for split in ("test", "train"):
        path = EXAMPLES / "hf_local" / "mini_belebele" / "data" / f"{split}.jsonl"
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            key[row["question"]] = (row["link"], int(row["correct_answer_num"]))
    return key


def _choice(model: str, profile: dict[str, float], question: str, ask: int | None = None) -> str:
    passage, correct = choice_key()[question]
    draw = "" if ask is None or not errs(model, f"{question}#{ask}", profile["sampled"], "sampled") else f"#{ask}"
    if errs(model, passage + draw, profile["misread"], "misread"):  # misread the passage: most questions go wrong
        wrong = errs(model, question + draw, MISREAD_MISS, "miss")
    else:
        wrong = errs(model, question + draw, profile["choice"])
    answer = correct
    if wrong:
        answer = [n for n in (1, 2, 3, 4) if n != correct][int(_pick(model, question + draw, ["0", "1", "2"]))]
    letter = "ABCD"[answer - 1]
    if errs(model, question, profile["format"], "format"):
        return f"I would go with option ({letter})."  # ignores the requested format
    return f"Answer: {letter}"


@cache
def explanations() -> dict[str, dict[str, str]]:
    """Question -> {"reference", "good", "poor"} for the free-text task of notebook 03."""
    path = EXAMPLES / "graders" / "explain.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    answers = json.loads((EXAMPLES / "graders" / "standin_answers.json").read_text(encoding="utf-8"))
    return {r["question"]: {"reference": r["reference"], **answers[r["question"]]} for r in rows}


def _explain(model: str, profile: dict[str, float], question: str, hint: bool = False) -> str:
    """The good or the poor explanation; one hash draw, so the hint only turns poor answers good."""
    entry = explanations()[question]
    rate = min(profile["explain"], profile["explain_hint"]) if hint else profile["explain"]
    return entry["poor"] if errs(model, question, rate) else entry["good"]


_SCALE = re.compile(r"integer from (\d+) to (\d+)")
_PAIR = re.compile(r"\[The Start of Assistant A's Answer\]\n(.*?)\n\[The End of Assistant A's Answer\]\s*"
                   r"\[The Start of Assistant B's Answer\]\n(.*?)\n\[The End of Assistant B's Answer\]", re.S)
POSITION_BIAS = 0.7  # when it cannot tell two answers apart, the stand-in judge picks the first this often


def pairwise_verdict(prompt: str) -> str:
    """The stand-in pairwise judge (MT-Bench's format): the good explanation beats the poor one.

    Two answers of the same quality it cannot tell apart, and then, like real judges, it often
    prefers whichever it read first (``[[A]]``, for a share `POSITION_BIAS` of such questions),
    else calls a tie (``[[C]]``): the verdict that flips when the answers change places.
    """
    m = _PAIR.search(prompt)
    question = _last(_QUESTION, prompt)
    entry = explanations().get(question.group(1).strip()) if question else None
    if m is None or entry is None:
        return "I cannot compare these answers. [[C]]"
    first, second = (int(answer.strip() == entry["good"]) for answer in (m.group(1), m.group(2)))
    if first != second:
        better = "A" if first > second else "B"
        return f"Assistant {better}'s explanation names the actual mechanism; the other does not. [[{better}]]"
    if errs(STANDIN_JUDGE, question.group(1), POSITION_BIAS, "position"):
        return "Both explanations are similar; Assistant A's reads a little more clearly. [[A]]"
    return "Both explanations are about equally good. [[C]]"


def judge_verdict(prompt: str) -> str:
    """The stand-in judge: scores word overlap with the reference, 1-10, as JSON like a real judge.

    Asked for a pass/fail verdict (the rubric's scale is 0 to 1) it passes answers it would score
    6 or more out of 10.
    """
    m = _JUDGE.search(prompt)
    scale = _SCALE.search(prompt)
    pass_fail = scale is not None and scale.groups() == ("0", "1")
    if m is None:
        return json.dumps({"score": 0 if pass_fail else 1, "reason": "No answer to grade."})
    reference, answer = (set(re.findall(r"[a-z]+", s.lower())) - _STOP for s in (m.group(1), m.group(2)))
    overlap = len(reference & answer)
    f1 = 2 * overlap / (len(reference) + len(answer)) if overlap else 0.0
    score = max(1, min(10, round(1 + 12 * f1)))
    reason = (
        "Matches the reference on the key points." if score >= 8
        else "Partly right, misses key points of the reference." if score >= 4
        else "Does not match the reference."
    )
    if pass_fail:
        score = int(score >= 6)
    return json.dumps({"score": score, "reason": reason})


_STOP = frozenset(
    "a an the of to in on and or is are was be by it its as at for from with that this which "
    "so because than then when they their there these those into can more most".split()
)


def describe(setup: ModelSetup) -> Any:
    """A small table of the models in use (for the first cell's output)."""
    import pandas as pd

    rows = [{"role": "candidate", "label": m.label, "api": m.api} for m in setup.models]
    rows.append({"role": "judge", "label": setup.judge.label, "api": setup.judge.api})
    return pd.DataFrame(rows)
