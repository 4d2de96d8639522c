"""Built-in grader sources: each is exec'd in a fresh namespace, as the sandbox worker would."""

from __future__ import annotations

import ast
import base64
import inspect
import json
import math
import struct
import sys
from pathlib import Path

import pytest

import evalnb.graders as graders

GRADER_DIR = Path(graders.__file__).parent
CHOICES = ["Paris", "London", "Berlin", "Madrid"]


def load(name: str, **constants) -> dict:
    """Exec a grader's source in a fresh namespace, optionally editing module constants."""
    namespace: dict = {"__name__": f"grader_{name}"}
    exec(compile(graders.source(name), f"<{name}>", "exec"), namespace)
    namespace.update(constants)
    return namespace


def make(output, target, *, raw=None, **row):
    """A (sample, item) pair shaped like the SPEC Decisions describe."""
    sample = {
        "task_id": "t", "model": "m", "sample_index": 0, "prompt": "Q?", "target": target,
        "output_text": raw if raw is not None else (output or ""), "extracted_output": output,
        "dataset_row": dict(row), "response_id": "resp_1", "usage": None,
    }
    item = {**row, "target": target, "prompt": "Q?", "choices": row.pop("choices", None),
            "sample_index": 0, "row": dict(row)}
    return sample, item


def score(name, output, target, **row):
    return load(name)["grade"](*make(output, target, **row))


class FakeCtx:
    """The test's stand-in for the bridge: canned Responses / Embeddings JSON, calls recorded."""

    def __init__(self, replies=(), embeddings=None):
        self.replies = list(replies)
        self.embedding_reply = embeddings
        self.calls: list[tuple[str, dict]] = []
        self.task_id, self.model, self.run_id, self.metadata = "t", "m", "run_1", {}

    def responses_create(self, model="auto", input=None, **kwargs):
        self.calls.append(("responses", {"model": model, "input": input, **kwargs}))
        reply = self.replies.pop(0)
        return reply if isinstance(reply, dict) else {"object": "response", "output_text": reply}

    def embeddings_create(self, model="auto", input=None):
        self.calls.append(("embeddings", {"model": model, "input": input}))
        return self.embedding_reply


# ------------------------------------------------------------------ catalogue


def test_names_match_the_source_files():
    files = {p.stem for p in GRADER_DIR.glob("*.py") if p.stem != "__init__"}
    assert set(graders.names()) == files
    assert graders.names() == sorted(files)


def test_source_accepts_py_suffix_and_rejects_unknown_names():
    assert graders.source("token_f1.py") == graders.source("token_f1")
    with pytest.raises(ValueError, match="exact_match"):
        graders.source("bleu")


@pytest.mark.parametrize("name", graders.names())
def test_each_source_is_standalone_stdlib_code_with_a_docstring(name):
    tree = ast.parse(graders.source(name))
    doc = ast.get_docstring(tree)
    assert doc and len(doc) > 200
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert "evalnb" not in imported
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


@pytest.mark.parametrize("name", graders.names())
def test_spec_declares_the_entry_point_the_source_defines(name):
    spec = graders.spec(name)
    namespace = load(name)
    assert spec["type"] == "python"
    assert spec["source"] == graders.source(name)
    if spec["contract"] == "batch":
        assert list(inspect.signature(namespace["grade_batch"]).parameters) == ["samples"]
    else:
        params = list(inspect.signature(namespace["grade"]).parameters)
        assert params == (["sample", "item", "ctx"] if spec["contract"] == "model_backed"
                          else ["sample", "item"])
    assert (spec.get("model_access") == "mka1") == (spec["contract"] == "model_backed")


def test_spec_contracts_and_metric_ids():
    assert graders.spec("llm_judge")["contract"] == "model_backed"
    assert graders.spec("embedding_similarity")["metric_id"] == "cosine"
    assert graders.spec("macro_f1")["contract"] == "batch"
    assert graders.spec("token_f1")["metric_id"] == "f1"
    assert graders.spec("multiple_choice")["metric_id"] == "accuracy"


