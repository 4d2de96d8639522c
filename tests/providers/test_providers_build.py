"""Request building and reply parsing: pure functions, no network."""

from __future__ import annotations

import pytest

from evalnb.providers import (
    build_chat_request,
    build_responses_request,
    normalise_usage,
    parse_chat,
    parse_responses,
    unsent_fields,
)
from evalnb.providers.responses_compat import chat_to_responses, responses_to_chat
from evalnb.providers.parse import BadReply, decode_json, error_message

FULL = {
    "instructions": "Answer briefly.",
    "temperature": 0,
    "top_p": 1,
    "max_output_tokens": 64,
    "stop": ["\n\n"],
    "presence_penalty": 0.5,
    "frequency_penalty": 0.25,
    "tools": [{"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}}],
    "tool_choice": {"type": "function", "name": "f"},
    "parallel_tool_calls": False,
    "max_tool_calls": 3,
    "reasoning": {"effort": "low"},
    "text": {"format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}, "strict": True},
             "verbosity": "low"},
    "truncation": "auto",
    "service_tier": "flex",
    "top_k": 20,
    "min_p": 0.05,
    "repetition_penalty": 1.1,
    "do_sample": True,
    "chat_template_kwargs": {"enable_thinking": False},
    "prefill_think": False,
    "use_cache": False,
    "extra_body": {"guided_choice": ["A", "B"], "temperature": 0.3},
    "timeout_seconds": 30,
    "max_retries": 4,
    "max_empty_retries": 1,
}
PASSTHROUGH = {"top_k", "min_p", "repetition_penalty", "do_sample", "chat_template_kwargs",
               "prefill_think", "use_cache", "guided_choice"}
EXECUTION = {"timeout_seconds", "max_retries", "max_empty_retries", "extra_body"}


def test_responses_request_for_openai_has_only_compatible_fields():
    body = build_responses_request("gpt", "Q?", FULL, is_openai=True)
    assert body["model"] == "gpt" and body["input"] == "Q?"
    assert body["instructions"] == "Answer briefly." and body["max_output_tokens"] == 64
    assert body["tools"] == FULL["tools"] and body["tool_choice"] == FULL["tool_choice"]
    for key in ("reasoning", "text", "truncation", "service_tier", "max_tool_calls",
                "parallel_tool_calls", "temperature", "top_p"):
        assert body[key] == FULL[key]
    assert not PASSTHROUGH & body.keys()
    assert not EXECUTION & body.keys()
    assert not {"stop", "presence_penalty", "frequency_penalty"} & body.keys()
    assert body["temperature"] == 0  # extra_body is not applied for OpenAI


def test_responses_request_for_other_servers_adds_stop_penalties_and_passthrough():
    body = build_responses_request("qwen", "Q?", FULL, is_openai=False)
    assert body["stop"] == ["\n\n"] and body["presence_penalty"] == 0.5
    assert body["frequency_penalty"] == 0.25
    assert PASSTHROUGH <= body.keys()
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["temperature"] == 0.3  # extra_body may override ordinary fields
    assert not EXECUTION & body.keys()


def test_extra_body_never_overrides_identity_or_auth():
    gen = {"extra_body": {"model": "other", "input": "injected", "messages": [], "stream": True,
                          "api_key": "sk-x", "Authorization": "Bearer y", "stream_options": {},
                          "keep": 1}}
    body = build_responses_request("m", "real prompt", gen, is_openai=False)
    assert body == {"model": "m", "input": "real prompt", "keep": 1}
    chat = build_chat_request("m", "real prompt", gen, is_openai=False)
    assert chat["messages"] == [{"role": "user", "content": "real prompt"}]
    assert "stream" not in chat and chat["model"] == "m" and chat["keep"] == 1


def test_chat_request_for_openai():
    body = build_chat_request("gpt", "Q?", FULL, is_openai=True)
    assert body["messages"] == [{"role": "system", "content": "Answer briefly."},
                                {"role": "user", "content": "Q?"}]
    assert body["max_completion_tokens"] == 64 and "max_tokens" not in body
    assert body["stop"] == ["\n\n"] and body["presence_penalty"] == 0.5
    assert body["tools"] == [{"type": "function", "function": {
        "name": "f", "description": "d", "parameters": {"type": "object"}}}]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert body["reasoning_effort"] == "low" and body["verbosity"] == "low"
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "s", "schema": {"type": "object"}, "strict": True}}
    assert not {"max_tool_calls", "truncation", "instructions", "reasoning", "text",
                "max_output_tokens"} & body.keys()
    assert not PASSTHROUGH & body.keys() and not EXECUTION & body.keys()


def test_chat_request_for_other_servers():
    body = build_chat_request("qwen", "Q?", {"max_gen_toks": 16, "until": "END", "top_k": 5},
                              is_openai=False)
    assert body == {"model": "qwen", "messages": [{"role": "user", "content": "Q?"}],
                    "max_tokens": 16, "stop": "END", "top_k": 5}


def test_minimal_requests_and_none_values_skipped():
    assert build_responses_request("m", "p", None, is_openai=True) == {"model": "m", "input": "p"}
    assert build_responses_request("m", "p", {"temperature": None}, is_openai=False) == {
        "model": "m", "input": "p"}
    assert build_chat_request("m", "p", {}, is_openai=True) == {
        "model": "m", "messages": [{"role": "user", "content": "p"}]}


