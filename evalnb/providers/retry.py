"""The retry policy as pure functions: what is worth retrying, and how long to wait first.

No network or sleep in here, and the clock only as a default: give them a status, headers,
an attempt number, ``now`` and a seeded ``random.Random`` and they return a number, so the
policy is tested exactly.

Policy (SPEC Decisions, "Runs (local)"): connection errors, timeouts, 408, 409, 429 and 5xx
are retried; other 4xx are not. The wait is the server's ``Retry-After`` (or
``retry-after-ms``) when it gives one, capped at `MAX_RETRY_AFTER_S`; otherwise exponential
backoff with full jitter: a uniform draw from ``[0, min(cap, base * 2**attempt))``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping

MAX_RETRY_AFTER_S = 60.0
DEFAULT_BASE_S = 0.5
DEFAULT_CAP_S = 30.0


def is_retryable_status(status: int) -> bool:
    """408 timeout, 409 conflict, 429 rate limit and every 5xx: worth another try."""
    return status in (408, 409, 429) or 500 <= status <= 599


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:  # plain dicts are case-sensitive; httpx.Headers are not
        for key, v in headers.items():
            if key.lower() == name:
                return v
    return value


def parse_retry_after(
    headers: Mapping[str, str] | None, now: float | None = None, *, cap: float = MAX_RETRY_AFTER_S
) -> float | None:
    """Seconds the server asked us to wait, or None if it did not say (or said nonsense).

    Reads ``retry-after-ms`` (milliseconds, OpenAI's finer hint) first, then ``Retry-After``
    as seconds or an HTTP date (relative to `now`, a Unix time; default the current time —
    tests pass a fixed one). Negative waits become 0;
    long ones are capped at `cap`, so a confused server cannot stall a run for hours.
    """
    if not headers:
        return None
    ms = _header(headers, "retry-after-ms")
    if ms is not None:
        try:
            return _clamp(float(ms) / 1000.0, cap)
        except ValueError:
            pass
    value = _header(headers, "retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return _clamp(float(value), cap)
    except ValueError:
        pass
    try:
        from email.utils import parsedate_to_datetime  # lazy: the email package costs ~10 ms to import

        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return _clamp(when.timestamp() - (time.time() if now is None else now), cap)


def _clamp(seconds: float, cap: float) -> float | None:
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), cap)


def backoff_delay(
    attempt: int, *, rng: random.Random, base: float = DEFAULT_BASE_S, cap: float = DEFAULT_CAP_S
) -> float:
    """Full-jitter exponential backoff before retry number ``attempt + 1`` (attempt 0 = first).

    The ceiling doubles each time (``base``, ``2*base``, ``4*base``... up to ``cap``) and the
    wait is drawn uniformly below it, so many clients that failed together spread out.
    """
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    ceiling = min(cap, base * (2.0 ** min(attempt, 62)))
    return rng.uniform(0.0, ceiling)


def next_delay(
    attempt: int,
    status: int | None,
    headers: Mapping[str, str] | None,
    rng: random.Random,
    *,
    now: float | None = None,
    base: float = DEFAULT_BASE_S,
    cap: float = DEFAULT_CAP_S,
) -> float:
    """How long to wait before the next try: the server's ``Retry-After`` first, else backoff.

    `status` is None for connection errors and timeouts (which have no headers).
    """
    if status is not None:
        told = parse_retry_after(headers, now)
        if told is not None:
            return told
    return backoff_delay(attempt, rng=rng, base=base, cap=cap)
