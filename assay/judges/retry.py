"""Retry policy for judge calls, configured once: what is retried, and how long to wait.

Retried (:class:`~assay.exceptions.JudgeRetryableError`): 429, 408, every 5xx (Anthropic's 529
"overloaded" included), timeouts, connection errors and resets. Never retried: any other 4xx
(:class:`~assay.exceptions.JudgeRequestError`, raised at once with the provider's message).

Waits use full jitter (a uniform draw in ``[0, min(cap, base·2^attempt)]``), except after a 429
that told us when to come back: then the wait is exactly that long. The server's hint is read, in
order, from ``retry-after-ms``, ``Retry-After`` (seconds or an HTTP date), the OpenAI
``x-ratelimit-reset-requests`` / ``-tokens`` durations (``"1s"``, ``"6m0s"``, ``"20ms"``) and the
Anthropic ``anthropic-ratelimit-*-reset`` RFC 3339 timestamps.

>>> parse_duration("6m0s"), parse_duration("20ms"), parse_duration("1h2m3.5s")
(360.0, 0.02, 3723.5)
>>> retry_delay({"retry-after": "2"})
2.0
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

from assay.exceptions import JudgeRetryableError

if TYPE_CHECKING:
    from tenacity import RetryCallState

#: Longest pause a server hint may impose (a tokens-per-minute reset can say "6m0s" when only a
#: little capacity is needed; beyond this we try again anyway and let the server say no).
MAX_HINT_S = 60.0
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 30.0

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_ANTHROPIC_KINDS = ("requests", "tokens", "input-tokens", "output-tokens")


def is_retryable_status(status: int) -> bool:
    return status in (408, 429) or 500 <= status <= 599


def parse_duration(value: str) -> float | None:
    """A Go-style duration (``"1s"``, ``"6m0s"``, ``"250ms"``) or a bare number of seconds."""
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    pos = 0
    total = 0.0
    for match in _DURATION_PART.finditer(value):
        if match.start() != pos:
            return None
        total += float(match[1]) * _UNITS[match[2]]
        pos = match.end()
    return total if pos == len(value) and pos > 0 else None


def parse_retry_after(value: str, *, now: float | None = None) -> float | None:
    """``Retry-After``: delta-seconds (integers, and decimals as some servers send) or an HTTP date."""
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def _parse_rfc3339(value: str, now: float) -> float | None:
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return max(when.timestamp() - now, 0.0)


def retry_delay(
    headers: Mapping[str, str],
    *,
    now: float | None = None,
    resets: tuple[ResetHint, ...] | None = None,
) -> float | None:
    """Seconds the server asked us to wait, from the first header that says so (see module doc).

    ``retry-after-ms`` and ``Retry-After`` are read for every provider; ``resets`` are the
    provider's own reset-header readers (default: OpenAI's and Anthropic's). ``headers`` must look
    names up case-insensitively (aiohttp's ``CIMultiDict`` does) or be given in lower case.
    """
    wall = time.time() if now is None else now
    hint: float | None = None
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            hint = max(float(ms) / 1000.0, 0.0)
        except ValueError:
            hint = None
    if hint is None and (ra := headers.get("retry-after")) is not None:
        hint = parse_retry_after(ra, now=wall)
    if hint is None:
        hint = _reset_hint(headers, wall, DEFAULT_RESETS if resets is None else resets)
    return None if hint is None else min(hint, MAX_HINT_S)


#: Headers in which providers announce their request limit per minute (OpenAI and the servers
#: that copy its headers: vLLM, LiteLLM, Azure; Anthropic).
ANNOUNCED_RPM_HEADERS = ("x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit")


def announced_rpm(headers: Mapping[str, str], names: Sequence[str] = ANNOUNCED_RPM_HEADERS) -> float | None:
    """The provider's request limit per minute, as its answer announces it (None: not announced).

    >>> announced_rpm({"x-ratelimit-limit-requests": "1800"})
    1800.0
    >>> announced_rpm({"x-ratelimit-limit-requests": "n/a"}) is None
    True
    """
    for name in names:
        raw = headers.get(name)
        if raw:
            try:
                value = float(raw)
            except ValueError:
                continue
            if math.isfinite(value) and value > 0:
                return value
    return None


#: A reader of one provider's reset headers: (headers, now) -> [(seconds, exhausted), ...].
ResetHint = Callable[[Mapping[str, str], float], list[tuple[float, bool]]]


def openai_resets(headers: Mapping[str, str], wall: float) -> list[tuple[float, bool]]:
    """OpenAI's ``x-ratelimit-reset-requests`` / ``-tokens`` durations (also vLLM, LiteLLM, Azure)."""
    out = []
    for kind in ("requests", "tokens"):
        raw = headers.get(f"x-ratelimit-reset-{kind}")
        delay = parse_duration(raw) if raw else None
        if delay is not None:
            out.append((delay, headers.get(f"x-ratelimit-remaining-{kind}", "").strip() == "0"))
    return out


def anthropic_resets(headers: Mapping[str, str], wall: float) -> list[tuple[float, bool]]:
    """Anthropic's ``anthropic-ratelimit-*-reset`` RFC 3339 timestamps."""
    out = []
    for kind in _ANTHROPIC_KINDS:
        raw = headers.get(f"anthropic-ratelimit-{kind}-reset")
        delay = _parse_rfc3339(raw, wall) if raw else None
        if delay is not None:
            out.append((delay, headers.get(f"anthropic-ratelimit-{kind}-remaining", "").strip() == "0"))
    return out


DEFAULT_RESETS: tuple[ResetHint, ...] = (openai_resets, anthropic_resets)


def _reset_hint(headers: Mapping[str, str], wall: float, resets: tuple[ResetHint, ...]) -> float | None:
    """The reset of the limit that ran out (remaining == 0), else the soonest reset given."""
    every = [hint for read in resets for hint in read(headers, wall)]
    exhausted = [delay for delay, out in every if out]
    if exhausted:
        return max(exhausted)
    return min(delay for delay, _ in every) if every else None


def full_jitter(attempt: int, *, base: float = BACKOFF_BASE_S, cap: float = BACKOFF_CAP_S) -> float:
    """AWS-style full jitter: uniform in ``[0, min(cap, base * 2**(attempt-1))]``."""
    return random.uniform(0.0, min(cap, base * 2 ** max(attempt - 1, 0)))


def wait_for(retry_state: RetryCallState) -> float:
    """tenacity ``wait=``: the server's hint after a 429 when it gave one, else full jitter."""
    outcome = retry_state.outcome
    exc = outcome.exception() if outcome is not None else None
    if isinstance(exc, JudgeRetryableError) and exc.retry_after is not None:
        return exc.retry_after
    return full_jitter(retry_state.attempt_number)