def test_spec_overrides():
    renamed = graders.spec("exact_match", metric_id="em", timeout_seconds=30)
    assert (renamed["metric_id"], renamed["timeout_seconds"]) == ("em", 30)
    uploaded = graders.spec("llm_judge", file_id="file-abc")
    assert uploaded["file_id"] == "file-abc" and "source" not in uploaded
    edited = graders.spec("llm_judge", source="def grade(s, i, ctx): ...", metric_id="quality")
    assert edited["metric_id"] == "quality"
    assert json.loads(json.dumps(renamed)) == renamed


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"metric_id": "quality"}, "edit a copy"),
        ({"source": "x", "file_id": "f"}, "not both"),
        ({"metrics": []}, "unknown grader field"),
        ({"type": "js"}, "unknown grader field"),
    ],
)
def test_spec_rejects_bad_overrides(kwargs, message):
    with pytest.raises(ValueError, match=message):
        graders.spec("llm_judge", **kwargs)


def test_spec_unknown_name():
    with pytest.raises(ValueError, match="choose one of"):
        graders.spec("rouge")


# ------------------------------------------------------------------ exact match


def test_exact_match():
    assert score("exact_match", "Paris", "Paris") == 1.0
    assert score("exact_match", "paris", "Paris") == 0.0
    assert score("exact_match", "Paris", "Paris\n") == 1.0  # whitespace around is ignored
    assert score("exact_match", "Paris.", "Paris") == 0.0
    assert score("exact_match", None, "Paris") == 0.0


def test_exact_match_constants_and_missing_target():
    ns = load("exact_match", IGNORE_CASE=True)
    assert ns["grade"](*make("PARIS", "paris")) == 1.0
    strict = load("exact_match", STRIP=False)
    assert strict["grade"](*make("Paris", "Paris ")) == 0.0
    with pytest.raises(ValueError, match="no target"):
        load("exact_match")["grade"]({"extracted_output": "x"}, {})


# ------------------------------------------------------------------ normalized EM / token F1


def test_normalized_exact_match_squad_normalisation():
    assert score("normalized_exact_match", "The Eiffel Tower!", "eiffel  tower") == 1.0
    assert score("normalized_exact_match", "“Paris.”", "paris") == 1.0  # Unicode punctuation
    assert score("normalized_exact_match", "an apple", "Apple") == 1.0
    assert score("normalized_exact_match", "banana", "bnn") == 0.0  # articles only as words
    assert score("normalized_exact_match", "Lyon", "Paris") == 0.0
    assert score("normalized_exact_match", None, "Paris") == 0.0


@pytest.mark.parametrize(
    "answers",
    [
        ["Denver Broncos", "Broncos"],
        '["Denver Broncos", "Broncos"]',  # a CSV cell holding a JSON array
        {"text": ["Denver Broncos", "Broncos"], "answer_start": [177, 184]},  # SQuAD
    ],
)
def test_normalized_exact_match_any_gold_answer(answers):
    assert score("normalized_exact_match", "the Broncos", "ignored", answers=answers) == 1.0
    assert score("normalized_exact_match", "Panthers", "Panthers", answers=answers) == 0.0


def test_normalized_exact_match_target_json_list_and_unanswerable():
    assert score("normalized_exact_match", "b", '["a b", "B"]') == 1.0
    assert score("normalized_exact_match", "[1, 2]", "[1, 2]") == 1.0  # not a list of strings
    assert score("normalized_exact_match", "", "x", answers=[]) == 1.0  # SQuAD v2 no-answer
    assert score("normalized_exact_match", "Denver", "x", answers={"text": []}) == 0.0


def test_token_f1_values():
    assert score("token_f1", "the cat sat on the mat", "a cat sat on a mat") == 1.0
    assert score("token_f1", "cat sat", "cat sat on mat") == pytest.approx(2 / 3)
    assert score("token_f1", "cat cat", "cat") == pytest.approx(2 / 3)  # repeats count once each
    assert score("token_f1", "dog", "cat") == 0.0
    assert score("token_f1", None, "cat") == 0.0
    assert score("token_f1", "", "x", answers=[]) == 1.0
    assert score("token_f1", "the", "cat") == 0.0  # normalises to nothing


