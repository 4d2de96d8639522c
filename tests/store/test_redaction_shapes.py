"""Every token shape is masked inside any text, JSON with underscores included (the marks'
substring pre-checks must never skip one)."""

import json

import pytest

from evalnb.redaction import REDACTED, Redactor

TOKENS = [
    "ghp_" + "a1" * 18, "gho_" + "B2" * 18, "ghu_" + "c3" * 18, "ghs_" + "D4" * 18, "ghr_" + "e5" * 18,
    "github_pat_" + "F6_" * 10, "hf_" + "g7" * 17, "AKIA" + "ABCDEFGHIJ123456", "ASIA" + "ABCDEFGHIJ654321",
    "sk-" + "abc123" * 3,
]


@pytest.mark.parametrize("token", TOKENS)
def test_each_token_shape_is_masked_in_plain_text_and_in_json_with_underscores(token):
    redact = Redactor(["a-known-secret"]).text
    plain = f"the key is {token}, keep it"
    as_json = json.dumps({"input_tokens": 7, "note": token, "total_tokens": 8}, separators=(",", ":"))
    for text in (plain, as_json, token):
        out = redact(text)
        assert token not in out and REDACTED in out, (text, out)
    assert json.loads(redact(as_json))["input_tokens"] == 7  # a mask keeps the JSON valid


def test_underscores_without_a_token_shape_are_left_alone():
    redact = Redactor().text
    for text in ('{"input_tokens":7,"output_tokens":1}', "snake_case_name gh hf github", "a_b hf-x"):
        assert redact(text) == text
