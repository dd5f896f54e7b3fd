"""What keeps a judge endpoint from hurting the run: secret redaction and the circuit breaker.

:class:`Secrets` blanks every configured secret (the API keys read from the environment, shared
by every endpoint of a pool) out of whatever the judge layer returns or stores: answer texts,
structured verdicts, error messages and cache entries. A provider that echoes the key back (in an
error body, a non-JSON 200, a verdict) cannot get it into a result row, a dead letter or the cache.

:class:`CircuitBreaker` turns "nothing answers" into one loud error instead of thousands of retried
requests: once the failures of an endpoint that has never answered reach one call's retry budget
(or, after it did answer, once it has failed for ``outage_s`` seconds in a row), the breaker opens
and every later call fails at once with :class:`~assay.exceptions.JudgeUnavailableError`.

>>> secrets = Secrets()
>>> secrets.add("sk-test-1234567890")
>>> secrets.redact("bad key sk-test-1234567890")
'bad key ***'
>>> secrets.redact_value({"reasoning": ["sk-test-1234567890"]})
{'reasoning': ['***']}
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from assay.exceptions import JudgeUnavailableError

#: Secrets shorter than this are not redacted (they would blank out ordinary words).
MIN_SECRET_LEN = 6
MASK = "***"
#: After an endpoint answered at least once, it must fail this long (and a retry budget's worth
#: of attempts) in a row before the breaker opens: a short blip is retried, an outage stops the run.
OUTAGE_S = 60.0


class Secrets:
    """A set of secret strings and the redaction of them (shared by a pool's endpoints)."""

    def __init__(self) -> None:
        self._values: set[str] = set()

    def add(self, value: str | None) -> None:
        """Remember ``value`` as a secret (ignored when empty or too short to be one)."""
        if value and len(value) >= MIN_SECRET_LEN:
            self._values.add(value)

    def update(self, other: Secrets) -> None:
        self._values |= other._values

    def __bool__(self) -> bool:
        return bool(self._values)

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        for value in self._values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def redact_value(self, value: Any) -> Any:
        """A JSON-like value with every string in it redacted (keys included)."""
        if not self._values:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {self.redact(str(k)): self.redact_value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact_value(v) for v in value]
        return value


class CircuitBreaker:
    """Counts an endpoint's transport failures; opens when it is clearly unreachable or failing.

    >>> breaker = CircuitBreaker("j", budget=3, clock=lambda: 0.0)
    >>> for _ in range(3):
    ...     breaker.failure("connection refused")
    >>> breaker.open, str(breaker.error).split(";")[0]
    (True, "judge 'j' is unavailable: 3 attempts failed and none succeeded")
    """

    def __init__(
        self,
        name: str,
        *,
        budget: int,
        outage_s: float = OUTAGE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.budget = max(budget, 1)
        self.outage_s = outage_s
        self._clock = clock
        self._failures = 0
        self._last_ok: float | None = None
        self._first_failure = 0.0
        self.error: JudgeUnavailableError | None = None

    @property
    def open(self) -> bool:
        return self.error is not None

    def check(self) -> None:
        """Raise the breaker's error when it is open (call before every attempt)."""
        if self.error is not None:
            raise self.error

    def success(self) -> None:
        """Any HTTP answer other than a 5xx: the endpoint is there."""
        self._failures = 0
        self._last_ok = self._clock()

    def failure(self, reason: str, *, answered: bool = False) -> None:
        """A connection error, timeout or 5xx; opens the breaker when the budget is spent.

        ``answered``: the endpoint did answer (a 5xx): it is reachable, so only a whole outage
        (``outage_s`` of nothing but failures) opens the breaker, never a few unlucky first calls."""
        now = self._clock()
        if answered and self._last_ok is None:
            self._last_ok = now  # reachable: from here on only an outage counts
        if self._failures == 0:
            self._first_failure = now
        self._failures += 1
        if self._failures < self.budget or self.error is not None:
            return
        if self._last_ok is None:
            why = f"{self._failures} attempts failed and none succeeded"
        elif now - self._first_failure >= self.outage_s:
            why = f"every attempt failed for {now - self._first_failure:.0f}s ({self._failures} attempts)"
        else:
            return
        self.error = JudgeUnavailableError(f"judge {self.name!r} is unavailable: {why}; last error: {reason}")