def test_token_f1_takes_best_gold_answer():
    result = score("token_f1", "Denver Broncos team", "x", answers=["Broncos", "Denver Broncos"])
    assert result == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))


def test_em_and_f1_share_one_normalisation():
    em, f1 = load("normalized_exact_match"), load("token_f1")
    for text in ["The  Quick, brown fox!", "An ‘apple’ a day", "ÉCOLE—Normale", "a-b the c"]:
        assert em["normalize"](text) == f1["normalize"](text)


def test_missing_gold_raises():
    with pytest.raises(ValueError, match="neither answers nor a target"):
        load("token_f1")["grade"]({"extracted_output": "x"}, {})


# ------------------------------------------------------------------ numeric tolerance


@pytest.mark.parametrize(
    ("output", "target"),
    [
        ("1,234", "1234"),
        ("1/4", "0.25"),
        ("\\frac{1}{4}", "0.25"),
        ("-3.50", "-3.5"),
        ("$1,000.00", "1000"),
        ("50%", "50"),
        ("1e3", "1000"),
        ("42.", "42"),
        ("The answer is 42.", "42"),
        ("18", "Janet sells 16 - 3 - 4 = 9 eggs... #### 18"),
        ("1E+101", "1e101"),
        ("1000000.5", "1000000"),  # within REL_TOL 1e-6
        ("\u22125", "-5"),
        ("It costs 1,234, then more", "1234"),
    ],
)
def test_numeric_tolerance_matches(output, target):
    assert score("numeric_tolerance", output, target) == 1.0


@pytest.mark.parametrize(
    ("output", "target"),
    [
        ("3.1416", "3.14159"),
        ("-5", "5"),
        ("1/0", "0"),
        ("no idea", "3"),
        (None, "3"),
        ("1,2", "12"),
    ],
)
def test_numeric_tolerance_misses(output, target):
    assert score("numeric_tolerance", output, target) == 0.0


def test_numeric_tolerance_per_item_tolerance_and_constants():
    assert score("numeric_tolerance", "3.1416", "3.14159", tolerance=0.001) == 1.0
    assert score("numeric_tolerance", "3.1416", "3.14159", tolerance="0.001") == 1.0
    assert score("numeric_tolerance", "3.2", "3.14159", tolerance=0.001) == 0.0
    loose = load("numeric_tolerance", REL_TOL=0.01)
    assert loose["grade"](*make("101", "100")) == 1.0
    with pytest.raises(ValueError, match="tolerance"):
        score("numeric_tolerance", "1", "1", tolerance=-1)


def test_numeric_tolerance_huge_numbers_do_not_overflow():
    assert score("numeric_tolerance", "1e400", "1e400") == 1.0
    assert score("numeric_tolerance", "1e400", "2e400") == 0.0


def test_numeric_tolerance_target_without_number_raises():
    with pytest.raises(ValueError, match="no number"):
        score("numeric_tolerance", "4", "n/a")


# ------------------------------------------------------------------ multiple choice


@pytest.mark.parametrize(
    ("output", "target", "expected"),
    [
        ("A", "A", 1.0),
        ("A", "0", 1.0),  # index target (0-based)
        ("(A)", "Paris", 1.0),  # choice-text target
        ("b", "London", 1.0),
        ("B. London", "A", 0.0),
        ("C) Berlin", "Berlin", 1.0),
        ("paris", "A", 1.0),  # answer given as choice text
        ("E", "A", 0.0),  # past the last choice
        ("I think Paris", "A", 0.0),  # free text is not searched
        (None, "A", 0.0),
    ],
)
def test_multiple_choice(output, target, expected):
    assert score("multiple_choice", output, target, choices=CHOICES) == expected


def test_multiple_choice_numeric_choice_texts_win_over_indices():
    numbers = ["1", "2", "3", "4"]
    assert score("multiple_choice", "B", "2", choices=numbers) == 1.0
    assert score("multiple_choice", "2", "B", choices=numbers) == 1.0


