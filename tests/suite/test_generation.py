"""Run-level generation settings: aliases, ranges, canonical form and unsafe extra_body keys."""

from __future__ import annotations

from typing import Any

import pytest

from evalnb.errors import ManifestError
from evalnb.suite.generation import (
    ALIASES,
    EXECUTION_FIELDS,
    OPENAI_COMPATIBLE_FIELDS,
    PASSTHROUGH_FIELDS,
    UNSAFE_EXTRA_BODY_KEYS,
    Generation,
    safe_extra_body,
)

SPEC_EXAMPLE = {
    "instructions": "Answer concisely.",
    "temperature": 0,
    "top_p": 1,
    "max_gen_toks": 128,
    "until": ["<|endoftext|>"],
    "max_retries": 2,
    "max_empty_retries": 1,
    "timeout_seconds": 120,
}


def errors_of(value: Any) -> dict[str, str]:
    with pytest.raises(ManifestError) as info:
        Generation.from_value(value)
    return {e["loc"]: e["msg"] for e in info.value.errors}


def test_defaults():
    gen = Generation.from_value(None)
    assert (gen.timeout_seconds, gen.max_retries, gen.max_empty_retries) == (120, 2, 0)
    assert gen.temperature is None and gen.stop is None
    assert gen.canonical() == {}


def test_spec_example_is_normalised():
    gen = Generation.from_value(SPEC_EXAMPLE)
    assert gen.max_output_tokens == 128 and gen.stop == ["<|endoftext|>"]
    assert gen.max_gen_toks is None and gen.until is None
    assert gen.canonical() == {
        "instructions": "Answer concisely.",
        "temperature": 0,
        "top_p": 1,
        "max_output_tokens": 128,
        "stop": ["<|endoftext|>"],
        "max_retries": 2,
        "max_empty_retries": 1,
        "timeout_seconds": 120,
    }


def test_aliases_and_canonical_names_give_the_same_settings():
    by_alias = Generation.from_value({"max_gen_toks": 512, "until": "\n\n", "temperature": 0})
    by_name = Generation.from_value({"max_output_tokens": 512, "stop": ["\n\n"], "temperature": 0})
    assert by_alias == by_name
    assert by_alias.canonical() == by_name.canonical() == {"temperature": 0, "max_output_tokens": 512, "stop": ["\n\n"]}


def test_alias_and_canonical_may_both_be_given_when_equal():
    gen = Generation.from_value({"max_gen_toks": 64, "max_output_tokens": 64, "until": "x", "stop": ["x"]})
    assert gen.canonical() == {"max_output_tokens": 64, "stop": ["x"]}


@pytest.mark.parametrize(
    "value, loc",
    [
        ({"max_gen_toks": 64, "max_output_tokens": 65}, "generation.max_gen_toks"),
        ({"until": ["a"], "stop": ["b"]}, "generation.until"),
        ({"until": "a", "stop": ["a", "b"]}, "generation.until"),
    ],
)
def test_alias_conflicts(value, loc):
    errors = errors_of(value)
    assert list(errors) == [loc]
    assert "different value" in errors[loc] and ALIASES[loc.split(".")[1]] in errors[loc]


def test_stop_string_becomes_a_list():
    assert Generation.from_value({"stop": "END"}).stop == ["END"]
    assert Generation.from_value({"stop": []}).stop == []


def test_alias_errors_are_reported_at_the_alias():
    assert errors_of({"max_gen_toks": 0}) == {"generation.max_gen_toks": "must be at least 1 (found 0)"}
    assert errors_of({"until": 5}) == {"generation.until": "must be a string or a list of strings (found 5)"}


RANGES = [
    ("timeout_seconds", 1, True),
    ("timeout_seconds", 3600, True),
    ("timeout_seconds", 0, False),
    ("timeout_seconds", 3601, False),
    ("max_retries", 0, True),
    ("max_retries", 10, True),
    ("max_retries", -1, False),
    ("max_retries", 11, False),
    ("max_empty_retries", 0, True),
    ("max_empty_retries", 10, True),
    ("max_empty_retries", -1, False),
    ("max_empty_retries", 11, False),
    ("temperature", 0, True),
    ("temperature", 2, True),
    ("temperature", -0.01, False),
    ("temperature", 2.01, False),
    ("top_p", 0, True),
    ("top_p", 1, True),
    ("top_p", 1.01, False),
    ("max_output_tokens", 1, True),
    ("max_output_tokens", 0, False),
    ("presence_penalty", -2, True),
    ("presence_penalty", 2, True),
    ("presence_penalty", 2.5, False),
    ("frequency_penalty", -2.5, False),
    ("min_p", 1, True),
    ("min_p", 1.5, False),
    ("top_k", -1, True),
    ("top_k", -2, False),
    ("repetition_penalty", 1.1, True),
    ("repetition_penalty", 0, False),
    ("max_tool_calls", 1, True),
    ("max_tool_calls", 0, False),
]