def test_chat_tools_already_in_chat_shape_pass_through():
    tool = {"type": "function", "function": {"name": "g"}}
    body = build_chat_request("m", "p", {"tools": [tool], "tool_choice": "auto",
                                         "text": {"format": {"type": "json_object"}}}, is_openai=True)
    assert body["tools"] == [tool] and body["tool_choice"] == "auto"
    assert body["response_format"] == {"type": "json_object"}


def test_unsent_fields_lists_what_each_endpoint_drops():
    assert unsent_fields(FULL, api="responses", is_openai=False) == []
    assert unsent_fields(FULL, api="chat", is_openai=False) == ["max_tool_calls", "truncation"]
    dropped = unsent_fields(FULL, api="responses", is_openai=True)
    assert {"stop", "presence_penalty", "frequency_penalty", "extra_body", "top_k"} <= set(dropped)
    assert "temperature" not in dropped and "timeout_seconds" not in dropped


# ---- parsing -------------------------------------------------------------------------------
def test_parse_responses_prefers_output_text():
    r = parse_responses({"id": "resp_1", "output_text": "A", "output": [],
                         "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}})
    assert (r.text, r.response_id, r.usage) == ("A", "resp_1", {
        "input_tokens": 3, "output_tokens": 1, "total_tokens": 4})


def test_parse_responses_concatenates_output_text_parts_only():
    body = {"id": "resp_2", "output": [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "thinking"}]},
        {"type": "function_call", "name": "f", "arguments": "{}"},
        {"type": "message", "content": [{"type": "output_text", "text": "Hel"},
                                         {"type": "refusal", "refusal": "no"},
                                         {"type": "output_text", "text": "lo"}]}]}
    r = parse_responses(body)
    assert r.text == "Hello" and r.usage is None


def test_parse_responses_rejects_wrong_shapes_and_failed_status():
    for bad in ([], {"id": "x"}, "text", None):
        with pytest.raises(BadReply):
            parse_responses(bad)
    with pytest.raises(BadReply, match="overloaded"):
        parse_responses({"output": [], "status": "failed", "error": {"message": "overloaded"}})


def test_parse_chat_content_forms():
    base = {"id": "c1", "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}
    r = parse_chat({**base, "choices": [{"message": {"content": "hi",
                                                     "reasoning_content": "secret thoughts"}}]})
    assert r.text == "hi" and r.response_id == "c1"
    assert r.usage == {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}
    assert parse_chat({"choices": [{"message": {"content": None}}]}).text == ""
    parts = [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]
    assert parse_chat({"choices": [{"message": {"content": parts}}]}).text == "ab"


def test_parse_chat_rejects_missing_choices():
    for bad in ({}, {"choices": []}, {"choices": ["x"]}, {"choices": [{"text": "legacy"}]}, [1]):
        with pytest.raises(BadReply):
            parse_chat(bad)


def test_normalise_usage():
    assert normalise_usage(None) is None
    assert normalise_usage({}) is None
    assert normalise_usage({"prompt_tokens": 2, "completion_tokens": 3}) == {
        "input_tokens": 2, "output_tokens": 3, "total_tokens": 5}
    assert normalise_usage({"total_tokens": 9}) == {"input_tokens": 0, "output_tokens": 0,
                                                    "total_tokens": 9}


def test_decode_json_and_error_message():
    assert decode_json(b'{"a": 1}') == {"a": 1}
    with pytest.raises(BadReply, match="not valid JSON"):
        decode_json(b'{"a": ')
    assert error_message(b'{"error": {"message": "Rate limit reached", "type": "x"}}') == "Rate limit reached"
    assert error_message(b'{"error": "plain"}') == "plain"
    assert error_message(b'{"detail": "Not Found"}') == "Not Found"
    assert error_message(b"<html>Bad Gateway</html>") == "<html>Bad Gateway</html>"
    assert error_message(b"") is None
    assert len(error_message(b'{"error": {"message": "' + b"x" * 2000 + b'"}}')) == 500


# ---- the grader bridge's translation -------------------------------------------------------
def test_responses_to_chat_translation():
    req = {"model": "auto", "instructions": "Judge.", "max_output_tokens": 5, "temperature": 0,
           "input": [{"role": "developer", "content": "rubric"},
                     {"role": "user", "content": [{"type": "input_text", "text": "Is it right?"}]}]}
    body = responses_to_chat(req, "judge", is_openai=False)
    assert body["model"] == "judge" and body["max_tokens"] == 5 and body["temperature"] == 0
    assert body["messages"] == [{"role": "system", "content": "Judge."},
                                {"role": "system", "content": "rubric"},
                                {"role": "user", "content": "Is it right?"}]
    simple = responses_to_chat({"input": "Hi"}, "j", is_openai=True)
    assert simple["messages"] == [{"role": "user", "content": "Hi"}]


def test_chat_to_responses_translation():
    out = chat_to_responses({"id": "c9", "model": "j", "choices": [{"message": {"content": "yes"}}],
                             "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
    assert out["output_text"] == "yes" and out["id"] == "c9" and out["object"] == "response"
    assert out["output"][0]["content"][0]["text"] == "yes"
    assert out["usage"] == {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}


def test_builders_accept_a_generation_object_and_its_aliases():
    from evalnb.suite.generation import Generation

    gen = Generation.from_value({"max_gen_toks": 7, "until": "STOP", "top_k": 3, "max_retries": 1})
    body = build_chat_request("m", "p", gen, is_openai=False)
    assert body == {"model": "m", "messages": [{"role": "user", "content": "p"}],
                    "stop": ["STOP"], "max_tokens": 7, "top_k": 3}
    assert build_chat_request("m", "p", gen.canonical(), is_openai=False) == body
