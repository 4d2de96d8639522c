"""Output extraction: SPEC §6 plus the Output-extraction decisions, limits at both edges."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pydantic
import pytest
import regex

from evalnb.scoring.extraction import (
    MAX_INPUT_CHARS,
    MAX_MATCHES,
    MAX_PATTERN_CHARS,
    clean_output,
    compile_pattern,
    extract_output,
    make_extractor,
)


def number(text: str | None) -> str | None:
    return extract_output(text, {"type": "number"})


# --- compile_pattern ----------------------------------------------------------------------


def test_limits_are_the_documented_ones():
    assert (MAX_PATTERN_CHARS, MAX_INPUT_CHARS, MAX_MATCHES) == (1_000, 100_000, 10_000)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [("", 0), ("i", regex.I), ("m", regex.M), ("s", regex.S), ("x", regex.X),
     ("imsx", regex.I | regex.M | regex.S | regex.X), ("xsmi", regex.I | regex.M | regex.S | regex.X),
     ("ii", regex.I), (None, 0)],
)
def test_compile_pattern_flags(flags, expected):
    compiled = compile_pattern("a", flags)
    mask = regex.I | regex.M | regex.S | regex.X
    assert compiled.flags & mask == expected


@pytest.mark.parametrize("flags", ["I", "g", "u", "im ", "a", "L"])
def test_compile_pattern_rejects_other_flags(flags):
    with pytest.raises(ValueError, match="flag"):
        compile_pattern("a", flags)


def test_compile_pattern_flag_semantics():
    assert compile_pattern("answer", "i").search("ANSWER")
    assert compile_pattern("^b", "m").search("a\nb")
    assert not compile_pattern("^b").search("a\nb")
    assert compile_pattern("a.b", "s").search("a\nb")
    assert compile_pattern("a b # comment", "x").search("ab")


def test_pattern_length_limit_both_edges():
    assert compile_pattern("a" * 1_000).match("a" * 1_000)
    with pytest.raises(ValueError, match="1001 characters"):
        compile_pattern("a" * 1_001)


@pytest.mark.parametrize("pattern", ["(", "a)", "[a-", "a**", "\\", "(?P<1>a)", "x{99999999999}", "[z-a]", "a{2,1}", "*a"])
def test_compile_pattern_invalid_gives_compiler_message(pattern):
    with pytest.raises(ValueError) as info:
        compile_pattern(pattern)
    assert "invalid regex" in str(info.value)
    assert len(str(info.value)) > len("invalid regex ''") + len(pattern)  # carries the reason


def test_compile_pattern_error_text_from_compiler():
    with pytest.raises(ValueError, match="missing \\)"):
        compile_pattern("(ab")


def test_compile_pattern_non_string():
    with pytest.raises(ValueError):
        compile_pattern(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        compile_pattern("a", 1)  # type: ignore[arg-type]


def test_compile_pattern_is_cached():
    assert compile_pattern("cache-me(\\d)", "i") is compile_pattern("cache-me(\\d)", "i")
    assert compile_pattern("cache-me(\\d)", "i") is not compile_pattern("cache-me(\\d)", "")


# --- spec forms ---------------------------------------------------------------------------


class OutputExtractionLike(pydantic.BaseModel):
    """Stands in for the manifest's OutputExtraction (attributes, not keys)."""

    type: str = "none"
    lines: int | None = None
    pattern: str | None = None
    group: int | str | None = None
    flags: str | None = None
    labels: list[str] | None = None
    case_sensitive: bool | None = None


def test_spec_none_and_empty_dict_mean_none_type():
    assert extract_output("  <think>x</think> hi  ", None) == "hi"
    assert extract_output("  hi ", {}) == "hi"
    assert extract_output("  hi ", {"type": None}) == "hi"


def test_spec_as_model_and_as_plain_object():
    model = OutputExtractionLike(type="regex", pattern=r"Answer:\s*([A-D])", flags="i")
    assert extract_output("answer: c", model) == "c"
    assert extract_output("x\ny\nz", OutputExtractionLike(type="take_first", lines=2)) == "x\ny"
    assert extract_output("one two", SimpleNamespace(type="label_set", labels=["two"])) == "two"
    assert extract_output("7 apples", SimpleNamespace(type="number")) == "7"


