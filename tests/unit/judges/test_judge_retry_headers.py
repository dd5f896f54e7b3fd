"""Retry classification and the rate-limit hint headers."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from assay.judges.retry import (
    MAX_HINT_S,
    full_jitter,
    is_retryable_status,
    parse_duration,
    parse_retry_after,
    retry_delay,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("0.5s", 0.5), ("2", 2.0), ("750us", 0.00075)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "1x", "s1", "1s garbage"])
def test_bad_durations(text: str) -> None:
    assert parse_duration(text) is None


def test_retry_after_seconds_and_http_date() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("0.25") == 0.25
    now = time.time()
    when = format_datetime(datetime.fromtimestamp(now + 30, tz=UTC), usegmt=True)
    assert parse_retry_after(when, now=now) == pytest.approx(30, abs=1.0)
    assert parse_retry_after("not a date") is None


def test_retry_after_ms_wins_over_retry_after() -> None:
    assert retry_delay({"retry-after-ms": "250", "retry-after": "2"}) == 0.25
    assert retry_delay({"retry-after": "2", "x-ratelimit-reset-requests": "20ms"}) == 2.0


def test_openai_reset_of_the_exhausted_limit() -> None:
    headers = {
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-remaining-requests": "12",
        "x-ratelimit-reset-tokens": "6m0s",
        "x-ratelimit-remaining-tokens": "0",
    }
    assert retry_delay(headers) == MAX_HINT_S  # tokens ran out: 6 minutes, capped
    headers["x-ratelimit-remaining-tokens"] = "5000"
    assert retry_delay(headers) == 1.0  # nothing exhausted: the soonest reset


def test_anthropic_rfc3339_reset() -> None:
    now = time.time()
    reset = (datetime.fromtimestamp(now, tz=UTC) + timedelta(seconds=7)).isoformat().replace("+00:00", "Z")
    headers = {"anthropic-ratelimit-requests-reset": reset, "anthropic-ratelimit-requests-remaining": "0"}
    assert retry_delay(headers, now=now) == pytest.approx(7, abs=0.01)


def test_no_hint() -> None:
    assert retry_delay({}) is None
    assert retry_delay({"retry-after": "whenever"}) is None


def test_retryable_statuses() -> None:
    assert all(is_retryable_status(s) for s in (408, 429, 500, 502, 503, 529))
    assert not any(is_retryable_status(s) for s in (400, 401, 403, 404, 409, 422))


def test_full_jitter_bounds() -> None:
    draws = [full_jitter(4, base=0.5, cap=30) for _ in range(500)]
    assert all(0 <= d <= 4.0 for d in draws)
    assert max(draws) > 2.0  # the whole range is used, not a fixed backoff
    assert all(full_jitter(30, base=0.5, cap=3) <= 3 for _ in range(100))
