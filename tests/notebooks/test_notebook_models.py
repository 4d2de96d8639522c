"""examples/notebook_models.py: which models the notebooks use, and how the stand-ins answer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest

from evalnb.providers.model import OPENAI_BASE_URL

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import notebook_models as nm  # noqa: E402

REAL_VARIABLES = ("EVALNB_BASE_URL", "OPENAI_API_KEY", "EVALNB_MODELS", "EVALNB_API_KEY", "EVALNB_API",
                  "EVALNB_JUDGE_MODEL", "EVALNB_EMBEDDING_MODEL")


@pytest.fixture(autouse=True)
def no_real_models(monkeypatch):
    for name in REAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_stand_ins_by_default_are_a_real_local_server():
    setup = nm.setup_models(2)
    try:
        assert not setup.real and setup.embedding is None
        assert [m.label for m in setup.models] == ["standin-large", "standin-small"]
        assert all(m.base_url.startswith("http://127.0.0.1:") for m in setup.models + [setup.judge])
        reply = httpx.post(f"{setup.models[0].base_url}/responses",
                           json={"model": "standin-large", "input": "Question: What is 2 + 3?"})
        assert reply.json()["output_text"] == "2 + 3 = 5. The answer is 5."
        assert setup.calls() == 1
    finally:
        setup.close()


@pytest.mark.parametrize("count", [0, 4])
def test_count_outside_one_to_three_is_refused(count):
    with pytest.raises(ValueError, match="count must be 1 to 3"):
        nm.setup_models(count)


def test_openai_key_alone_selects_openai_models(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    setup = nm.setup_models(2)
    assert setup.real and setup.calls() is None
    assert [(m.name, m.base_url, m.api) for m in setup.models] == [
        ("gpt-4.1-mini", OPENAI_BASE_URL, "responses"),
        ("gpt-4.1-nano", OPENAI_BASE_URL, "responses"),
    ]
    assert all(m.is_openai for m in setup.models)
    assert setup.judge.name == "gpt-4.1-mini"
    assert "sk-test" not in repr(setup)


def test_base_url_needs_model_names(monkeypatch):
    monkeypatch.setenv("EVALNB_BASE_URL", "http://localhost:8000/v1")
    with pytest.raises(RuntimeError, match="EVALNB_MODELS"):
        nm.setup_models(2)


def test_base_url_with_models_uses_chat_and_the_named_key(monkeypatch):
    monkeypatch.setenv("EVALNB_BASE_URL", "http://localhost:8000/v1")
    monkeypatch.setenv("EVALNB_MODELS", "qwen2.5-7b, llama3.1-8b ,")
    monkeypatch.setenv("EVALNB_API_KEY", "local-key")
    monkeypatch.setenv("EVALNB_JUDGE_MODEL", "judge-70b")
    monkeypatch.setenv("EVALNB_EMBEDDING_MODEL", "bge-m3")
    with pytest.raises(RuntimeError, match="compares 3 models; EVALNB_MODELS names 2"):
        nm.setup_models(3)
    setup = nm.setup_models(2)
    assert [(m.name, m.base_url, m.api, m.api_key_env) for m in setup.models] == [
        ("qwen2.5-7b", "http://localhost:8000/v1", "chat", "EVALNB_API_KEY"),
        ("llama3.1-8b", "http://localhost:8000/v1", "chat", "EVALNB_API_KEY"),
    ]
    assert setup.judge.name == "judge-70b" and setup.embedding.name == "bge-m3"


def test_stand_in_answers_are_deterministic_and_graded_by_quality():
    def accuracy(model):
        key = nm.sentiment_key()
        right = 0
        for review, label in key.items():
            reply = nm.respond({"model": model, "input": f"Review: {review}\nSentiment:"})
            right += label in reply.lower()
        return right / len(key)

    assert nm.respond({"model": "standin-small", "input": "Question: What is 9 * 16?"}) == \
        nm.respond({"model": "standin-small", "input": "Question: What is 9 * 16?"})
    assert accuracy("standin-large") > accuracy("standin-small") > accuracy("standin-tiny")


def test_the_last_question_in_a_few_shot_prompt_is_answered():
    prompt = "Question: What is 1 + 1?\n2\n\nQuestion: What is 10 + 5?"
    assert nm.respond({"model": "standin-large", "input": prompt}).endswith("The answer is 15.")


@pytest.mark.parametrize(
    ("answer", "low", "high"),
    [("Blue light is scattered more by air molecules.", 4, 10), ("Because of the oceans.", 1, 2), ("", 1, 1)],
)
def test_judge_verdict_is_json_with_a_score_from_1_to_10(answer, low, high):
    prompt = ("## Prompt\nWhy is the sky blue?\n\n## Reference answer\nAir molecules scatter blue light "
              f"more than red light.\n\n## Answer to grade\n{answer}\n\n## Rubric\nBe strict.")
    verdict = json.loads(nm.judge_verdict(prompt))
    assert low <= verdict["score"] <= high and verdict["reason"]


def test_judge_verdict_without_an_answer_section_scores_1():
    assert json.loads(nm.judge_verdict("no sections here"))["score"] == 1


def _first_sampled_question(model="standin-small"):
    """A Belebele-style question whose sampled asks do not all agree (there are several)."""
    for question in nm.choice_key():
        body = {"model": model, "input": f"Question: {question}", "temperature": 1.0}
        asks = [nm.respond(body, ask=k) for k in range(8)]
        if len(set(asks)) > 1:
            return body, asks
    raise AssertionError("no question varies across sampled asks")


def test_sampled_asks_are_draws_that_a_new_server_repeats():
    body, expected = _first_sampled_question()
    first, second = nm.Sampler(), nm.Sampler()
    assert [first(body) for _ in range(8)] == expected  # the n-th ask is draw n
    assert [second(body) for _ in range(8)] == expected  # a fresh server draws the same sequence
    greedy = {k: v for k, v in body.items() if k != "temperature"}
    assert {first(greedy) for _ in range(3)} == {nm.respond(greedy)}  # temperature 0 / unset: one answer


def test_a_misread_passage_costs_its_questions_together():
    """Errors cluster by passage: both questions wrong more often than independent errors would be."""
    rows = [json.loads(line) for line in
            (ROOT / "examples" / "hf_local" / "mini_belebele" / "data" / "test.jsonl").read_text().splitlines()]
    links = sorted({r["link"] for r in rows})
    assert len(rows) == 40 and len(links) == 20  # two questions per passage
    both = expected = 0.0
    for model in [f"probe-{i}" for i in range(60)]:  # unknown names answer with standin-small's profile
        wrong = {r["question"]: nm.respond({"model": model, "input": f"Question: {r['question']}"})
                 != f"Answer: {'ABCD'[int(r['correct_answer_num']) - 1]}" for r in rows}
        rate = sum(wrong.values()) / len(wrong)
        both += sum(all(wrong[r["question"]] for r in rows if r["link"] == link) for link in links)
        expected += len(links) * rate * rate
    assert both > 1.3 * expected  # 1,200 passages: ~8 standard deviations above independence
