"""When a judge attempt is sent a second time while the first is still open (a hedged request).

A request that hangs (the provider accepted it and never answers) costs the whole ``timeout``
before it is retried, and holds its whole batch of traces meanwhile. Once an attempt has gone
unanswered for :meth:`HedgePolicy.delay` — HEDGE_FACTOR times the endpoint's recent
HEDGE_QUANTILE latency, never less than HEDGE_MIN_S, never once that reaches the ``timeout`` —
the endpoint sends the same request again while the first stays open; the first answer wins and
the other copy is cancelled (a slow first copy that answers after all is used, nothing is lost).
A budget keeps hedges rare whatever happens to the latency: each send earns HEDGE_SHARE of a
hedge (at most HEDGE_BURST saved up), each hedge spends one, so at most about 5 % of the sends
are hedges (like gRPC's retry throttling), and a latency shift costs no storm of copies.

A hedge is no failure and no rate signal: it does not count against ``max_retries``, and the
pacer gives it a slot like any other send.

>>> policy = HedgePolicy(timeout=10.0)
>>> policy.delay() is None  # too few answers to know the tail
True
>>> for i in range(64):
...     policy.observe(2.0 if i % 8 == 0 else 0.5)  # one answer in eight takes 2 s
>>> policy.delay()  # 1.5 x p99
3.0
>>> policy.allow(), policy.allow()  # the budget starts with one hedge
(True, False)
"""

from __future__ import annotations

from collections import deque

#: The latency quantile a hedge waits for, and how far past it (a factor).
HEDGE_QUANTILE = 0.99
HEDGE_FACTOR = 1.5
#: Never hedge sooner than this (seconds).
HEDGE_MIN_S = 1.0
#: Answers needed before the tail is trusted, how many recent ones are kept, and how often
#: (answers) the quantile is recomputed.
HEDGE_MIN_SAMPLES = 50
HEDGE_WINDOW = 512
HEDGE_REFRESH = 32
#: Each attempt earns this share of a hedge; at most HEDGE_BURST hedges are saved up.
HEDGE_SHARE = 0.05
HEDGE_BURST = 10.0


class HedgePolicy:
    """The hedge delay of one endpoint (from its recent latencies) and the hedge budget."""

    def __init__(self, timeout: float, *, enabled: bool = True) -> None:
        self.timeout = timeout
        self.enabled = enabled
        """False (the judge's ``hedge: false``): no attempt is ever sent twice."""
        self._latencies: deque[float] = deque(maxlen=HEDGE_WINDOW)
        self._since = 0
        self._tail: float | None = None
        self._budget = 1.0
        self.hedges = 0
        """Hedges sent so far."""

    def observe(self, latency: float) -> None:
        """One answered attempt's latency (seconds, send to answer)."""
        self._latencies.append(latency)
        self._since += 1
        if len(self._latencies) >= HEDGE_MIN_SAMPLES and (self._tail is None or self._since >= HEDGE_REFRESH):
            self._since = 0
            ordered = sorted(self._latencies)
            self._tail = ordered[min(len(ordered) - 1, int(HEDGE_QUANTILE * len(ordered)))]

    def delay(self) -> float | None:
        """Seconds after its send an unanswered attempt is hedged (None: not hedged)."""
        if self._tail is None or not self.enabled:
            return None
        delay = max(HEDGE_FACTOR * self._tail, HEDGE_MIN_S)
        return delay if delay < self.timeout else None

    def earn(self) -> None:
        """An attempt was sent: the budget grows by HEDGE_SHARE of a hedge."""
        self._budget = min(self._budget + HEDGE_SHARE, HEDGE_BURST)

    def allow(self) -> bool:
        """Whether a hedge may be sent now (spends one from the budget when it may)."""
        if self._budget < 1.0:
            return False
        self._budget -= 1.0
        self.hedges += 1
        return True
