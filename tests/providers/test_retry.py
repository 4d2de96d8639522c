"""The retry policy: pure functions, checked with fixed clocks and seeded random numbers."""

from __future__ import annotations

import random
from email.utils import formatdate

import httpx
import pytest

from evalnb.providers.retry import (
    MAX_RETRY_AFTER_S,
    backoff_delay,
    is_retryable_status,
    next_delay,
    parse_retry_after,
)

NOW = 1_800_000_000.0


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 599])
def test_retryable_statuses(status):
    assert is_retryable_status(status)


@pytest.mark.parametrize("status", [200, 400, 401, 403, 404, 407, 410, 413, 422, 428, 430, 600])
def test_not_retryable_statuses(status):
    assert not is_retryable_status(status)


def test_retry_after_seconds_ms_and_case():
    assert parse_retry_after({"Retry-After": "3"}, NOW) == 3.0
    assert parse_retry_after({"retry-after": " 1.5 "}, NOW) == 1.5
    assert parse_retry_after({"retry-after-ms": "250"}, NOW) == 0.25
    # the finer ms hint wins over the seconds one
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "3"}, NOW) == 0.25
    assert parse_retry_after(httpx.Headers({"RETRY-AFTER": "2"}), NOW) == 2.0


def test_retry_after_http_date():
    assert parse_retry_after({"Retry-After": formatdate(NOW + 7, usegmt=True)}, NOW) == 7.0
    assert parse_retry_after({"Retry-After": formatdate(NOW - 30, usegmt=True)}, NOW) == 0.0


def test_retry_after_cap_negative_and_garbage():
    assert parse_retry_after({"Retry-After": "3600"}, NOW) == MAX_RETRY_AFTER_S
    assert parse_retry_after({"Retry-After": "3600"}, NOW, cap=5) == 5
    assert parse_retry_after({"Retry-After": "-4"}, NOW) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}, NOW) is None
    assert parse_retry_after({"Retry-After": "nan"}, NOW) is None
    assert parse_retry_after({"retry-after-ms": "x", "Retry-After": "2"}, NOW) == 2.0
    assert parse_retry_after({}, NOW) is None
    assert parse_retry_after(None, NOW) is None


def test_backoff_is_full_jitter_under_a_doubling_ceiling():
    rng = random.Random(1)
    for attempt, ceiling in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (6, 30.0), (50, 30.0)]:
        draws = [backoff_delay(attempt, rng=rng) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in draws)
        assert max(draws) > ceiling * 0.8  # the whole range is used, not just its bottom


def test_backoff_is_reproducible_and_configurable():
    a = [backoff_delay(i, rng=random.Random(5), base=0.01, cap=0.05) for i in range(6)]
    b = [backoff_delay(i, rng=random.Random(5), base=0.01, cap=0.05) for i in range(6)]
    assert a == b
    assert all(d <= 0.05 for d in a)
    assert backoff_delay(10_000, rng=random.Random(0)) <= 30.0  # no overflow
    with pytest.raises(ValueError):
        backoff_delay(-1, rng=random.Random(0))


def test_next_delay_prefers_retry_after_else_backoff():
    rng = random.Random(3)
    assert next_delay(0, 429, {"Retry-After": "2"}, rng, now=NOW) == 2.0
    assert next_delay(4, 503, {"retry-after-ms": "10"}, rng, now=NOW) == 0.01
    expected = backoff_delay(2, rng=random.Random(9), base=0.1, cap=1)
    assert next_delay(2, 500, {}, random.Random(9), now=NOW, base=0.1, cap=1) == expected
    # connection errors have no headers to honour
    assert next_delay(0, None, {"Retry-After": "9"}, random.Random(9), now=NOW) <= 0.5


def test_now_defaults_to_the_current_time():
    import time

    date = formatdate(time.time() + 30, usegmt=True)
    assert 28 <= parse_retry_after({"Retry-After": date}) <= 30
    assert 28 <= next_delay(0, 429, {"Retry-After": date}, random.Random(0)) <= 30