@pytest.mark.parametrize("kind", ["bogus", "REGEX", "", 3])
def test_unknown_type_raises(kind):
    with pytest.raises(ValueError, match="unknown output_extraction type"):
        extract_output("text", {"type": kind})


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "take_first", "lines": 0},
        {"type": "take_first", "lines": -1},
        {"type": "take_first", "lines": True},
        {"type": "take_first", "lines": "2"},
        {"type": "regex"},
        {"type": "regex_last", "pattern": 5},
        {"type": "regex", "pattern": "("},
        {"type": "regex", "pattern": "a", "flags": "q"},
        {"type": "regex", "pattern": "(a)", "group": 2},
        {"type": "regex", "pattern": "(a)", "group": -1},
        {"type": "regex", "pattern": "(a)", "group": True},
        {"type": "regex", "pattern": "(a)", "group": 1.0},
        {"type": "regex_last", "pattern": "(?P<x>a)", "group": "y"},
        {"type": "label_set"},
        {"type": "label_set", "labels": []},
        {"type": "label_set", "labels": "AB"},
        {"type": "label_set", "labels": ["A", ""]},
        {"type": "label_set", "labels": ["A", 1]},
        {"type": "label_set", "labels": ["A"], "case_sensitive": "yes"},
    ],
)
def test_invalid_specs_raise_value_error(spec):
    with pytest.raises(ValueError):
        extract_output("some text", spec)
    with pytest.raises(ValueError):
        make_extractor(spec)


@pytest.mark.parametrize(
    "spec",
    [None, {"type": "none"}, {"type": "take_first"}, {"type": "regex", "pattern": "a"},
     {"type": "regex_last", "pattern": "a"}, {"type": "label_set", "labels": ["a"]}, {"type": "number"}],
)
def test_none_text_gives_none(spec):
    assert extract_output(None, spec) is None


def test_non_string_text_is_read_as_str():
    assert extract_output(42, {"type": "number"}) == "42"  # type: ignore[arg-type]
    assert extract_output(3.5, None) == "3.5"  # type: ignore[arg-type]


def test_make_extractor_reuses_checked_spec():
    extract = make_extractor({"type": "regex_last", "pattern": r"\d+"})
    assert extract("1 2 3") == "3"
    assert extract(None) is None


# --- none / clean_output ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("  hello \n", "hello"),
        ("", ""),
        ("   \n\t ", ""),
        ("<think>let me see</think>The answer is B", "The answer is B"),
        ("<think>\nmulti\nline\n</think>\n\nB", "B"),
        ("<reasoning>r</reasoning>B", "B"),
        ("A <think>x</think> B <think>y</think> C", "A  B  C"),
        ("<THINK>x</Think>B", "B"),
        ("<think>a<think>b</think>c</think>D", "D"),
        ("hidden reasoning</think>\nFinal: 4", "Final: 4"),
        ("x</think>y</reasoning>z", "z"),
        ("<think>unfinished reasoning, ran out of tokens", ""),
        ("  \n<reasoning>unfinished", ""),
        ("Use a <think> tag like this", "Use a <think> tag like this"),
        ("<think>a</reasoning>b", "b"),
        ("<thinking>kept</thinking>", "<thinking>kept</thinking>"),
        ("Answer<|endoftext|>", "Answer"),
        ("Answer<|im_end|>", "Answer"),
        ("Answer<|eot_id|>", "Answer"),
        ("Answer</s>", "Answer"),
        ("Answer<|im_end|><|endoftext|> </s>\n<|eot_id|>\n", "Answer"),
        ("Answer</s></s></s>", "Answer"),
        ("<|im_end|>Answer", "<|im_end|>Answer"),
        ("An</s>swer", "An</s>swer"),
        ("<|endoftext|>", ""),
        ("```python\nprint(1)\n```", "print(1)"),
        ("```\n42\n```", "42"),
        ("  ```json\n{\"a\": 1}\n```  ", '{"a": 1}'),
        ("```\n\n  x  \n\n```", "x"),
        ("```\n```", ""),
        ("```\nx\n```<|im_end|>", "x"),
        ("<think>plan</think>\n```\ncode\n```\n</s>", "code"),
        ("Here:\n```\nx\n```", "Here:\n```\nx\n```"),
        ("```\nx\n```\ntrailing", "```\nx\n```\ntrailing"),
        ("```\na\n```\nb\n```\nc\n```", "```\na\n```\nb\n```\nc\n```"),
        ("```x```", "```x```"),
        ('"quoted"', '"quoted"'),
        ("**bold**", "**bold**"),
    ],
)
def test_clean_output_rules(raw, cleaned):
    assert clean_output(raw) == cleaned
    assert extract_output(raw, {"type": "none"}) == cleaned


def test_clean_output_none_and_non_string():
    assert clean_output(None) == ""
    assert clean_output(12) == "12"


def test_none_type_returns_empty_string_not_none():
    assert extract_output("<think>only thinking</think>", {"type": "none"}) == ""


