"""The limits of one judge endpoint, composed in one place (:meth:`Limits.slot`):

1. **concurrency** — how many requests are in flight (an anyio semaphore of ``max_concurrency``);
2. **tokens per minute** — an :class:`aiolimiter.AsyncLimiter` charged with each request's
   estimated tokens; the estimate is corrected from the reported usage on the next acquisition;
3. **the shared pause** — after a 429 nobody sends until the server's reset time
   (``blocked_until``), not only the request that was refused;
4. **requests per second** — an even pacer (one request every ``1/rate`` seconds, no bursts)
   whose rate the :class:`AdaptiveRate` controller moves: multiplicative decrease on 429, quick
   recovery to just below the rate that was refused, then a slow additive probe upwards after
   each quiet period. A run configured 3× above the server's real limit converges in a few
   seconds instead of storming.

The controller and the pacer hold only numbers (monotonic times), so they survive across event
loops; the semaphore and the token limiter are loop-bound and rebuilt when the loop changes (the
library's sync ``evaluate()`` runs a fresh loop per call).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio

#: The pacer runs at this fraction of the configured rate. A server counting requests in a sliding
#: one-second window refuses an exactly paced client whenever jitter bunches requests together;
#: 2% of headroom absorbs about 20 ms of jitter there, for a small, predictable cost.
PACE_MARGIN = 0.98
#: Seconds without a 429 after which the rate is raised one step.
QUIET_S = 1.0
#: Multiplicative decrease on a 429 (of the rate actually being sent).
BETA = 0.85
#: The gentler decrease for a 429 that comes after GENTLE_AFTER_S seconds without one.
BETA_GENTLE = 0.95
GENTLE_AFTER_S = 10.0
#: Quick recovery target, as a fraction of the rate that was refused.
RECOVER_TO = 0.95
#: Additive probe above the recovery target, as a fraction of the refused rate per quiet period;
#: halved each time the server refuses again at about the same rate (a stable limit), down to
#: PROBE_MIN, so 429s become rarer the longer a run lasts.
PROBE_STEP = 0.02
PROBE_MIN = 0.0025
#: Pause after a 429 that carried no reset hint.
DEFAULT_PAUSE_S = 1.0
#: The rate never drops below this (requests per second).
MIN_RATE = 0.05
#: How far back the send-rate measurement looks.
MEASURE_WINDOW_S = 3.0
#: The measurement needs at least this much history since the last pause.
MEASURE_MIN_S = 1.0
#: The sliding window the client keeps its own sends under (a little over a second, for the
#: jitter between when we send and when the server counts).
WINDOW_S = 1.02
#: How far back accepted/refused sends are remembered, and the least sending time (since the last
#: pause) from which the accepted count is trusted as the server's per-second limit.
ACCEPT_WINDOW_S = 2.0
ACCEPT_MIN_SPAN_S = 0.25
#: Seconds of token capacity the tokens-per-minute bucket may burst.
TOKEN_BURST_S = 10.0


class AdaptiveRate:
    """AIMD controller of one endpoint's request rate, plus the shared "blocked until" time.

    >>> ctl = AdaptiveRate(100.0)  # paced at 98: PACE_MARGIN
    >>> ctl.on_rate_limited(now=10.0, sent_at=10.0, delay=1.0)
    >>> round(ctl.rate, 2), ctl.blocked_until
    (83.3, 11.0)
    """

    def __init__(self, ceiling: float | None, *, adaptive: bool = True) -> None:
        self.configured = ceiling
        """The configured rate (requests/s)."""
        ceiling = None if ceiling is None else ceiling * PACE_MARGIN
        self.ceiling = ceiling
        """The pacing ceiling (requests/s): the configured rate less PACE_MARGIN."""
        self.rate = ceiling
        """The rate currently allowed (None: unlimited)."""
        self.adaptive = adaptive
        self.blocked_until = 0.0
        self.generation = 0
        """Bumped on every new pause: pacer reservations made before it are void."""
        self.refused_at: float | None = None
        """The last rate the server refused (the AIMD "w_max")."""
        self.decreases = 0
        self._probe = PROBE_STEP
        self._last_change = time.monotonic()
        self._last_decrease = -math.inf
        self._sends: deque[float] = deque()
        self._first_send = math.inf
        self._history: deque[float] = deque()
        """Send times of the last ACCEPT_WINDOW_S seconds (not cleared by a decrease)."""
        self._refused: deque[float] = deque()
        """Send times of the requests refused with a 429 in that window."""

    def current(self, now: float) -> float | None:
        """The allowed rate at ``now``, raised lazily by one step per elapsed quiet period."""
        if self.rate is None or self.refused_at is None:
            return self.rate
        steps = int((now - self._last_change) / QUIET_S)
        if steps > 0:
            self._last_change += steps * QUIET_S
            for _ in range(min(steps, 200)):
                self.rate = self._raised(self.rate, self.refused_at)
            if self.ceiling is not None:
                self.rate = min(self.rate, self.ceiling)
        return self.rate

    def _raised(self, rate: float, refused: float) -> float:
        target = RECOVER_TO * refused
        if rate < target:
            return rate + max(0.5 * (target - rate), self._probe * refused)
        if rate < 1.2 * refused:
            return rate + self._probe * refused
        return rate * 1.1  # far above the last refusal: the limit was lifted, find it quickly

    def record_send(self, now: float) -> None:
        if self._first_send == math.inf:
            self._first_send = now
        self._sends.append(now)
        while self._sends and self._sends[0] < now - MEASURE_WINDOW_S:
            self._sends.popleft()
        self._history.append(now)
        while self._history and self._history[0] < now - ACCEPT_WINDOW_S:
            self._history.popleft()

    def window_wait(self, now: float, rate: float) -> float:
        """Seconds to wait so that no window of WINDOW_S holds more sends than the rate allows.

        The pacer spaces sends evenly, but a late wake-up (the event loop busy with other work)
        bunches the next ones; a server counting requests in a sliding one-second window refuses
        the bunch. This keeps the count itself under the limit."""
        limit = max(1, math.floor(rate / PACE_MARGIN + 1e-9))
        history = self._history
        if len(history) < limit:
            return 0.0
        oldest = history[-limit]  # the limit-th most recent send
        return max(0.0, oldest + WINDOW_S - now)

    def accepted_rate(self, sent_at: float) -> float | None:
        """What the server accepted in the second before a refused request: "R requests per
        second" limits refuse the request after the R-th in a second, so this count is the limit
        itself (a token bucket's burst makes it an overestimate, which only makes the cut milder).
        Paused time inside that second counts as sending nothing, as it does for the server.
        None when too little was sent to tell."""
        start = max(sent_at - 1.0, self._first_send)
        if sent_at - start < ACCEPT_MIN_SPAN_S:
            return None
        sent = sum(1 for t in self._history if start <= t < sent_at)
        if sent == 0:
            return None
        refused = sum(1 for t in self._refused if start <= t < sent_at)
        return max(sent - refused, 1) / max(sent_at - start, 1.0)

    def measured(self, now: float) -> float | None:
        """Requests per second actually sent since the last pause (None without enough data)."""
        if len(self._sends) < 2 or now - self._sends[0] < MEASURE_MIN_S:
            return None  # too short to say; the configured rate stands
        return (len(self._sends) - 1) / (self._sends[-1] - self._sends[0])

    def on_rate_limited(self, *, now: float, sent_at: float, delay: float | None) -> None:
        """A 429: pause every sender until the reset, and lower the rate once per episode."""
        accepted = self.accepted_rate(sent_at)
        self._refused.append(sent_at)
        while self._refused and self._refused[0] < now - ACCEPT_WINDOW_S:
            self._refused.popleft()
        until = now + (DEFAULT_PAUSE_S if delay is None else delay)
        if until > self.blocked_until:
            self.blocked_until = until
            self.generation += 1
        if not self.adaptive or sent_at < self._last_decrease:
            return  # sent before the last decrease: it says nothing about the current rate
        sending = [r for r in (self.rate, self.measured(now)) if r is not None]
        current = min(sending) if sending else MIN_RATE
        if self.refused_at is not None and abs(current - self.refused_at) <= 0.1 * self.refused_at:
            self._probe = max(self._probe / 2, PROBE_MIN)
        else:
            self._probe = PROBE_STEP
        # A refusal after a long quiet stretch is the slow probe (or jitter) touching the limit:
        # step back gently. Refusals in quick succession mean we are far above it: back off hard.
        quiet = now - (self._last_decrease if self.decreases else self._first_send)
        beta = BETA_GENTLE if quiet > GENTLE_AFTER_S else BETA
        self.refused_at = current
        target = current * beta
        if accepted is not None and accepted * PACE_MARGIN < target:
            # far above the limit: go straight to what the server accepted, and take that (not the
            # refused send rate) as the limit the recovery returns to
            target = accepted * PACE_MARGIN
            self.refused_at = accepted
        self.rate = max(MIN_RATE, target)
        self.decreases += 1
        self._last_decrease = now
        self._last_change = max(now, self.blocked_until)
        self._sends.clear()


class Limits:
    """Every limit of one endpoint; ``async with limits.slot(tokens) as sent_at:`` wraps one attempt."""

    def __init__(
        self,
        *,
        max_concurrency: int,
        rps: float | None,
        tpm: float | None,
        adaptive: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.control = AdaptiveRate(rps, adaptive=adaptive)
        self.max_concurrency = max_concurrency
        self.tpm = tpm
        self.in_flight = 0
        self._clock = clock
        self._next_slot = 0.0
        self._token_debt = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sem: anyio.Semaphore | None = None
        self._tokens: Any = None  # aiolimiter.AsyncLimiter (imported lazily)

    def _bind_loop(self) -> tuple[anyio.Semaphore, Any]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._sem is None:
            self._loop = loop
            self._sem = anyio.Semaphore(self.max_concurrency)
            self._tokens = None
            if self.tpm is not None:
                from aiolimiter import AsyncLimiter

                burst = self.tpm * TOKEN_BURST_S / 60.0
                self._tokens = AsyncLimiter(burst, TOKEN_BURST_S)
        return self._sem, self._tokens

    @asynccontextmanager
    async def slot(self, estimated_tokens: int) -> AsyncIterator[float]:
        """Wait for a place in flight, token capacity and a send time; yield the send time."""
        sem, tokens = self._bind_loop()
        async with sem:
            if tokens is not None:
                amount = self._token_amount(estimated_tokens, float(tokens.max_rate))
                if amount > 0:
                    await tokens.acquire(amount)
            sent_at = await self._wait_turn()
            self.in_flight += 1
            try:
                yield sent_at
            finally:
                self.in_flight -= 1

    def _token_amount(self, estimated: int, capacity: float) -> float:
        amount = estimated + self._token_debt
        self._token_debt = min(amount, 0.0)  # carry a credit forward, never a debt
        return min(max(amount, 0.0), capacity)

    def settle_tokens(self, estimated: int, actual: int) -> None:
        """Correct the token bucket once the provider reported what the request really used."""
        if self.tpm is not None:
            self._token_debt += actual - estimated

    async def _wait_turn(self) -> float:
        control = self.control
        while True:
            now = self._clock()
            if now < control.blocked_until:
                await anyio.sleep(control.blocked_until - now)
                continue
            rate = control.current(now)
            if rate is None:
                control.record_send(now)
                return now
            generation = control.generation
            send_at = max(now, self._next_slot)
            self._next_slot = send_at + 1.0 / rate
            if send_at > now:
                await anyio.sleep(send_at - now)
            if generation != control.generation:
                continue  # a 429 paused everyone while we waited: queue again after the pause
            now = self._clock()
            wait = control.window_wait(now, rate)
            if wait > 0:
                await anyio.sleep(wait)
                continue
            control.record_send(now)
            return now

    def on_rate_limited(self, *, sent_at: float, delay: float | None) -> None:
        now = self._clock()
        generation = self.control.generation
        self.control.on_rate_limited(now=now, sent_at=sent_at, delay=delay)
        if self.control.generation != generation:
            self._next_slot = self.control.blocked_until

    def snapshot(self) -> dict[str, Any]:
        control = self.control
        now = self._clock()
        rate = control.current(now)
        return {
            "rate_rpm": None if rate is None else round(rate * 60.0, 2),
            "configured_rpm": None if control.configured is None else round(control.configured * 60.0, 2),
            "rate_decreases": control.decreases,
            "paused_s": round(max(control.blocked_until - now, 0.0), 3),
            "in_flight": self.in_flight,
        }
