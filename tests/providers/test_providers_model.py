"""Model: endpoint normalisation, OpenAI detection, key lookup, and a repr without secrets."""

from __future__ import annotations

import pytest

from evalnb.providers import Model
from evalnb.providers.model import OPENAI_BASE_URL, is_openai_host, normalise_base_url


def test_defaults_to_openai_responses():
    m = Model("gpt-4.1-mini")
    assert m.base_url == OPENAI_BASE_URL and OPENAI_BASE_URL.startswith("https://") and OPENAI_BASE_URL.endswith("/v1")
    assert m.api == "responses" and m.label == "gpt-4.1-mini"
    assert m.is_openai and is_openai_host(m.host)
    assert m.endpoint_key == (OPENAI_BASE_URL, "responses")


def test_base_url_is_normalised_so_equal_endpoints_compare_equal():
    a = Model("q", base_url="HTTP://LocalHost:8000/v1/", api="chat")
    b = Model("q", base_url="http://localhost:8000/v1", api="chat")
    assert a.base_url == "http://localhost:8000/v1"
    assert a == b and hash(a) == hash(b)
    assert a.endpoint_key == b.endpoint_key == ("http://localhost:8000/v1", "chat")
    assert Model("q", base_url="http://localhost:8000/v1", api="responses").endpoint_key != a.endpoint_key
    assert Model("gpt") == Model("gpt", base_url=OPENAI_BASE_URL)


@pytest.mark.parametrize("url", ["localhost:8000", "ftp://x/v1", "http:///v1", "http://u:p@h/v1",
                                 "http://h/v1?x=1", 5])
def test_bad_base_urls(url):
    with pytest.raises(ValueError):
        Model("m", base_url=url)  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [dict(name=""), dict(name="  "), dict(name="m", api="text"),
                                    dict(name="m", label=""), dict(name="m", headers={"a": 1}),
                                    dict(name="m", api_key=123)])
def test_bad_fields(kwargs):
    with pytest.raises(ValueError):
        Model(**kwargs)


@pytest.mark.parametrize("host,expected", [
    ("api.openai.com", True), ("API.OpenAI.com", True), ("us.api.openai.com", True),
    ("myorg.openai.azure.com", True), ("localhost", False), ("127.0.0.1", False),
    ("openai.com.evil.example", False), ("notopenai.com", False), ("api.openai.co", False),
])
def test_is_openai_host(host, expected):
    assert is_openai_host(host) is expected


def test_is_openai_follows_base_url():
    assert not Model("q", base_url="http://127.0.0.1:9/v1").is_openai
    assert Model("gpt", base_url=OPENAI_BASE_URL + "/").is_openai


def test_key_read_at_call_time_from_env(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    m = Model("gpt")
    assert m.resolve_api_key() is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-1234")
    assert m.resolve_api_key() == "sk-from-env-1234"
    assert m.request_headers()["Authorization"] == "Bearer sk-from-env-1234"
    assert Model("gpt", api_key="sk-explicit-99").resolve_api_key() == "sk-explicit-99"


def test_openai_key_not_sent_to_other_hosts_unless_asked(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    monkeypatch.setenv("LOCAL_KEY", "local-secret")
    local = Model("q", base_url="http://localhost:8000/v1")
    assert local.key_env is None and local.resolve_api_key() is None
    assert "Authorization" not in local.request_headers()
    asked = Model("q", base_url="http://localhost:8000/v1", api_key_env="OPENAI_API_KEY")
    assert asked.resolve_api_key() == "sk-real-openai-key"
    other = Model("q", base_url="http://localhost:8000/v1", api_key_env="LOCAL_KEY")
    assert other.resolve_api_key() == "local-secret"


def test_empty_env_key_counts_as_missing(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "")
    assert Model("gpt").resolve_api_key() is None


def test_repr_never_shows_the_key_or_header_values(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret-value")
    m = Model("gpt", api_key="sk-very-secret-123", headers={"X-Api-Key": "hdr-secret-456"},
              label="GPT")
    text = repr(m) + str(m) + str(m.describe())
    assert "sk-very-secret-123" not in text and "hdr-secret-456" not in text
    assert "sk-env-secret-value" not in text
    assert "api_key='***'" in repr(m) and "'X-Api-Key': ..." in repr(m)
    assert m.describe() == {"name": "gpt", "label": "GPT", "base_url": OPENAI_BASE_URL,
                            "api": "responses"}


def test_secrets_include_key_and_auth_headers():
    m = Model("q", base_url="http://h/v1", api_key="sk-abc-12345",
              headers={"Authorization": "Token tok-xyz-789", "X-Trace": "visible"})
    secrets = m.secrets()
    assert "sk-abc-12345" in secrets and "tok-xyz-789" in secrets
    assert "visible" not in secrets
    # user headers win over the key-derived Authorization (explicit beats implicit)
    assert m.request_headers()["Authorization"] == "Token tok-xyz-789"


def test_key_does_not_affect_equality():
    assert Model("gpt", api_key="sk-a-123456") == Model("gpt", api_key="sk-b-123456")


def test_normalise_base_url_keeps_path():
    assert normalise_base_url(" https://Example.com/api/v1/ ") == "https://example.com/api/v1"
