"""Which stored runs this user's evalnb wrote: only their models may be sent a key on resume.

Why: a store is data, and often someone else's. Its model records say where a resume sends
requests and which environment variable's key goes with them; anyone can edit them with
``sqlite3``. So evalnb signs what a resume rebuilds (the run's models, judge and embedding
models, options, suite version and folder, and a SHA-256 of each stored suite manifest it reads:
``summary["suites"]``, with the prompt variants' record) with an HMAC under a per-user secret, made on first
use with mode 0600 (``$EVALNB_TRUST_KEY``, else ``$XDG_CONFIG_HOME/evalnb/trust.key``, default
``~/.config/evalnb/trust.key``). It lives with the user, not in ``EVALNB_HOME``, whose default
``./.evalnb`` travels with a project a colleague hands over: their secret must not come with
their store. A run whose record does not verify is *foreign*: `foreign_run` says what it
would reach, and `resume` refuses it unless the caller passes the models again or trusts it.

The manifests live in their own table, outside the signed record: someone handed a project
could edit the suite of a run the owner signed and point its dataset at ``~/.netrc``. So a
run's suite is trusted only when its stored text still hashes to what was signed
(`foreign_suite`); otherwise its suite is read like a foreign one (paths confined) while its
models stay the owner's. A run signed before suites were signed has no digests: its models
verify as before (the payload is unchanged when ``suites`` is absent), its suite is foreign.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path
from typing import Any, Callable

__all__ = ["foreign_run", "foreign_suite", "trust_key_path", "run_endpoints", "sign_run"]

_FIELD = "signed"  # the summary key holding the signature


def trust_key_path() -> Path:
    """Where this user's signing secret lives."""
    given = os.environ.get("EVALNB_TRUST_KEY")
    if given:
        return Path(given).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config) / "evalnb" / "trust.key"


def _secret(create: bool) -> bytes | None:
    path = trust_key_path()
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        if not create:
            return None
    except (OSError, ValueError):
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # made by another process just now
        return _secret(create=False)
    except OSError:
        return None
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    return _secret(create=False)


def _payload(run_id: str, suite_version: str, summary: dict[str, Any]) -> bytes:
    from evalnb.store._keys import canonical_json

    keys = ("base_dir", "models", "options")
    if "suites" in summary:  # signed since suites are: their digests and the variants' base version too
        keys += ("suites", "variants")
    signed = {k: summary.get(k) for k in keys}
    return canonical_json({"run_id": run_id, "suite_version": suite_version, **signed}).encode()


def suite_versions(suite_version: str, summary: dict[str, Any]) -> list[str]:
    """The stored suite versions a resume reads: the run's, and its variants' base suite."""
    variants = summary.get("variants") if isinstance(summary.get("variants"), dict) else {}
    base = variants.get("base_version")
    return [suite_version] + ([base] if isinstance(base, str) and base != suite_version else [])


def sign_run(run_id: str, suite_version: str, summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` with this user's signature of what a resume rebuilds (unsigned if no secret can be made)."""
    secret = _secret(create=True)
    if secret is None:
        return dict(summary)
    digest = hmac.new(secret, _payload(run_id, suite_version, summary), hashlib.sha256).hexdigest()
    return {**summary, _FIELD: digest}


def run_endpoints(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every model a resume of this stored run would call (role, name, base URL, key variable),
    and a Ray cluster's address when its executor names one (role ``executor``)."""
    summary = record.get("summary") or {}
    options = summary.get("options") or {}
    found = []
    for role, models in (("model", summary.get("models") or record.get("models") or []),
                         ("judge_model", [options.get("judge_model") or record.get("judge_model")]),
                         ("embedding_model", [options.get("embedding_model") or record.get("embedding_model")])):
        for m in models:
            if m is None:
                continue
            m = m if isinstance(m, dict) else {"name": str(m)}
            found.append({"role": role, "name": m.get("name"), "base_url": m.get("base_url"),
                          "api_key_env": m.get("api_key_env")})
    executor = options.get("executor")
    if isinstance(executor, dict) and executor.get("address"):  # a Ray cluster: the calls and keys go there
        found.append({"role": "executor", "name": executor.get("type"), "base_url": executor["address"],
                      "api_key_env": None})
    return found


def foreign_suite(record: dict[str, Any], digest: Callable[[str], str | None]) -> bool:
    """True unless the run is this user's (`foreign_run`) and the stored manifest a resume reads
    (``digest(version)``: the store's `Store.suite_digest`) is the one its signature covers."""
    if foreign_run(record):
        return True
    summary = record.get("summary") or {}
    signed = summary.get("suites")
    if not isinstance(signed, dict):  # signed before suites were
        return True
    variants = summary.get("variants") if isinstance(summary.get("variants"), dict) else {}
    version = variants.get("base_version") or record["suite_version"]
    given = signed.get(version)
    return not isinstance(given, str) or not hmac.compare_digest(given, digest(version) or "")


def foreign_run(record: dict[str, Any]) -> bool:
    """True unless this user's evalnb signed the run's record (as stored now)."""
    summary = record.get("summary") or {}
    given = summary.get(_FIELD) if isinstance(summary, dict) else None
    secret = _secret(create=False)
    if not isinstance(given, str) or secret is None:
        return True
    expected = hmac.new(secret, _payload(record["run_id"], record["suite_version"], summary), hashlib.sha256)
    return not hmac.compare_digest(expected.hexdigest(), given)