def test_cleaning_pathological_inputs_is_fast():
    start = time.perf_counter()
    assert clean_output(" " * 200_000 + "x" + " " * 200_000) == "x"
    assert clean_output("<think>" * 50_000) == ""
    assert clean_output("a" + "<think>" * 50_000).startswith("a<think>")
    assert clean_output("</think>" * 50_000 + "z") == "z"
    assert clean_output("ok" + "</s> " * 100_000) == "ok"
    assert clean_output("```\n" + "x" * 300_000 + "\n```") == "x" * 300_000
    assert time.perf_counter() - start < 5  # hang guard


# --- take_first ---------------------------------------------------------------------------


def test_take_first_default_one_line():
    assert extract_output("\n\n  first  \nsecond", {"type": "take_first"}) == "first"


def test_take_first_n_lines_skip_blank_and_strip():
    text = "  a \n\n   \n b\t\n\nc\nd"
    assert extract_output(text, {"type": "take_first", "lines": 3}) == "a\nb\nc"
    assert extract_output(text, {"type": "take_first", "lines": 10}) == "a\nb\nc\nd"


def test_take_first_after_cleaning():
    text = "<think>thought line</think>\n```\n  real answer\nmore\n```<|im_end|>"
    assert extract_output(text, {"type": "take_first"}) == "real answer"


def test_take_first_handles_crlf():
    assert extract_output("a\r\nb\r\n", {"type": "take_first", "lines": 2}) == "a\nb"


@pytest.mark.parametrize("text", ["", "   \n \n\t", "<think>x</think>", "<|endoftext|>"])
def test_take_first_no_line_is_none(text):
    assert extract_output(text, {"type": "take_first"}) is None


# --- regex / regex_last -------------------------------------------------------------------


def test_regex_first_match_group_default_1():
    spec = {"type": "regex", "pattern": r"Answer:\s*([A-D])", "group": 1, "flags": "i"}
    assert extract_output("answer: B ... Answer: C", spec) == "B"
    assert extract_output("Answer: B", {"type": "regex", "pattern": r"Answer:\s*([A-D])"}) == "B"


def test_regex_group_default_0_without_groups():
    assert extract_output("the value 42 is", {"type": "regex", "pattern": r"\d+"}) == "42"


def test_regex_explicit_group_0_and_2():
    spec = {"type": "regex", "pattern": r"(\w+)=(\d+)", "group": 0}
    assert extract_output("x=1", spec) == "x=1"
    assert extract_output("x=1", {**spec, "group": 2}) == "1"
    assert extract_output("x=1", {**spec, "group": "2"}) == "1"


def test_regex_named_group():
    spec = {"type": "regex", "pattern": r"(?P<letter>[A-D])\)", "group": "letter"}
    assert extract_output("I pick C) because", spec) == "C"
    assert extract_output("x", spec) is None


def test_regex_no_match_is_none():
    assert extract_output("nothing here", {"type": "regex", "pattern": r"Answer: (\w)"}) is None
    assert extract_output("", {"type": "regex_last", "pattern": r"(\w)"}) is None


def test_regex_group_that_did_not_participate_is_none():
    spec = {"type": "regex", "pattern": r"(A)|(B)", "group": 1}
    assert extract_output("B", spec) is None
    assert extract_output("B", {**spec, "group": 2}) == "B"


def test_regex_empty_group_is_empty_string():
    assert extract_output("Answer:", {"type": "regex", "pattern": r"Answer:(\w*)"}) == ""


def test_regex_runs_on_raw_text():
    text = "<think>Answer: A</think>\nAnswer: B<|im_end|>"
    assert extract_output(text, {"type": "regex", "pattern": r"Answer: (\w)"}) == "A"
    assert extract_output(text, {"type": "regex", "pattern": r"im_end"}) == "im_end"
    assert extract_output(text, {"type": "regex_last", "pattern": r"Answer: (\w)"}) == "B"


def test_regex_last():
    spec = {"type": "regex_last", "pattern": r"Answer:\s*([A-D])"}
    assert extract_output("Answer: A\nwait\nAnswer: D", spec) == "D"
    assert extract_output("Answer: A", spec) == "A"


def test_regex_flags_apply():
    assert extract_output("a\nB", {"type": "regex", "pattern": r"^b$", "flags": "im"}) == "B"
    assert extract_output("a\nB", {"type": "regex", "pattern": r"^b$", "flags": "i"}) is None