@pytest.mark.parametrize("field, value, ok", RANGES)
def test_ranges(field, value, ok):
    if ok:
        assert getattr(Generation.from_value({field: value}), field) == value
    else:
        errors = errors_of({field: value})
        assert list(errors) == [f"generation.{field}"]
        assert f"(found {value})" in errors[f"generation.{field}"]


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("temperature", "0.5", "must be a number"),
        ("timeout_seconds", 1.5, "must be an integer"),
        ("stop", 5, "a string or a list of strings"),
        ("stop", ["a", 1], "a string or a list of strings"),
        ("tool_choice", 3, "a string or an object"),
        ("prefill_think", 1, "true, false or a string"),
        ("do_sample", "yes", "true or false"),
        ("truncation", "always", "'auto' or 'disabled'"),
        ("extra_body", [1], "must be an object"),
        ("temperature", float("nan"), "finite"),
    ],
)
def test_type_errors_are_one_message(field, value, words):
    errors = errors_of({field: value})
    assert list(errors) == [f"generation.{field}"]
    assert words in errors[f"generation.{field}"]


def test_unknown_field_suggestion():
    assert errors_of({"temprature": 0}) == {"generation.temprature": "unknown field; did you mean temperature?"}
    assert errors_of({"max_tokens": 5})["generation.max_tokens"].startswith("unknown field")


def test_many_errors_at_once():
    errors = errors_of({"temperature": 3, "max_retries": 11, "max_gen_toks": 1, "max_output_tokens": 2, "bogus": 1})
    assert set(errors) == {"generation.temperature", "generation.max_retries", "generation.max_gen_toks", "generation.bogus"}


@pytest.mark.parametrize("value", [[], "temperature=0", 3])
def test_non_dict_value(value):
    assert "must be an object" in errors_of(value)["generation"]


def test_from_value_returns_a_generation_as_is():
    gen = Generation.from_value({"temperature": 0.2})
    assert Generation.from_value(gen) is gen


def test_every_field_is_accepted():
    value = {
        "instructions": "Be brief.",
        "temperature": 0.7,
        "top_p": 0.9,
        "max_output_tokens": 256,
        "stop": ["###"],
        "tools": [{"type": "function", "name": "f", "parameters": {}}],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "max_tool_calls": 3,
        "reasoning": {"effort": "low"},
        "text": {"format": {"type": "text"}},
        "truncation": "auto",
        "service_tier": "flex",
        "presence_penalty": 0.1,
        "frequency_penalty": -0.1,
        "top_k": 40,
        "min_p": 0.05,
        "repetition_penalty": 1.05,
        "do_sample": True,
        "extra_body": {"guided_choice": ["a", "b"]},
        "chat_template_kwargs": {"enable_thinking": False},
        "prefill_think": True,
        "use_cache": False,
        "timeout_seconds": 60,
        "max_retries": 0,
        "max_empty_retries": 3,
    }
    gen = Generation.from_value(value)
    assert gen.canonical() == value
    assert Generation.from_value(gen.canonical()) == gen
    assert Generation.from_value({"tool_choice": {"type": "function", "name": "f"}, "prefill_think": "<think>"}).prefill_think == "<think>"


def test_canonical_keeps_explicit_values_only():
    assert Generation.from_value({"max_retries": 2}).canonical() == {"max_retries": 2}
    assert Generation.from_value({"temperature": None}).canonical() == {}


def test_field_sets_partition_the_model():
    fields = set(Generation.model_fields) - set(ALIASES)
    assert OPENAI_COMPATIBLE_FIELDS | PASSTHROUGH_FIELDS | EXECUTION_FIELDS == fields
    assert not OPENAI_COMPATIBLE_FIELDS & PASSTHROUGH_FIELDS
    assert not (OPENAI_COMPATIBLE_FIELDS | PASSTHROUGH_FIELDS) & EXECUTION_FIELDS


def test_safe_extra_body_strips_unsafe_keys():
    body = {
        "model": "other",
        "input": "x",
        "messages": [],
        "stream": True,
        "api_key": "sk-1",
        "Authorization": "Bearer x",
        "X-API-Key": "k",
        "headers": {"a": "b"},
        "openai_api_key": "sk-2",
        "client_secret": "s",
        "guided_json": {"type": "object"},
        "max_tokens": 10,
        "top_a": 0.1,
    }
    assert safe_extra_body(body) == {"guided_json": {"type": "object"}, "max_tokens": 10, "top_a": 0.1}
    assert safe_extra_body(None) == {}
    assert {"model", "input", "messages", "stream"} <= UNSAFE_EXTRA_BODY_KEYS


def test_unsafe_extra_body_keys_never_reach_the_canonical_form():
    gen = Generation.from_value({"extra_body": {"api_key": "sk-secret", "model": "x", "guided_regex": "a+"}})
    assert gen.extra_body == {"guided_regex": "a+"}
    assert "sk-secret" not in str(gen.canonical())


def test_a_dropped_extra_body_key_such_as_stream_is_warned_about_naming_it():
    with pytest.warns(UserWarning, match=r"generation.extra_body: 'stream' ignored, not sent: evalnb reads each reply "
                                         r"whole and never streams") as caught:
        gen = Generation.from_value({"extra_body": {"stream": True, "seed": 1}})
    assert gen.canonical() == {"extra_body": {"seed": 1}}
    with pytest.warns(UserWarning, match="'api_key' ignored") as caught:
        Generation.from_value({"extra_body": {"api_key": "sk-secret"}})
    assert "sk-secret" not in str(caught[0].message)  # the key's name, never its value
