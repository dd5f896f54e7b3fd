"""How many requests of one endpoint may be in flight (:class:`InFlightCap`)."""

from __future__ import annotations

import math
from collections import deque

from assay.judges.pacing.constants import (
    ASSUMED_LATENCY_S,
    AUTO_MAX_CONCURRENCY,
    AUTO_MIN_CONCURRENCY,
    AUTO_START_CONCURRENCY,
    LATENCY_HEADROOM,
    LATENCY_QUANTILE,
    LATENCY_WINDOW,
    SLOW_START_STEP,
)


class InFlightCap:
    """How many requests may be in flight: fixed (``max_concurrency`` set) or Little's law.

    With a known rate the automatic cap is ``rate × p90(latency) × 1.5 + 2`` (bounded by
    AUTO_MIN/AUTO_MAX), recomputed as answers arrive, so a user who sets only ``rpm`` gets that rpm
    whatever the model's latency. With no rate known (no ``rpm``, no 429 yet) it starts at
    AUTO_START_CONCURRENCY and grows by SLOW_START_STEP per answer while every slot is busy (like
    TCP's slow start),
    until the server answers 429 and the rate controller takes over.

    >>> cap = InFlightCap(None)
    >>> for _ in range(50):
    ...     cap.observe(3.0)
    >>> cap.update(rate=100.0, in_flight=0)
    452
    >>> InFlightCap(8).update(rate=100.0, in_flight=0)
    8
    """

    def __init__(self, fixed: int | None) -> None:
        self.fixed = fixed
        self.value = fixed if fixed is not None else AUTO_START_CONCURRENCY
        self._latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self._tail = ASSUMED_LATENCY_S
        self._since = 0

    @property
    def ceiling(self) -> int:
        """The most the cap can ever be (the connection pool's size)."""
        return self.fixed if self.fixed is not None else AUTO_MAX_CONCURRENCY

    def observe(self, latency: float) -> None:
        """One answered request's latency (seconds)."""
        self._latencies.append(latency)
        self._since += 1
        if self._since >= 16 or len(self._latencies) < 16:
            self._since = 0
            ordered = sorted(self._latencies)
            self._tail = ordered[min(len(ordered) - 1, int(LATENCY_QUANTILE * len(ordered)))]

    def update(self, *, rate: float | None, in_flight: int) -> int:
        """Recompute the cap from the allowed ``rate`` (requests/s, None: unknown)."""
        if self.fixed is not None:
            return self.fixed
        if rate is None:
            if in_flight >= self.value:  # every slot busy and no limit in sight: grow
                self.value = min(self.value + SLOW_START_STEP, AUTO_MAX_CONCURRENCY)
        else:
            wanted = math.ceil(rate * self._tail * LATENCY_HEADROOM) + 2
            self.value = max(AUTO_MIN_CONCURRENCY, min(wanted, AUTO_MAX_CONCURRENCY))
        return self.value
