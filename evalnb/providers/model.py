"""`Model`: which model to call, where, with which API — and how its key is found (never shown)."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

OPENAI_BASE_URL = "https://api.openai.com/v1"
OPENAI_KEY_ENV = "OPENAI_API_KEY"
APIS = ("responses", "chat", "completions")
# Header names whose values are credentials: redacted from errors, hidden from repr.
SECRET_HEADERS = frozenset({"authorization", "api-key", "x-api-key", "proxy-authorization", "cookie"})


@dataclass(frozen=True, repr=False)
class Model:
    """A candidate model on an OpenAI-compatible endpoint.

    >>> Model("gpt-4.1-mini")                                   # OpenAI; key from OPENAI_API_KEY
    Model('gpt-4.1-mini', base_url='https://api.openai.com/v1', api='responses')
    >>> Model("qwen2.5-7b", base_url="http://localhost:8000/v1/", api="chat")
    Model('qwen2.5-7b', base_url='http://localhost:8000/v1', api='chat')

    ``api``: ``"responses"`` (POST /responses), ``"chat"`` (POST /chat/completions) or
    ``"completions"`` (POST /completions: plain-text prompts, and the only API that can score
    by log-likelihood, with ``echo`` and ``logprobs``, as vLLM serves it).
    ``label`` names the model in results (default: ``name``); give distinct labels when two
    models share a name. The key is looked up when a call is made, not when the model is
    created: ``api_key`` if given, else the environment variable ``api_key_env``. When
    ``api_key_env`` is not given it defaults to ``OPENAI_API_KEY`` for OpenAI hosts only, so
    your OpenAI key is never sent to another server unless you ask for it
    (``api_key_env="OPENAI_API_KEY"``). ``headers`` are added to every request. Neither the
    key nor header values ever appear in ``repr``.
    """

    name: str
    base_url: str | None = None
    api: Literal["responses", "chat", "completions"] = "responses"
    api_key: str | None = field(default=None, compare=False)
    api_key_env: str | None = None
    headers: Mapping[str, str] | None = field(default=None, hash=False)
    label: str | None = None
    price: Mapping[str, float] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"Model name must be a non-empty string, got {self.name!r}")
        if self.api not in APIS:
            raise ValueError(f"Model api must be 'responses', 'chat' or 'completions', got {self.api!r}")
        object.__setattr__(self, "base_url", normalise_base_url(self.base_url or OPENAI_BASE_URL))
        if self.label is None:
            object.__setattr__(self, "label", self.name)
        elif not isinstance(self.label, str) or not self.label.strip():
            raise ValueError(f"Model label must be a non-empty string, got {self.label!r}")
        if self.api_key is not None and not isinstance(self.api_key, str):
            raise ValueError("Model api_key must be a string")
        if self.headers is not None:
            if not isinstance(self.headers, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.headers.items()
            ):
                raise ValueError("Model headers must be a mapping of str to str")
            object.__setattr__(self, "headers", dict(self.headers))
        if self.price is not None:
            from evalnb.providers.pricing import check_price

            object.__setattr__(self, "price", check_price(self.price, f"Model {self.name!r}: price"))

    @property
    def host(self) -> str:
        return _host(self.base_url)

    @property
    def is_openai(self) -> bool:
        """True for OpenAI's own API (and Azure OpenAI), which reject non-OpenAI fields."""
        return _is_openai_url(self.base_url)

    @property
    def endpoint_key(self) -> tuple[str, str]:
        """``(base_url, api)``: what makes two models' cached outputs comparable endpoints."""
        return (str(self.base_url), self.api)

    @property
    def key_env(self) -> str | None:
        """The environment variable the key is read from (None: no key from the environment)."""
        if self.api_key_env is not None:
            return self.api_key_env
        return OPENAI_KEY_ENV if self.is_openai else None

    def resolve_api_key(self) -> str | None:
        """The key to send, read now (so a key set after the model was created is used)."""
        if self.api_key:
            return self.api_key
        env = self.key_env
        return (os.environ.get(env) or None) if env else None

    def key_hint(self) -> str:
        """What to fix after a 401: ``401 from <url>: check OPENAI_API_KEY`` (the key this model sends)."""
        where = f"401 from {self.base_url}"
        if self.api_key:
            return f"{where}: check the api_key given to Model({self.name!r}, ...)"
        env = self.key_env
        if env:
            unset = "" if os.environ.get(env) else " (it is not set)"
            return f"{where}: check {env}{unset}"
        return (f"{where}: no key was sent; name its variable with Model(..., api_key_env='VAR') "
                "(CLI: --model NAME@URL,api_key_env=VAR)")

    def request_headers(self) -> dict[str, str]:
        """Headers for every request: ``Authorization: Bearer <key>`` (if any) and ``headers``."""
        out: dict[str, str] = {}
        key = self.resolve_api_key()
        if key:
            out["Authorization"] = f"Bearer {key}"
        if self.headers:
            out.update(self.headers)
        return out

    def secrets(self) -> list[str]:
        """Every credential this model sends: what error messages must never contain."""
        found = [self.resolve_api_key() or ""]
        for k, v in (self.headers or {}).items():
            if k.lower() in SECRET_HEADERS:
                found.append(v)
                found.append(v.split(" ", 1)[-1])  # the token of "Bearer <token>"
        return [s for s in found if len(s) >= 4]

    def describe(self) -> dict[str, Any]:
        """A JSON-able description without credentials (for the store and results)."""
        return {"name": self.name, "label": self.label, "base_url": self.base_url, "api": self.api}

    def __repr__(self) -> str:
        parts = [repr(self.name), f"base_url={self.base_url!r}", f"api={self.api!r}"]
        if self.label != self.name:
            parts.append(f"label={self.label!r}")
        if self.api_key is not None:
            parts.append("api_key='***'")
        if self.api_key_env is not None:
            parts.append(f"api_key_env={self.api_key_env!r}")
        if self.headers:
            parts.append(f"headers={{{', '.join(f'{k!r}: ...' for k in self.headers)}}}")
        if self.price is not None:
            parts.append(f"price={self.price!r}")
        return f"Model({', '.join(parts)})"

    __str__ = __repr__


@functools.lru_cache(maxsize=256)
def _host(base_url: str) -> str:
    return urlsplit(base_url).hostname or ""


@functools.lru_cache(maxsize=256)
def _is_openai_url(base_url: str) -> bool:
    return is_openai_host(_host(base_url))


def normalise_base_url(url: str) -> str:
    """Lower-case scheme and host, no trailing slash; ValueError if not an http(s) URL."""
    if not isinstance(url, str):
        raise ValueError(f"base_url must be a string, got {type(url).__name__}")
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base_url must be an http(s) URL like 'http://localhost:8000/v1', got {url!r}")
    if parts.username or parts.password:
        raise ValueError("base_url must not contain credentials; use api_key or headers")
    if parts.query or parts.fragment:
        raise ValueError(f"base_url must not have a query or fragment, got {url!r}")
    netloc = parts.netloc.lower()
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))


def is_openai_host(host: str) -> bool:
    """OpenAI's API hosts (``api.openai.com``, regional ``*.openai.com``, Azure OpenAI)."""
    host = host.lower().rstrip(".")
    return host == "api.openai.com" or host.endswith(".openai.com") or host.endswith(".openai.azure.com")
