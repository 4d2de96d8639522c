"""One redaction rule for everything evalnb shows or keeps: errors, outputs, the store, exports.

Known secrets (the keys of the run's models, judges and embedding models, and credential
header values) are masked wherever they occur in any string; so is anything shaped like a
bearer token, an OpenAI-style ``sk-`` key, a GitHub token (``ghp_``, ``github_pat_``...), a
Hugging Face token (``hf_``) or an AWS access key id (``AKIA``/``ASIA``); values under credential-named keys (``api_key``,
``Authorization``, ``*_secret``, ...) are masked whole; URLs lose ``user:password@`` and
credential query parameters (``redact_url``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["REDACTED", "Redactor", "is_secret_key", "model_secrets", "redact", "redact_url"]

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 4  # shorter strings would mask ordinary words

_SECRET_KEY_NAMES = frozenset(
    {
        "api_key", "apikey", "x_api_key", "authorization", "proxy_authorization", "password",
        "passwd", "secret", "client_secret", "access_token", "refresh_token", "auth_token",
        "bearer", "hf_token", "token", "cookie", "set_cookie", "private_key",
    }
)
_SECRET_KEY_SUFFIXES = ("_api_key", "_apikey", "_secret", "_password", "_access_token", "_auth_token")


_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}")
_BEARER_MASK = r"\1" + REDACTED
_SK = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}")
# Token shapes of other services: GitHub (classic ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_`` and
# fine-grained ``github_pat_``), Hugging Face (``hf_``) and AWS access key ids (``AKIA``/``ASIA``).
_SHAPES = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,}|hf_[A-Za-z0-9]{30,}|(?:AKIA|ASIA)[A-Z0-9]{16})\b"
)
_UNDERSCORE_MARKS = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "hf_")  # and AKIA/ASIA


def is_secret_key(name: str) -> bool:
    """True for dict keys that name credentials (api_key, Authorization, *_secret, ...)."""
    norm = name.strip().lower().replace("-", "_")
    return norm in _SECRET_KEY_NAMES or norm.endswith(_SECRET_KEY_SUFFIXES)


def redact_url(url: str) -> str:
    """Drop `user:password@` and credential-looking query parameters from a URL."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc.rsplit("@", 1)[-1] if "@" in parts.netloc else parts.netloc
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_secret_key(k) or k.lower() == "key" for k, _ in pairs):
            query = urlencode([(k, REDACTED if is_secret_key(k) or k.lower() == "key" else v) for k, v in pairs])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class Redactor:
    """The rule compiled for a set of known secrets; `add` more as a run learns them.

    One per store (its writers share it): every text and JSON value written goes through
    `text` or `value`. Swapping the compiled pattern is a single assignment, so a writer
    thread may use it while another thread adds a secret.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._known: set[str] = set()
        self._rule: tuple[tuple[str, ...], re.Pattern[str] | None] = ((), None)
        self.add(*secrets)

    def add(self, *secrets: str) -> None:
        new = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH} - self._known
        if new:
            self._known |= new
            known = sorted(self._known, key=len, reverse=True)
            # one assignment: a writer thread sees the old rule or the new one, never half of each
            self._rule = (tuple(known), re.compile("|".join(re.escape(s) for s in known)))

    @property
    def secrets(self) -> frozenset[str]:
        return frozenset(self._known)

    def text(self, text: str) -> str:
        """`text` with known secrets, bearer tokens and ``sk-``, GitHub, Hugging Face and AWS keys masked.

        Every stored field passes here, nearly always with nothing to mask: plain substring
        tests (C speed) decide whether a regex needs to run at all.
        """
        known, pattern = self._rule
        for secret in known:  # a loop, not any(): this runs ~10 times per stored sample
            if secret in text:
                text = pattern.sub(REDACTED, text)  # type: ignore[union-attr]
                break
        if "bearer" in text.lower():
            text = _BEARER.sub(_BEARER_MASK, text)
        # every mark holds "gh" but github_pat_ and hf_: three substring tests before the loop over
        # all seven (JSON of usage and scores has underscores in most stored samples)
        if ("_" in text and ("gh" in text or "hf_" in text or "github_pat_" in text)
                and any(mark in text for mark in _UNDERSCORE_MARKS)) or "AKIA" in text or "ASIA" in text:
            text = _SHAPES.sub(REDACTED, text)
        return _SK.sub(REDACTED, text) if "sk-" in text else text

    def value(self, obj: Any, keep: frozenset[str] = frozenset()) -> Any:
        """A copy of JSON-like `obj` with `text` applied to every string and credential-named keys' values masked.

        ``keep``: identifiers stored as written (a run's model labels and names, its task ids). A
        short key such as "mock" would otherwise turn the label "mock-model" into
        "[redacted]-model" in a run record while its samples keep "mock-model".
        """
        if isinstance(obj, str):
            return obj if obj in keep else self.text(obj)
        if isinstance(obj, Mapping):
            return {
                k: (REDACTED if isinstance(k, str) and is_secret_key(k) and v is not None else self.value(v, keep))
                for k, v in obj.items()
            }
        if isinstance(obj, (list, tuple)):
            return [self.value(v, keep) for v in obj]
        return obj


def redact(obj: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of `obj` (a string or JSON-like data) with every secret masked (see the module).

    Values under keys such as `api_key` or `Authorization` become "[redacted]"; any occurrence
    of a string in `secrets` (the actual keys in use), a bearer token or an ``sk-`` key inside
    any string is replaced.
    """
    return Redactor(secrets).value(obj)


def model_secrets(model: Any) -> list[str]:
    """The credential strings a Model-like object carries (its api_key and auth headers).

    `evalnb.Model.secrets()` also resolves a key read from the environment.
    """
    found: list[str] = []
    secrets_method = getattr(model, "secrets", None)
    if callable(secrets_method) and not isinstance(model, Mapping):
        found.extend(s for s in secrets_method() if isinstance(s, str))
    get = model.get if isinstance(model, Mapping) else lambda k, d=None: getattr(model, k, d)
    for name in ("api_key", "key", "token"):
        value = get(name, None)
        if isinstance(value, str) and value:
            found.append(value)
    headers = get("headers", None)
    if isinstance(headers, Mapping):
        for k, v in headers.items():
            if isinstance(v, str) and is_secret_key(str(k)):
                found.append(v)
                if v.lower().startswith("bearer "):
                    found.append(v[7:])
    return found