def test_multiple_choice_one_based_index_and_row_choices():
    one_based = load("multiple_choice", INDEX_BASE=1)
    assert one_based["grade"](*make("A", "1", choices=CHOICES)) == 1.0
    arc = {"text": ["red", "green"], "label": ["A", "B"]}
    sample, item = make("B", "green")
    item["row"]["choices"] = arc  # the task has no choices; the row does
    assert load("multiple_choice")["grade"](sample, item) == 1.0
    assert score("multiple_choice", "B", "1", choices=json.dumps(CHOICES)) == 1.0


def test_multiple_choice_without_choices_compares_letters_indices_text():
    assert score("multiple_choice", "c", "C") == 1.0
    assert score("multiple_choice", "C", "2") == 1.0
    assert score("multiple_choice", "True", "true") == 1.0
    assert score("multiple_choice", "B", "A") == 0.0


def test_multiple_choice_bad_target_raises():
    with pytest.raises(ValueError, match="4 choices"):
        score("multiple_choice", "A", "Z", choices=CHOICES)
    with pytest.raises(ValueError, match="not a choice"):
        score("multiple_choice", "A", "Rome", choices=CHOICES)


# ------------------------------------------------------------------ LLM judge


def judge(replies, **row):
    ctx = FakeCtx(replies)
    sample, item = make("Paris", "Paris", raw="The capital is Paris.", **row)
    return load("llm_judge")["grade"](sample, item, ctx), ctx


def test_llm_judge_scores_and_keeps_reason():
    result, ctx = judge(['{"score": 8, "reason": "Correct and concise."}'])
    assert result["scores"] == {"judge_score": pytest.approx(7 / 9)}
    assert result["judge"]["reason"] == "Correct and concise."
    assert result["judge"]["score"] == 8
    assert result["judge"]["raw"].startswith('{"score"')
    kind, request = ctx.calls[0]
    assert (kind, request["model"]) == ("responses", "auto")
    user = request["input"][-1]["content"]
    assert "The capital is Paris." in user and "## Reference answer\nParis" in user
    assert "JSON" in request["input"][0]["content"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('```json\n{"score": "10", "reason": "ok"}\n```', 1.0),
        ('Verdict below.\n{"Score": 1, "Reason": "wrong"} Thanks!', 0.0),
        ('{"score": "7/10"}', 6 / 9),
        ("I would give it a score: 4 out of 10.", 3 / 9),
        ({"object": "response", "output": [
            {"type": "message", "content": [{"type": "output_text", "text": '{"score": 10}'}]}]},
         1.0),
    ],
)
def test_llm_judge_parses_messy_replies(reply, expected):
    result, _ = judge([reply])
    assert result["scores"]["judge_score"] == pytest.approx(expected)


def test_llm_judge_retries_then_fails_loudly():
    result, ctx = judge(["I cannot decide.", '{"score": 5}'])
    assert len(ctx.calls) == 2 and result["scores"]["judge_score"] == pytest.approx(4 / 9)
    with pytest.raises(ValueError, match="no score between 1 and 10.*after 2 attempts.*Still no"):
        judge(["I cannot decide.", "Still no."])
    with pytest.raises(ValueError, match="no score"):
        judge(['{"score": 11}', '{"score": 0}'])  # outside the 1-10 scale


def test_llm_judge_rubric_and_scale_can_change():
    _, ctx = judge(['{"score": 3}'], rubric="Only check the city name.")
    assert "Only check the city name." in ctx.calls[0][1]["input"][-1]["content"]
    ns = load("llm_judge", SCORE_MIN=0, SCORE_MAX=1, PARSE_RETRIES=0)
    ctx = FakeCtx(['{"score": 1, "reason": "pass"}'])
    assert ns["grade"](*make("x", "x"), ctx)["scores"]["judge_score"] == 1.0
    with pytest.raises(ValueError):
        ns["grade"](*make("x", "x"), FakeCtx(["nope"]))


# ------------------------------------------------------------------ embeddings


