"""Template rendering: SPEC §4.1 plus the Templates decisions and the documented edge cases."""

from __future__ import annotations

import json
import time

import pytest

from evalnb.errors import TemplateError
from evalnb.suite.templates import render_spans, render_template, template_fields

ROW = {
    "question": "What is 2+2?",
    "n": 3,
    "x": 2.5,
    "ok": True,
    "bad": False,
    "nothing": None,
    "meta": {"source": "gsm8k", "tags": ["a", "b"], "0": "zero-key"},
    "answers": ["four", "4"],
    "unicode": "héllo — 日本",
}


# --- placeholders and paths ---------------------------------------------------------------


def test_top_level_field():
    assert render_template("Q: {{question}}", ROW) == "Q: What is 2+2?"


@pytest.mark.parametrize("template", ["{{ question }}", "{{question }}", "{{  question}}", "{{\tquestion\n}}"])
def test_whitespace_inside_braces(template):
    assert render_template(template, ROW) == "What is 2+2?"


def test_dotted_path_into_objects():
    assert render_template("{{meta.source}}", ROW) == "gsm8k"
    assert render_template("{{meta.tags.1}}", ROW) == "b"


def test_list_index():
    assert render_template("{{answers.0}}/{{answers.1}}", ROW) == "four/4"


def test_digit_key_on_dict_is_a_key():
    assert render_template("{{meta.0}}", ROW) == "zero-key"


def test_digit_segment_falls_back_to_int_key():
    assert render_template("{{m.0}}|{{m.1}}", {"m": {0: "int-zero", "1": "str-one"}}) == "int-zero|str-one"


def test_string_key_wins_over_int_key():
    assert render_template("{{m.0}}", {"m": {0: "int", "0": "str"}}) == "str"


@pytest.mark.parametrize(
    "template",
    ["{{missing}}", "{{meta.missing}}", "{{answers.2}}", "{{answers.-1}}", "{{answers.x}}",
     "{{question.0}}", "{{n.0}}", "{{nothing.a}}", "{{meta.tags.0.0}}"],
)
def test_missing_paths_render_empty(template):
    assert render_template("<" + template + ">", ROW) == "<>"


def test_tuple_indexing():
    assert render_template("{{t.1}}", {"t": ("a", "b")}) == "b"


# --- value formatting ---------------------------------------------------------------------


def test_numbers_use_str():
    assert render_template("{{n}} {{x}}", ROW) == "3 2.5"
    assert render_template("{{v}}", {"v": 1e20}) == "1e+20"
    assert render_template("{{v}}", {"v": -0.0}) == "-0.0"


def test_booleans_are_json_words():
    assert render_template("{{ok}} {{bad}}", ROW) == "true false"


def test_null_renders_empty():
    assert render_template("[{{nothing}}]", ROW) == "[]"


def test_strings_render_as_is():
    assert render_template("{{unicode}}", ROW) == "héllo — 日本"
    assert render_template("{{s}}", {"s": "{{question}}"}) == "{{question}}"  # not re-rendered


def test_objects_and_arrays_render_as_json_default_separators():
    assert render_template("{{meta}}", ROW) == '{"source": "gsm8k", "tags": ["a", "b"], "0": "zero-key"}'
    assert render_template("{{answers}}", ROW) == '["four", "4"]'


def test_json_keeps_non_ascii_and_key_order():
    row = {"obj": {"z": "é", "a": [1, None, True]}}
    assert render_template("{{obj}}", row) == '{"z": "é", "a": [1, null, true]}'


def test_non_json_values_inside_objects_use_str():
    class Odd:
        def __str__(self):
            return "odd!"

    assert render_template("{{o}}", {"o": {"k": Odd()}}) == '{"k": "odd!"}'
    assert render_template("{{o}}", {"o": Odd()}) == "odd!"


def test_cyclic_object_does_not_raise():
    cyclic: list = []
    cyclic.append(cyclic)
    assert render_template("{{c}}", {"c": cyclic}) == "[[...]]"


def test_row_is_whole_row_json():
    row = {"a": 1, "b": "é"}
    assert render_template("{{row}}", row) == '{"a": 1, "b": "é"}'
    assert json.loads(render_template("{{ row }}", ROW)) == ROW


def test_row_dotted_reads_a_field_named_row():
    assert render_template("{{row.a}}", {"a": 1}) == ""
    assert render_template("{{row.a}}", {"row": {"a": 7}}) == "7"


# --- choices ------------------------------------------------------------------------------


def test_choices_as_json_and_choice_list():
    choices = ["Paris", "Lyon", "Nîmes"]
    assert render_template("{{choices}}", {}, choices) == '["Paris", "Lyon", "Nîmes"]'
    assert render_template("{{choice_list}}", {}, choices) == "Paris\nLyon\nNîmes"


def test_task_choices_are_not_shadowed_by_row_fields():
    row = {"choices": ["row"], "choice_list": "row list"}
    assert render_template("{{choices}}|{{choice_list}}", row, ["A", "B"]) == '["A", "B"]|A\nB'


def test_row_choices_used_when_task_has_none():
    row = {"choices": ["x", "y"], "choice_list": "from row"}
    assert render_template("{{choices}}|{{choice_list}}", row) == '["x", "y"]|from row'
    assert render_template("{{choices}}|{{choice_list}}", {}) == "|"


