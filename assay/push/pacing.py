"""The push pacer: a platform's published rate, kept under load by catching up missed slots.

A platform counts the requests of a window (LangSmith: 5,000 a minute per key); a pacer that only
spaces sends ``1/rate`` apart loses every slot a late wake-up (a busy event loop, a loaded
machine) skips, and never sends them: 79–92 % of the limit on a loaded 2-core VM. This one is a
token bucket: tokens accrue at the rate, a send spends one, so a send that was late leaves the
tokens it missed for the next sends, which go at once, three per interval at most. The catch-up
is bounded by the burst the platform allows: at most ``rate × window_s`` sends in any ``window_s`` seconds (the sliding
window a strict server counts; one second by default, ``burst_s`` in the target's section), one
less when that is ten or more (a margin for the network's jitter between send and arrival). A
429 empties the bucket and holds every send until its ``Retry-After`` (no catch-up burst into a
platform that just refused).

The clock and the sleep are injectable, so the tests drive it on a virtual clock with a late
wake-up of their choosing:

>>> t = [0.0]
>>> async def late_sleep(d):  # every wake-up 5 ms late
...     t[0] += d + 0.005
>>> p = Pacer(6000, clock=lambda: t[0], sleep=late_sleep)  # 100/s, at most 99 in any second
>>> import anyio
>>> sends = anyio.run(lambda: _sends(p, 1000))
>>> round(1000 / sends[-1])  # per second: the window's cap (a plain 10 ms spacing: 1 / 15 ms = 67)
99
>>> max(sum(1 for s in sends if w - 1.0 < s <= w) for w in sends)  # never over the window's cap
99
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Awaitable, Callable

import anyio

__all__ = ["Pacer"]

#: The shortest sleep the pacer asks for (below it, it would spin).
MIN_SLEEP_S = 0.0005
#: At most this many sends within any one interval (``1/rate``) while catching up: missed slots
#: come back a few at a time, not as one burst a server's window might see arrive in a bunch.
CATCH_UP_BURST = 3


class Pacer:
    """Send times at ``rpm`` with catch-up (module docs); ``rpm`` None: no pacing."""

    def __init__(
        self,
        rpm: float | None,
        *,
        window_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self.rate = rpm / 60.0 if rpm else None
        self.window_s = window_s
        allowed = (self.rate or 0.0) * window_s
        self.cap = max(1, math.floor(allowed) - (1 if allowed >= 10 else 0))
        """Sends allowed in any ``window_s`` seconds."""
        self._clock = clock
        self._sleep = sleep
        self._tokens = 1.0
        self._updated = clock()
        self._sent: deque[float] = deque()
        self._blocked_until = -math.inf
        self._lock: anyio.Lock | None = None
        self.caught_up = 0
        """Sends that went at once on tokens a late send left (the slots a plain spacing loses)."""

    async def wait(self) -> float:
        """Wait for this send's turn (FIFO among the senders); returns the send time."""
        if self.rate is None:
            return self._clock()
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            while True:
                now = self._clock()
                if now < self._blocked_until:
                    await self._sleep(self._blocked_until - now)
                    continue
                self._refill(now)
                sent = self._sent
                while sent and sent[0] <= now - self.window_s:
                    sent.popleft()
                interval = 1.0 / self.rate
                crowded = len(sent) >= CATCH_UP_BURST and sent[-CATCH_UP_BURST] > now - interval
                gap = sent[-CATCH_UP_BURST] + interval - now if crowded else 0.0
                if self._tokens >= 1.0 and len(sent) < self.cap and gap <= 0:
                    if self._tokens >= 2.0:
                        self.caught_up += 1
                    self._tokens -= 1.0
                    sent.append(now)
                    return now
                if self._tokens < 1.0:
                    wait = (1.0 - self._tokens) / self.rate
                elif len(sent) >= self.cap:
                    wait = sent[0] + self.window_s - now
                else:
                    wait = gap
                await self._sleep(max(wait, MIN_SLEEP_S))

    def _refill(self, now: float) -> None:
        assert self.rate is not None
        if now > self._updated:  # after a 429 the bucket fills only from the end of the hold
            self._tokens = min(float(self.cap), self._tokens + (now - self._updated) * self.rate)
            self._updated = now

    def on_rate_limited(self, delay: float | None) -> float:
        """A 429: every send waits ``delay`` (the ``Retry-After``; else one interval) and the
        bucket is emptied. Returns how long the refused request should wait."""
        interval = 1.0 / self.rate if self.rate else 0.0
        wait = delay if delay is not None else max(interval, MIN_SLEEP_S)
        now = self._clock()
        self._blocked_until = max(self._blocked_until, now + wait)
        self._tokens = 0.0
        self._updated = max(self._updated, now + wait)
        return wait


async def _sends(pacer: Pacer, n: int) -> list[float]:
    """``n`` send times from ``pacer`` (for the doctest)."""
    return [await pacer.wait() for _ in range(n)]
