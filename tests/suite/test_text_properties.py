"""Property tests: rendering and extraction accept any text and stay within their contracts."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalnb.errors import TemplateError
from evalnb.scoring.extraction import clean_output, extract_output
from evalnb.suite.templates import render_spans, render_template, template_fields

settings.register_profile("evalnb", deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("evalnb")

NAME = st.from_regex(r"[A-Za-z0-9_-]{1,8}(\.[A-Za-z0-9_-]{1,5}){0,2}", fullmatch=True)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6) | NAME, inner, max_size=4),
    max_leaves=12,
)
ROWS = st.dictionaries(st.text(max_size=8) | NAME | st.sampled_from(["row", "choices", "choice_list"]), JSONISH, max_size=6)
CHOICES = st.none() | st.lists(st.text(max_size=10), max_size=5)
TEMPLATE_PIECES = st.lists(
    st.text(max_size=12)
    | NAME.map(lambda n: "{{" + n + "}}")
    | NAME.map(lambda n: "{{ " + n + " }}")
    | st.sampled_from(["{{", "}}", "{", "}", "{{}}", "{{ a b }}", "{{{x}}}", "{{row}}", "{{choices}}", "{{choice_list}}"]),
    max_size=10,
).map("".join)
TEMPLATES = st.text() | TEMPLATE_PIECES

NOISE = st.sampled_from(
    ["<think>", "</think>", "<reasoning>", "</reasoning>", "```", "```python\n", "\n", " ", "<|im_end|>",
     "</s>", "<|endoftext|>", "<|eot_id|>", "####", "\\boxed{", "}", "\\frac{1}{4}", "answer is", "-", ".",
     ",", "1,234", "3.50", "1/4", "1e5", "0", "42", "A)", "yes", "No", "Answer: B", "\u2212", "{,}"]
)
TEXTS = st.text() | st.lists(NOISE | st.text(max_size=5), max_size=25).map("".join)

SPECS = st.sampled_from(
    [
        None,
        {"type": "none"},
        {"type": "take_first"},
        {"type": "take_first", "lines": 3},
        {"type": "regex", "pattern": r"Answer:\s*([A-D])", "flags": "i"},
        {"type": "regex", "pattern": r"(A)|(B)", "group": 2},
        {"type": "regex", "pattern": r".*", "flags": "s"},
        {"type": "regex_last", "pattern": r"(?P<d>\d+)", "group": "d"},
        {"type": "regex_last", "pattern": r"^", "flags": "m"},
        {"type": "label_set", "labels": ["yes", "no", "A)", "not entailment"]},
        {"type": "label_set", "labels": ["Yes", "No"], "case_sensitive": True},
        {"type": "number"},
    ]
)

CANONICAL_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?|-?[0-9]+/[0-9]+|-?[1-9](\.[0-9]+)?E[-+][0-9]+")


@given(template=TEMPLATES, row=ROWS, choices=CHOICES)
def test_render_template_returns_str(template, row, choices):
    assert isinstance(render_template(template, row, choices), str)


@given(template=TEMPLATES, row=ROWS, choices=CHOICES)
def test_render_spans_agree_with_render_template(template, row, choices):
    spans = render_spans(template, row, choices)
    assert "".join(text for text, _, _ in spans) == render_template(template, row, choices)
    assert set(template_fields(template)) == {path for _, path, _ in spans if path is not None}
    for text, path, found in spans:
        assert isinstance(text, str) and isinstance(found, bool)
        if not found:
            assert text == ""


@given(template=st.text().filter(lambda t: "{{" not in t), row=ROWS, choices=CHOICES)
def test_template_without_open_braces_is_identity(template, row, choices):
    assert render_template(template, row, choices) == template


@given(name=NAME, value=st.text())
def test_single_string_field_renders_its_value(name, value):
    head = name.split(".")[0]
    if head in {"row", "choices", "choice_list"}:
        return
    row: dict = {}
    node = row
    parts = name.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    assert render_template("<{{" + name + "}}>", row) == f"<{value}>"


@given(template=st.none() | st.integers() | st.binary() | st.lists(st.text()), row=ROWS)
def test_non_string_template_raises_template_error_only(template, row):
    with pytest.raises(TemplateError):
        render_template(template, row)


@given(text=TEXTS | st.none(), spec=SPECS)
def test_extract_output_returns_str_or_none(text, spec):
    result = extract_output(text, spec)
    assert result is None or isinstance(result, str)
    if text is None:
        assert result is None


@given(text=TEXTS)
def test_clean_output_has_no_surrounding_whitespace(text):
    cleaned = clean_output(text)
    assert cleaned == cleaned.strip()
    assert extract_output(text, {"type": "none"}) == cleaned


@given(text=TEXTS, lines=st.integers(min_value=1, max_value=5))
def test_take_first_lines_are_stripped_and_bounded(text, lines):
    result = extract_output(text, {"type": "take_first", "lines": lines})
    if result is not None:
        kept = result.split("\n")
        assert 1 <= len(kept) <= lines
        assert all(line and line == line.strip() for line in kept)


@given(text=TEXTS)
def test_number_is_canonical(text):
    result = extract_output(text, {"type": "number"})
    if result is not None:
        assert CANONICAL_NUMBER.fullmatch(result), result
        if "/" not in result:
            assert Decimal(result).is_finite()


@given(text=TEXTS, labels=st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=5), case=st.booleans())
def test_label_set_returns_one_of_the_labels(text, labels, case):
    result = extract_output(text, {"type": "label_set", "labels": labels, "case_sensitive": case})
    assert result is None or result in labels


@given(text=TEXTS)
def test_regex_result_is_part_of_the_text(text):
    for kind in ("regex", "regex_last"):
        result = extract_output(text, {"type": kind, "pattern": r"[0-9]+"})
        assert result is None or result in text