@pytest.mark.parametrize("kind", ["regex", "regex_last"])
def test_input_cap_both_edges(kind):
    spec = {"type": kind, "pattern": "Z"}
    inside = "x" * (MAX_INPUT_CHARS - 1) + "Z"
    assert len(inside) == 100_000
    assert extract_output(inside, spec) == "Z"
    outside = "x" * MAX_INPUT_CHARS + "Z"
    assert extract_output(outside, spec) is None


def test_input_cap_text_ends_at_the_cut():
    text = "x" * (MAX_INPUT_CHARS - 2) + "1234"
    assert extract_output(text, {"type": "regex", "pattern": r"\d+$"}) == "12"


def test_regex_last_match_count_both_edges():
    spec = {"type": "regex_last", "pattern": r"n(\d+)"}
    exactly = " ".join(f"n{i}" for i in range(1, 10_001))
    assert extract_output(exactly, spec) == "10000"
    one_more = " ".join(f"n{i}" for i in range(1, 10_002))
    assert len(one_more) < MAX_INPUT_CHARS
    assert extract_output(one_more, spec) == "10000"
    fewer = " ".join(f"n{i}" for i in range(1, 10_000))
    assert extract_output(fewer, spec) == "9999"


@pytest.mark.parametrize("kind", ["regex", "regex_last"])
def test_catastrophic_backtracking_is_no_match(kind):
    start = time.perf_counter()
    assert extract_output("a" * 50_000 + "b", {"type": kind, "pattern": r"(a+)+$"}) is None
    assert time.perf_counter() - start < 5  # hang guard; the time limit is 0.25 s


def test_timeout_does_not_break_later_calls():
    spec = {"type": "regex", "pattern": r"(a+)+$"}
    assert extract_output("a" * 30_000 + "b", spec) is None
    assert extract_output("aaa", spec) == "aaa"


# --- label_set ----------------------------------------------------------------------------

SENTIMENT = {"type": "label_set", "labels": ["positive", "neutral", "negative"], "case_sensitive": False}


def test_label_set_earliest_match_wins():
    assert extract_output("Negative, though partly positive.", SENTIMENT) == "negative"
    assert extract_output("It is neutral or positive", SENTIMENT) == "neutral"


def test_label_set_returns_label_as_written():
    spec = {"type": "label_set", "labels": ["Positive", "Negative"]}
    assert extract_output("the answer: POSITIVE", spec) == "Positive"


def test_label_set_case_insensitive_by_default():
    assert extract_output("YES", {"type": "label_set", "labels": ["yes", "no"]}) == "yes"


def test_label_set_case_sensitive():
    spec = {"type": "label_set", "labels": ["Yes", "No"], "case_sensitive": True}
    assert extract_output("yes, No", spec) == "No"
    assert extract_output("yes no", spec) is None


def test_label_set_whole_word_only():
    spec = {"type": "label_set", "labels": ["yes", "no"]}
    assert extract_output("nobody knows, yesterday", spec) is None
    assert extract_output("know-how: no.", spec) == "no"
    assert extract_output("(yes)", spec) == "yes"
    assert extract_output("yes_no", spec) is None
    assert extract_output("no1", spec) is None


def test_label_set_labels_with_punctuation_and_spaces():
    spec = {"type": "label_set", "labels": ["A)", "B)", "not entailment", "entailment"]}
    assert extract_output("I choose B) here", spec) == "B)"
    assert extract_output("not entailment", spec) == "not entailment"
    assert extract_output("entailment, not entailment", spec) == "entailment"
    assert extract_output("BA) x", spec) is None


def test_label_set_longer_label_wins_tie_at_same_position():
    spec = {"type": "label_set", "labels": ["not", "not entailment"]}
    assert extract_output("not entailment", spec) == "not entailment"
    assert extract_output("not sure", spec) == "not"


def test_label_set_longer_label_must_still_be_whole_word():
    spec = {"type": "label_set", "labels": ["A", "A1"]}
    assert extract_output("A1", spec) == "A1"
    assert extract_output("A12", spec) is None
    assert extract_output("A 1", spec) == "A"


def test_label_set_equal_length_tie_goes_to_list_order():
    assert extract_output("yes", {"type": "label_set", "labels": ["Yes", "YES"]}) == "Yes"
    assert extract_output("yes", {"type": "label_set", "labels": ["YES", "Yes"]}) == "YES"


def test_label_set_regex_metacharacters_are_literal():
    spec = {"type": "label_set", "labels": ["a.b", "(c)", "d+"]}
    assert extract_output("axb", spec) is None
    assert extract_output("x (c) y", spec) == "(c)"
    assert extract_output("d+", spec) == "d+"