def test_empty_task_choices_count_as_defined():
    row = {"choices": ["row"]}
    assert render_template("{{choices}}|{{choice_list}}", row, []) == "[]|"


def test_choices_index():
    assert render_template("{{choices.1}}", {"choices": ["r0", "r1"]}, ["A", "B"]) == "B"
    assert render_template("{{choices.1}}", {"choices": ["r0", "r1"]}) == "r1"
    assert render_template("{{choices.5}}", {}, ["A"]) == ""


def test_choice_list_renders_non_string_choices_like_values():
    assert render_template("{{choice_list}}", {}, [1, None, True]) == "1\n\ntrue"


def test_choices_must_be_a_list():
    with pytest.raises(TemplateError):
        render_template("{{choices}}", {}, "AB")  # type: ignore[arg-type]
    assert render_template("{{choices}}", {}, ("A",)) == '["A"]'


# --- literal text and edge syntax ---------------------------------------------------------


@pytest.mark.parametrize(
    "template",
    ["{{}}", "{{ }}", "{{ a b }}", "{{a..b}}", "{{.a}}", "{{a.}}", "{{a", "{{a}", "a}}", "{ {a} }",
     "{{a!}}", "{{é}}", "{{a/b}}", "{{\n}}"],
)
def test_non_placeholders_stay_literal(template):
    assert render_template(template, {"a": "X", "a b": "X", "é": "X"}) == template


def test_triple_braces_keep_outer_braces():
    assert render_template("{{{a}}}", {"a": "X"}) == "{X}"
    assert render_template("{{{{a}}}}", {"a": "X"}) == "{{X}}"
    assert render_template("{{a}}}", {"a": "X"}) == "X}"


def test_names_with_dash_and_underscore():
    assert render_template("{{a-b}} {{_c}} {{D9}}", {"a-b": 1, "_c": 2, "D9": 3}) == "1 2 3"


def test_text_outside_placeholders_copied_exactly():
    template = "  line1\r\n\t{% for %} ${x} {x} \\{{a}} \n\n"
    assert render_template(template, {"a": "A"}) == "  line1\r\n\t{% for %} ${x} {x} \\A \n\n"


def test_template_without_placeholders_is_identity():
    template = "no placeholders { } }} here"
    assert render_template(template, ROW) == template


def test_adjacent_placeholders():
    assert render_template("{{a}}{{b}}{{a}}", {"a": 1, "b": 2}) == "121"


def test_non_string_template_raises_template_error():
    for bad in (None, 3, b"{{a}}", ["{{a}}"]):
        with pytest.raises(TemplateError):
            render_template(bad, {})  # type: ignore[arg-type]
    with pytest.raises(TemplateError):
        template_fields(None)  # type: ignore[arg-type]
    with pytest.raises(TemplateError):
        render_spans(None, {})  # type: ignore[arg-type]


def test_non_dict_row_does_not_raise():
    assert render_template("{{a}}|{{row}}", None) == "|"  # type: ignore[arg-type]
    assert render_template("{{0}}", ["x"]) == "x"  # type: ignore[arg-type]


def test_numpy_values_render_like_python_values():
    np = pytest.importorskip("numpy")
    row = {"i": np.int64(3), "f": np.float64(2.5), "b": np.bool_(True), "a": np.array([1, 2])}
    assert render_template("{{i}} {{f}} {{b}} {{a}} {{a.1}}", row) == "3 2.5 true [1, 2] 2"


# --- template_fields and render_spans -----------------------------------------------------


def test_template_fields_in_order_without_duplicates():
    template = "{{ b.c }} {{a}} {{b.c}} {{row}} {{}} {{x y}} {{choices}}"
    assert template_fields(template) == ["b.c", "a", "row", "choices"]
    assert template_fields("plain") == []


def test_render_spans_segments_and_found_flags():
    spans = render_spans("Q: {{q}} [{{missing}}] {{nothing}}!", {"q": "hi", "nothing": None})
    assert spans == [
        ("Q: ", None, True),
        ("hi", "q", True),
        (" [", None, True),
        ("", "missing", False),
        ("] ", None, True),
        ("", "nothing", True),
        ("!", None, True),
    ]


def test_render_spans_for_special_names():
    spans = render_spans("{{row}}{{choices}}{{choice_list}}", {"a": 1}, ["A", "B"])
    assert spans == [('{"a": 1}', "row", True), ('["A", "B"]', "choices", True), ("A\nB", "choice_list", True)]
    assert render_spans("{{choices}}", {})[0] == ("", "choices", False)


def test_render_spans_join_equals_render_template():
    template = "{{{a}}} x {{b.0}} {{c}} {{ row }} {{choices}}"
    row = {"a": {"k": [1]}, "b": ["z"], "choices": "row"}
    for choices in (None, ["A"]):
        joined = "".join(text for text, _, _ in render_spans(template, row, choices))
        assert joined == render_template(template, row, choices)


def test_rendering_is_fast_enough_for_large_runs():
    template = "Question: {{question}}\nContext: {{meta.source}} {{answers.0}}\nChoices:\n{{choice_list}}\nAnswer:"
    start = time.perf_counter()
    for i in range(20_000):
        render_template(template, {"question": f"q{i}", "meta": {"source": "s"}, "answers": ["a"]}, ["A", "B"])
    assert time.perf_counter() - start < 5  # hang guard; typically ~0.05 s