def embedding_reply(vectors, *, encode=False, order=None):
    data = []
    for index in order or range(len(vectors)):
        vector = vectors[index]
        if encode:
            vector = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "embedding": vector, "index": index})
    usage = {"prompt_tokens": 4, "total_tokens": 4}
    return {"object": "list", "data": data, "model": "e", "usage": usage}


def test_embedding_similarity_cosine():
    ctx = FakeCtx(embeddings=embedding_reply([[1.0, 1.0], [1.0, 0.0]]))
    result = load("embedding_similarity")["grade"](*make("Paris", "Paris, France"), ctx)
    assert result == {"scores": {"cosine": pytest.approx(1 / math.sqrt(2))}}
    assert ctx.calls == [("embeddings", {"model": "auto", "input": ["Paris", "Paris, France"]})]


def test_embedding_similarity_orders_by_index_and_decodes_base64():
    ns = load("embedding_similarity")
    reply = embedding_reply([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]], order=[1, 0])
    assert ns["embeddings"](reply, 2) == [[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]]
    encoded = embedding_reply([[0.5, -1.0], [1.0, -2.0]], encode=True)
    result = ns["grade"](*make("a", "b"), FakeCtx(embeddings=encoded))
    assert result["scores"]["cosine"] == pytest.approx(1.0)


def test_embedding_similarity_empty_answer_scores_zero_without_a_call():
    ctx = FakeCtx(embeddings=None)
    for output in (None, "  "):
        result = load("embedding_similarity")["grade"](*make(output, "x"), ctx)
        assert result == {"scores": {"cosine": 0.0}}
    assert ctx.calls == []


@pytest.mark.parametrize(
    "reply",
    [
        {"object": "list", "data": [{"embedding": [1.0], "index": 0}]},
        {"error": "boom"},
        embedding_reply([[0.0, 0.0], [1.0, 0.0]]),
        embedding_reply([[1.0, 0.0], [1.0, 0.0, 0.0]]),
    ],
)
def test_embedding_similarity_bad_replies_raise(reply):
    with pytest.raises(ValueError, match="embedding_similarity"):
        load("embedding_similarity")["grade"](*make("a", "b"), FakeCtx(embeddings=reply))


# ------------------------------------------------------------------ macro F1 (batch)


def batch(pairs):
    samples = []
    for index, (output, target) in enumerate(pairs):
        sample, item = make(output, target)
        sample["sample_index"] = index
        samples.append({**sample, "item": item})
    return samples


def test_macro_f1_hand_computed():
    samples = batch(
        [("pos", "pos"), ("neg", "pos"), ("neg", "neg"), ("NEG ", "neg"), (None, "neu")]
    )
    result = load("macro_f1")["grade_batch"](samples)
    # pos: tp1 fn1 -> 2/3; neg: tp2 fp1 -> 4/5; neu: fn1 -> 0
    assert result == {"metrics": {"macro_f1": pytest.approx((2 / 3 + 4 / 5 + 0) / 3)}}


def test_macro_f1_junk_predictions_add_no_class_but_declared_labels_do():
    samples = batch([("pos", "pos"), ("maybe?", "neg"), ("neg", "neg")])
    plain = load("macro_f1")["grade_batch"](samples)["metrics"]["macro_f1"]
    assert plain == pytest.approx((1.0 + 2 / 3) / 2)
    declared = load("macro_f1", LABELS=("pos", "neg", "maybe?", "unused"))
    result = declared["grade_batch"](samples)["metrics"]["macro_f1"]
    assert result == pytest.approx((1.0 + 2 / 3 + 0) / 3)


def test_macro_f1_case_sensitivity_and_empty_batch():
    samples = batch([("POS", "pos"), ("neg", "neg")])
    assert load("macro_f1")["grade_batch"](samples)["metrics"]["macro_f1"] == 1.0
    strict = load("macro_f1", CASE_SENSITIVE=True)["grade_batch"](samples)["metrics"]["macro_f1"]
    assert strict == 0.5  # 'POS' is not the class 'pos': a miss, and no class of its own
    with pytest.raises(ValueError, match="no samples"):
        load("macro_f1")["grade_batch"]([])