def test_label_set_reads_cleaned_text():
    text = "<think>maybe negative?</think>positive<|im_end|>"
    assert extract_output(text, SENTIMENT) == "positive"


def test_label_set_no_match():
    assert extract_output("I cannot say", SENTIMENT) is None
    assert extract_output("", SENTIMENT) is None


def test_label_set_unicode_word_boundary():
    assert extract_output("négatif", {"type": "label_set", "labels": ["gatif"]}) is None
    assert extract_output("très positive", SENTIMENT) == "positive"


# --- number -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("There are 3 apples and 5 pears, so 8.", "8"),
        ("#### 1,234", "1234"),
        ("Step 1: 10 + 20 = 30\n#### 30", "30"),
        ("#### 72\nWait I mean 73", "72"),
        ("#### 5 then #### 6", "6"),
        ("The final answer is $\\boxed{42}$.", "42"),
        ("\\boxed{7} then more text 99", "7"),
        ("\\boxed{\\frac{1}{4}}", "1/4"),
        ("\\boxed{\\dfrac{3}{8}}", "3/8"),
        ("\\boxed{-\\frac{1}{2}}", "-1/2"),
        ("So the ANSWER IS 17 apples, but 3 remain", "17"),
        ("The answer is: 2.50", "2.5"),
        ("answer is 12. I hope this answer is helpful", "12"),
        ("I computed 5, but the answer is unclear", "5"),
        ("answeris 4 and 9", "9"),
        ("1,234", "1234"),
        ("1,234,567.89", "1234567.89"),
        ("$1,234.00", "1234"),
        ("1,2", "2"),
        ("12,34", "34"),
        ("1,2345", "2345"),
        ("1234,567", "567"),
        ("3.50", "3.5"),
        (".5", "0.5"),
        ("0.25", "0.25"),
        ("2.0", "2"),
        ("100", "100"),
        ("007", "7"),
        ("-3.5", "-3.5"),
        ("-1,234", "-1234"),
        ("#### -1,234.50", "-1234.5"),
        ("x = -7", "-7"),
        ("\u22124", "-4"),
        ("-0", "0"),
        ("-0.00", "0"),
        ("10-3", "3"),
        ("(2)-1", "1"),
        ("It costs 5.", "5"),
        ("It costs 5...", "5"),
        ("50%", "50"),
        ("1/4", "1/4"),
        ("-1/4", "-1/4"),
        ("2/4", "2/4"),
        ("03/08", "3/8"),
        ("1e3", "1000"),
        ("2.5E-2", "0.025"),
        ("1e999", "1E+999"),
        ("1{,}000", "1000"),
        ("123456789012345678901234567890.10", "123456789012345678901234567890.1"),
        ("<think>#### 99</think>The answer is 4<|im_end|>", "4"),
        ("<think>so 99</think>No marker here 4", "4"),
    ],
)
def test_number_extraction(text, expected):
    assert number(text) == expected


@pytest.mark.parametrize("text", ["", "no digits at all", "####", "\\boxed{x}", "the answer is -", "."])
def test_number_none_when_no_number(text):
    assert number(text) is None


def test_number_result_is_plain_string():
    assert isinstance(number("3"), str)


# --- arbitrary inputs never raise ---------------------------------------------------------

ALL_SPECS: list[Any] = [
    None,
    {"type": "take_first", "lines": 2},
    {"type": "regex", "pattern": r"(\d+)"},
    {"type": "regex_last", "pattern": r"(?P<n>\d+)", "group": "n"},
    {"type": "label_set", "labels": ["A)", "b"]},
    {"type": "number"},
]


@pytest.mark.parametrize("spec", ALL_SPECS)
@pytest.mark.parametrize(
    "text",
    ["\x00\ud800", "<think>" * 3, "</s>" * 10, "```", "```\n", "\\boxed{", "#### -", "9" * 5000,
     "1e" + "9" * 30, "\\frac{1}{0}", "1/0", "é" * 1000, "\r\n\x0b\x0c\x1c\u2028"],
)
def test_odd_inputs_never_raise(spec, text):
    result = extract_output(text, spec)
    assert result is None or isinstance(result, str)


def test_plain_text_extraction_does_not_load_the_regex_module_until_a_pattern_is_needed():
    # every run imports this module; `regex` and its patterns load on first use (~15 ms)
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from evalnb.scoring.extraction import clean_output, extract_output\n"
        "assert extract_output('  42 ', None) == '42' and 'regex' not in sys.modules\n"
        "assert clean_output('<think>x</think> 7') == '7' and 'regex' in sys.modules\n"
        "assert extract_output('so 3/4', {'type': 'number'}) == '3/4'\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr
