"""The limits of one endpoint composed in one place (:meth:`Limits.slot`): see :mod:`assay.judges.pacing`."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel

from assay.judges.pacing.capacity import InFlightCap
from assay.judges.pacing.constants import (
    BLOCK_S,
    BLOCK_SHARE,
    JITTER_RECENT,
    MAX_LATENESS_S,
    RECLAIM_EVERY,
    RECLAIM_FAILURES,
    SHARED_LATE_SHARE,
    SPIN_S,
    TOKEN_BURST_S,
    WAKE_EARLY_S,
)
from assay.judges.pacing.controller import AdaptiveRate
from assay.judges.pacing.regimes import reclaim_delay
from assay.judges.turns import FIRST, TurnQueue


class Limits:
    """Every limit of one endpoint; ``async with limits.slot(tokens) as sent_at:`` wraps one attempt."""

    def __init__(
        self,
        *,
        max_concurrency: int | None,
        rps: float | None,
        tpm: float | None,
        adaptive: bool = True,
        limit_share: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.control = AdaptiveRate(rps, adaptive=adaptive)
        self.configured_rps = rps
        self.limit_share = limit_share
        """This process's share of a limit the provider announces (0: announcements are ignored)."""
        self._announced: float | None = None
        self.cap = InFlightCap(max_concurrency)
        self._shared: Any = None
        self.max_concurrency = max_concurrency
        self.tpm = tpm
        self.in_flight = 0
        self._clock = clock
        self._due = -math.inf
        """The grid time of the last send."""
        self._pace_lock: TurnQueue | None = None
        self._wake: anyio.Event | None = None
        """Set when a slot is handed back: the sender waiting on the clock looks again at once."""
        self._last_send = -math.inf
        self._prev = (-math.inf, -math.inf)  # the send and grid time before the last send
        self._not_before = -math.inf  # a reclaimed slot: the next send waits at least until then
        self._reclaimed_at = -(2**31)  # the send count of the last reclaimed slot
        self._reclaim_sent = -math.inf  # when the send that took a reclaimed slot went out
        self._reclaim_failures = 0
        """Sends in a reclaimed slot refused too, in a row (the limiter counts its refusals)."""
        self._reclaim_ok = False
        """Whether the last send in a reclaimed slot was answered (not refused): refusals are cheap."""
        self._send_count = 0
        self.shared_skipped = 0
        """Slots of a shared budget let go because they were reached late."""
        self._lateness = 0.0
        """How late the event loop wakes a sleeping sender (moving average, seconds)."""
        self._token_debt = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sem: TurnQueue | None = None
        self._tokens: Any = None  # aiolimiter.AsyncLimiter (imported lazily)

    @property
    def shared(self) -> Any:
        """A :class:`~assay.judges.shared_limit.SharedRate` when the budget is shared via Redis:
        its reserved slots are the send times (this process's pacer then only keeps its own sends
        under the rate and honours pauses)."""
        return self._shared

    @shared.setter
    def shared(self, value: Any) -> None:
        self._shared = value
        self.control.shared = value is not None

    def _bind_loop(self) -> tuple[TurnQueue, Any]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._sem is None:
            self._loop = loop
            self._sem = TurnQueue(self._wanted_cap())
            self._pace_lock = TurnQueue(1)
            self._wake = anyio.Event()
            self._tokens = None
            if self.tpm is not None:
                from aiolimiter import AsyncLimiter

                burst = self.tpm * TOKEN_BURST_S / 60.0
                self._tokens = AsyncLimiter(burst, TOKEN_BURST_S)
        return self._sem, self._tokens

    @asynccontextmanager
    async def slot(self, estimated_tokens: int, priority: int = FIRST) -> AsyncIterator[float]:
        """Wait for a place in flight, token capacity and a send time; yield the send time.
        ``priority``: :data:`~assay.judges.turns.RETRY` goes ahead of first attempts in both lines
        (the in-flight places and the pacer), see :mod:`assay.judges.turns`."""
        sem, tokens = self._bind_loop()
        await sem.acquire(priority)
        try:
            if tokens is not None:
                amount = self._token_amount(estimated_tokens, float(tokens.max_rate))
                if amount > 0:
                    await tokens.acquire(amount)
            sent_at = await self._wait_turn(estimated_tokens, priority)
            self.in_flight += 1
            try:
                yield sent_at
            finally:
                self.in_flight -= 1
        finally:
            sem.release()

    def _wanted_cap(self) -> int:
        return self.cap.update(rate=self.control.current(self._clock()), in_flight=self.in_flight)

    def on_answer(self, latency: float, sent_at: float | None = None) -> None:
        """An answered request (any status but 429): feed its latency to the in-flight cap."""
        if sent_at is not None and sent_at == self._reclaim_sent:
            self._reclaim_failures = 0  # the reclaimed slot was free after all
            self._reclaim_ok = True
        self.cap.observe(latency)
        self._resize()

    def _resize(self) -> None:
        if self._sem is None or self.cap.fixed is not None:
            return
        wanted = self._wanted_cap()
        if wanted != self._sem.total:
            self._sem.total = wanted

    def _token_amount(self, estimated: int, capacity: float) -> float:
        amount = estimated + self._token_debt
        self._token_debt = min(amount, 0.0)  # carry a credit forward, never a debt
        return min(max(amount, 0.0), capacity)

    def settle_tokens(self, estimated: int, actual: int) -> None:
        """Correct the token bucket once the provider reported what the request really used."""
        if self.tpm is not None:
            self._token_debt += actual - estimated

    async def _wait_turn(self, estimated_tokens: int = 0, priority: int = FIRST) -> float:
        """Wait for this request's send time; senders queue one behind the other (FIFO), and only
        the first of them waits on the clock, so a new rate or a pause applies at once (no slots
        reserved ahead at an old rate).

        The send times follow a grid of ``1/rate``, two actual sends are never closer than
        ``min_gap`` (so a late send moves the grid) and the sliding window never holds more than
        the rate allows. Sleeps end early by the loop's usual lateness and the last
        fraction of a millisecond is waited by yielding, so sends land on time; the final check and
        the record happen with no await between them.

        With a budget shared through Redis, the sender whose turn it is then reserves the next
        slot of the shared stream and waits for it just as precisely (one reservation per process
        at a time, so the processes' sends interleave in Redis's order)."""
        control = self.control
        assert self._pace_lock is not None
        async with self._pace_lock.turn(priority):
            while True:
                now = self._clock()
                if now < control.blocked_until:
                    await anyio.sleep(control.blocked_until - now)
                    continue
                rate = control.current(now)
                if rate is None:
                    if self._shared is not None:
                        now = await self._shared_turn(estimated_tokens)
                    control.record_send(now)
                    self._last_send = self._due = now
                    return now
                interval = 1.0 / rate
                due = self._due + interval
                if due < now - interval:
                    due = now  # idle for a while: start a new grid, never a burst to catch up
                due = max(due, self._last_send + control.min_gap(rate), self._not_before)
                wait = max(due - now, control.window_wait(now, rate))
                if wait <= 0:
                    if self._shared is not None:
                        now = await self._shared_turn(estimated_tokens)
                    control.record_send(now)
                    if due == self._not_before:
                        self._reclaim_sent = now
                    self._prev = (self._last_send, self._due)
                    self._last_send = now
                    self._due = due
                    self._send_count += 1
                    return now
                if wait < min(BLOCK_S, BLOCK_SHARE * interval):
                    end = now + wait
                    while self._clock() < end:  # no await: nothing else may take the loop now
                        pass
                    continue
                if wait < SPIN_S:
                    await anyio.lowlevel.checkpoint()  # a timer would oversleep by about a millisecond
                    continue
                planned = now + max(wait - self._lateness - WAKE_EARLY_S, 0.0)
                assert self._wake is not None
                with anyio.move_on_after(planned - now) as timer:
                    await self._wake.wait()
                if timer.cancelled_caught:  # woken by the clock, not by a slot handed back
                    self._lateness = min(0.9 * self._lateness + 0.1 * (self._clock() - planned), MAX_LATENESS_S)

    async def _shared_turn(self, estimated_tokens: int) -> float:
        """Reserve the shared budget's next slot and wait for it (the last moments without
        yielding, as for a local slot); returns the send time.

        A slot this process reached late (the event loop busy with other work when it was due)
        is let go and another reserved: the next slot is another process's, and a strict limiter
        would refuse that send for coming too soon after this one (a refusal costs the slot too,
        plus a retry)."""
        shared = self._shared
        interval = shared.interval or 1.0
        late_by = SHARED_LATE_SHARE * interval
        while True:
            until = await shared.reserve_at(estimated_tokens, self._clock)
            while True:
                now = self._clock()
                wait = until - now
                if wait <= 0:
                    break
                if wait < min(BLOCK_S, BLOCK_SHARE * interval):
                    while self._clock() < until:  # no await: nothing else may take the loop now
                        pass
                    now = self._clock()
                    break
                planned = now + max(wait - self._lateness - WAKE_EARLY_S - BLOCK_S / 2, 0.0)
                await anyio.sleep(planned - now)
                self._lateness = min(0.9 * self._lateness + 0.1 * max(self._clock() - planned, 0.0), MAX_LATENESS_S)
            if now - until <= late_by or shared.interval is None:
                return now
            self.shared_skipped += 1

    def on_rate_limited(self, *, sent_at: float, delay: float | None) -> float | None:
        """A 429 for the request sent at ``sent_at``: returns how long that request should wait
        before it is tried again (the server's hint, or a single pacing interval when the refusal
        was timing jitter: the pacer then gives it the next free slot)."""
        now = self._clock()
        control = self.control
        if sent_at == self._reclaim_sent:
            self._reclaim_failures += 1  # this limiter counts what it refuses: its slot was not free
            self._reclaim_ok = False
        # the refused request was the last one sent, and the slot before it was not reclaimed
        # too (two in a row are no jitter)
        reclaim = (
            self._shared is None  # a shared slot is Redis's: the next one is already someone's
            and sent_at == self._last_send
            and self._send_count - self._reclaimed_at > (RECLAIM_EVERY if self._reclaim_ok else JITTER_RECENT)
            and self._reclaim_failures < RECLAIM_FAILURES
        )
        retry = control.on_rate_limited(now=now, sent_at=sent_at, delay=delay, reclaim=reclaim, cheap=self._reclaim_ok)
        if control.reclaimed and control.rate is not None:
            self._last_send, self._due = self._prev
            self._not_before = sent_at + reclaim_delay(control.rate)
            self._reclaimed_at = self._send_count
            if self._wake is not None:  # the sender asleep until the lost slot's successor
                self._wake.set()
                self._wake = anyio.Event()
        self._resize()
        return retry

    def announce(self, rpm: float) -> None:
        """The provider announced its request limit (per minute) in an answer: pace at this
        process's share of it when that is below the configured rate (or none is configured)."""
        if rpm == self._announced:
            return
        self._announced = rpm
        rps = rpm * self.limit_share / 60.0
        if self.configured_rps is not None:
            rps = min(rps, self.configured_rps)
        if self.control.set_ceiling(rps):
            self._resize()

    def snapshot(self) -> dict[str, Any]:
        control = self.control
        now = self._clock()
        rate = control.current(now)
        return {
            "rate_rpm": None if rate is None else round(rate * 60.0, 2),
            "configured_rpm": None if control.configured is None else round(control.configured * 60.0, 2),
            "rate_decreases": control.decreases,
            "jitter_429s": control.jitter_refusals,
            "shared_slots_skipped": self.shared_skipped,
            "paused_s": round(max(control.blocked_until - now, 0.0), 3),
            "in_flight": self.in_flight,
            "max_in_flight": self.cap.value,
        }
