"""The adaptive rate controller and the composed limits."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from assay.judges.limits import (
    BETA,
    CHEAP_WEIGHT,
    JITTER_ALLOWED,
    PACE_MARGIN,
    RECLAIM_EVERY,
    RECLAIM_FAILURES,
    SPACING_STEP,
    STARTUP_S,
    WINDOW_S,
    AdaptiveRate,
    Limits,
    reclaim_delay,
)


def refuse_burst(ctl: AdaptiveRate, start: float, count: int, delay: float | None = 0.0) -> None:
    """``count`` refusals of requests sent 1 ms apart (beyond what passes for jitter)."""
    for i in range(count):
        ctl.on_rate_limited(now=start + i * 0.001, sent_at=start + i * 0.001, delay=delay)


def refuse_sends(ctl: AdaptiveRate, start: float, count: int, every: float) -> None:
    """``count`` sends ``every`` seconds apart, each refused with ``Retry-After: 1`` 1 ms later."""
    for i in range(count):
        now = start + i * every
        ctl.record_send(now)
        ctl.on_rate_limited(now=now + 0.001, sent_at=now, delay=1.0)


def test_one_jitter_429_does_not_cut_the_rate() -> None:
    ctl = AdaptiveRate(30.0)
    for i in range(60):
        ctl.record_send(10.0 + i / (30 * PACE_MARGIN))
    ctl.on_rate_limited(now=12.0, sent_at=11.99, delay=0.003)
    assert ctl.rate == pytest.approx(30 * PACE_MARGIN)  # one early request is not a rate above the limit
    assert ctl.jitter_refusals == 1 and ctl.decreases == 0
    assert ctl.blocked_until == pytest.approx(12.003)  # the server's hint is still honoured


def test_decrease_once_per_episode_and_pause() -> None:
    ctl = AdaptiveRate(60.0)
    refuse_burst(ctl, 100.0, JITTER_ALLOWED + 1, delay=0.5)
    first = ctl.rate
    assert first == pytest.approx(60 * PACE_MARGIN * BETA)
    assert ctl.blocked_until == pytest.approx(100.5 + JITTER_ALLOWED * 0.001)
    # a 429 for a request sent before the decrease says nothing new about the rate
    ctl.on_rate_limited(now=100.01, sent_at=99.99, delay=0.5)
    assert ctl.rate == first
    assert ctl.blocked_until == pytest.approx(100.51)
    assert ctl.decreases == 1


def test_additive_recovery_stays_below_the_refused_rate_then_probes() -> None:
    ctl = AdaptiveRate(200.0)
    ctl.rate = 100.0
    refuse_burst(ctl, 0.0, JITTER_ALLOWED + 1)
    refused = ctl.refused_at
    assert refused == 100.0
    rates = [ctl.current(float(t)) for t in range(1, 6)]
    assert rates == sorted(rates)  # climbs
    assert all(r is not None and r < refused for r in rates)  # quick recovery stops short of the refusal
    later = ctl.current(40.0)
    assert later is not None and later > refused  # then the slow probe passes it
    assert ctl.current(500.0) == pytest.approx(200 * PACE_MARGIN)  # never above the configured ceiling


def test_refusals_at_the_configured_rate_recover_to_it_quickly() -> None:
    ctl = AdaptiveRate(30.0)
    refuse_burst(ctl, 0.0, JITTER_ALLOWED + 1)  # a cluster of jitter refusals at the configured rate
    assert ctl.rate is not None and ctl.rate < 30 * PACE_MARGIN
    assert ctl.current(6.0) == pytest.approx(30 * PACE_MARGIN, rel=0.01)  # back within seconds


def test_repeated_refusals_converge_geometrically() -> None:
    """Configured 3x too high: a handful of refusals bring the rate under the real limit."""
    real = 20.0
    ctl = AdaptiveRate(3 * real)
    now = 0.0
    for _ in range(12):
        rate = ctl.current(now)
        assert rate is not None
        if rate <= real:
            break
        ctl.on_rate_limited(now=now, sent_at=now, delay=0.05)
        now += 0.1
    assert ctl.rate is not None and ctl.rate <= real
    assert ctl.decreases <= 8


def test_unlimited_until_the_first_429() -> None:
    ctl = AdaptiveRate(None)
    assert ctl.current(1.0) is None
    for i in range(20):
        ctl.record_send(0.1 + i * 0.04)
    wait = ctl.on_rate_limited(now=1.0, sent_at=1.0, delay=None)
    assert ctl.rate is not None and ctl.rate > 10  # the rate being sent, not a crawl
    # no hint: not a whole second of silence, one interval at that rate, then search upwards
    assert wait == pytest.approx(1.0 / ctl.rate)
    assert ctl.blocked_until == pytest.approx(1.0 + 1.0 / ctl.rate)
    rate = ctl.rate
    assert (ctl.current(3.0) or 0) > 1.5 * rate


def test_unlimited_first_429_with_a_precise_hint_follows_it() -> None:
    ctl = AdaptiveRate(None)
    for i in range(20):
        ctl.record_send(0.1 + i * 0.04)
    assert ctl.on_rate_limited(now=1.0, sent_at=1.0, delay=0.25) == 0.25
    assert ctl.blocked_until == 1.25


def test_not_adaptive_only_pauses() -> None:
    ctl = AdaptiveRate(10.0, adaptive=False)
    ctl.on_rate_limited(now=0.0, sent_at=0.0, delay=2.0)
    assert ctl.rate == pytest.approx(10 * PACE_MARGIN)
    assert ctl.blocked_until == 2.0


def test_pacer_spaces_requests_evenly() -> None:
    limits = Limits(max_concurrency=50, rps=50.0, tpm=None)
    sent: list[float] = []

    async def one() -> None:
        async with limits.slot(10) as at:
            sent.append(at)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(11):
                tg.start_soon(one)

    anyio.run(main)
    sent.sort()
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    # a late wake-up may shorten the next gap (the schedule keeps the average), never to a burst;
    # the sends are never faster than the rate (a busy machine only makes them later: no upper bound)
    assert min(gaps) >= 0.5 / (50 * PACE_MARGIN)
    assert sent[-1] - sent[0] >= 10 / (50 * PACE_MARGIN) - 0.5 / (50 * PACE_MARGIN)


def test_concurrency_and_shared_pause() -> None:
    limits = Limits(max_concurrency=2, rps=None, tpm=None)
    peak = 0
    starts: list[float] = []

    async def one() -> None:
        nonlocal peak
        async with limits.slot(1) as at:
            starts.append(at)
            peak = max(peak, limits.in_flight)
            await anyio.sleep(0.02)

    async def main() -> None:
        limits.control.blocked_until = time.monotonic() + 0.2  # as if a 429 had just paused everyone
        began = time.monotonic()
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(one)
        assert min(starts) >= began + 0.19

    anyio.run(main)
    assert peak == 2


def test_tokens_per_minute_with_correction() -> None:
    limits = Limits(max_concurrency=10, rps=None, tpm=6000.0)  # 100 tokens/s, 1000-token burst

    async def main() -> float:
        began = time.monotonic()
        for _ in range(2):
            async with limits.slot(600):
                pass
        return time.monotonic() - began

    elapsed = anyio.run(main)
    assert elapsed >= 1.6  # 1200 tokens against a 1000 burst at 100/s: the second waits (never less)
    # the provider said those used 100 each: the 1,200 surplus is credited to the next requests
    for _ in range(3):
        limits.settle_tokens(500, 100)
    assert limits._token_amount(500, 1000.0) == 0.0


def test_far_above_the_limit_the_rate_goes_to_what_the_server_accepted() -> None:
    # configured 3x above a server that accepts 20 requests in any one-second window
    ctl = AdaptiveRate(60.0)
    accepted: list[float] = []
    t = 0.0
    while t < 3.0:
        rate = ctl.current(t)
        assert rate is not None
        t = max(t + 1 / rate, ctl.blocked_until)
        ctl.record_send(t)
        window = [a for a in accepted if a > t - 1.0]
        if len(window) < 20:
            accepted.append(t)
        else:  # refused, with the server's hint: when the oldest accepted leaves the window
            ctl.on_rate_limited(now=t + 0.001, sent_at=t, delay=window[0] + 1.0 - t)
    refused = ctl.jitter_refusals + ctl.decreases
    assert len(accepted) >= 0.9 * 20 * 3.0  # the server's limit is reached
    assert refused <= 0.1 * (len(accepted) + refused)  # with few refusals: the pause follows the server
    # with no sending history the controller falls back to the multiplicative decrease
    fresh = AdaptiveRate(60.0)
    refuse_burst(fresh, 5.0, JITTER_ALLOWED + 1)
    assert fresh.rate == pytest.approx(60 * PACE_MARGIN * BETA)


def test_window_guard_keeps_any_second_under_the_limit() -> None:
    ctl = AdaptiveRate(20.0)
    rate = 20 * PACE_MARGIN
    # a late wake-up bunched 20 sends into 0.2 s: the 21st must wait until the first leaves the window
    for i in range(20):
        ctl.record_send(10.0 + i * 0.01)
    assert ctl.window_wait(10.2, rate) == pytest.approx(10.0 + WINDOW_S - 10.2)
    assert ctl.window_wait(11.1, rate) == 0.0
    # evenly paced sends never wait
    even = AdaptiveRate(20.0)
    for i in range(40):
        t = i / rate
        assert even.window_wait(t, rate) == 0.0
        even.record_send(t)


@pytest.mark.parametrize("per_s", [7.5, 8.33, 1.5, 0.5, 30.0, 100.0])
def test_window_guard_never_holds_evenly_paced_sends_below_their_rate(per_s: float) -> None:
    """A rate that is no whole number per second (rpm 450, or a quarter of 1800 per shard) is sent
    at that rate: the guard used to round it down to 7 sends per second (6.97/s instead of 7.43)."""
    rate = per_s * PACE_MARGIN
    ctl = AdaptiveRate(per_s)
    t, sent = 0.0, 0
    while t < 60.0:
        wait = ctl.window_wait(t, rate)
        t += wait
        ctl.record_send(t)
        sent += 1
        t += 1.0 / rate
    assert sent >= math.floor(60.0 * rate)  # evenly paced sends never wait on the window
    # a bunch still waits: limit sends at once, then the next one
    bunched = AdaptiveRate(per_s)
    limit = max(1, math.floor(per_s))
    for _ in range(limit):
        bunched.record_send(100.0)
    assert bunched.window_wait(100.0, rate) > 0.0


def test_actual_sends_never_closer_than_the_least_gap() -> None:
    """A sender woken late may catch up on the grid, but two actual sends are never closer than
    min_gap: a strict limiter refuses anything closer than 1/R."""
    limits = Limits(max_concurrency=64, rps=100.0, tpm=None)
    sent: list[float] = []

    async def one() -> None:
        async with limits.slot(1) as at:
            sent.append(at)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(40):
                tg.start_soon(one)

    anyio.run(main)
    sent.sort()
    least = limits.control.min_gap(100.0 * PACE_MARGIN)
    assert min(b - a for a, b in itertools.pairwise(sent)) >= least - 1e-9


def paced(ctl: AdaptiveRate, seconds: float, start: float = 0.0) -> float:
    """Record evenly paced sends at the controller's rate for ``seconds``; returns the end time."""
    t = start
    while t < start + seconds:
        ctl.record_send(t)
        t += 1.0 / (ctl.current(t) or 1.0)
    return t


def test_a_coarse_hint_after_one_early_request_skips_a_slot_not_a_second() -> None:
    ctl = AdaptiveRate(30.0)
    t = paced(ctl, 3.0)
    wait = ctl.on_rate_limited(now=t + 0.001, sent_at=t, delay=1.0)  # "Retry-After: 1"
    assert ctl.decreases == 0 and ctl.jitter_refusals == 1
    assert wait == pytest.approx(1.0 / (30 * PACE_MARGIN))
    assert ctl.blocked_until - (t + 0.001) == pytest.approx(1.0 / (30 * PACE_MARGIN))
    assert ctl.spacing > 0  # the next sends keep a little more distance
    widened = ctl.spacing
    paced(ctl, 3.0, start=t + 0.1)
    assert ctl.spacing < widened  # and it narrows again while the server accepts


def test_a_jitter_429_of_the_last_send_hands_its_slot_to_the_next_send() -> None:
    """A strict limiter counts only what it accepts: when the refused request is the last one
    sent, the next send takes its slot (reclaim_delay after it) and no one pauses;
    the sender already asleep until the following slot is woken for it."""
    limits = Limits(max_concurrency=8, rps=1.0, tpm=None)  # slots about a second apart
    sent: list[float] = []
    answers: list[float | None] = []

    async def one() -> None:
        async with limits.slot(1) as at:
            sent.append(at)

    async def main() -> None:
        await one()
        async with anyio.create_task_group() as tg:
            tg.start_soon(one)  # asleep until about a second after the first send
            await anyio.sleep(0.05)
            answers.append(limits.on_rate_limited(sent_at=sent[0], delay=1.0))  # "Retry-After: 1"

    anyio.run(main)
    rate = limits.control.current(time.monotonic())
    assert rate is not None
    assert limits.control.reclaimed and limits.control.decreases == 0
    assert answers == [pytest.approx(reclaim_delay(rate))]
    assert limits.control.blocked_until < sent[0] + 0.1  # nobody paused
    # the second request went in the refused one's slot, before the slot it was waiting for
    assert sent[0] < sent[1] < sent[0] + 1.0 / rate


def test_a_second_429_soon_after_a_reclaimed_one_pauses_a_slot() -> None:
    limits = Limits(max_concurrency=8, rps=30.0, tpm=None)
    sent: list[float] = []

    async def one() -> None:
        async with limits.slot(1) as at:
            sent.append(at)

    async def main() -> None:
        for _ in range(3):
            await one()
        limits.on_rate_limited(sent_at=sent[-1], delay=1.0)
        assert limits.control.reclaimed
        await one()
        before = limits.control.blocked_until
        limits.on_rate_limited(sent_at=sent[-1], delay=1.0)  # two in a row are no jitter to reclaim
        assert not limits.control.reclaimed
        assert limits.control.blocked_until > before

    anyio.run(main)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop on virtual time: when nothing is ready to run, the clock jumps to the next
    timer instead of waiting for it. Timers end exactly when due and take no real time, however
    loaded the machine."""

    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0

    def time(self) -> float:
        return self._now

    def _run_once(self) -> None:
        scheduled: list[Any] = self._scheduled  # type: ignore[attr-defined]
        ready: Any = self._ready  # type: ignore[attr-defined]
        while scheduled and scheduled[0]._cancelled:  # a cancelled timer is no deadline
            heapq.heappop(scheduled)._scheduled = False
            self._timer_cancelled_count -= 1  # type: ignore[attr-defined]
        if not ready and scheduled:
            self._now = max(self._now, scheduled[0]._when)
        super()._run_once()  # type: ignore[misc]


def run_in_virtual_time(main: Callable[[], Awaitable[None]], monkeypatch: pytest.MonkeyPatch) -> None:
    """``main`` on :class:`VirtualTimeLoop`. The pacer waits the last fraction of a millisecond by
    spinning on its clock, which virtual time does not move: here a timer waits it."""
    for name in ("BLOCK_S", "SPIN_S", "WAKE_EARLY_S"):
        monkeypatch.setattr(f"assay.judges.pacing.limits.{name}", 0.0)
    anyio.run(main, backend="asyncio", backend_options={"loop_factory": VirtualTimeLoop})


def test_reclaiming_stops_where_the_limiter_refuses_the_reclaimed_slot_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A naive limiter restarts its clock on every request, refused or not: the send in a
    reclaimed slot is refused as well. After RECLAIM_FAILURES of those in a row, refused slots
    are left alone (each 429 then pauses one interval). One that was answered resets the count.
    In virtual time (a loaded machine once stretched the real-time version past its regimes)."""
    sent: list[float] = []

    async def main() -> None:
        limits = Limits(max_concurrency=8, rps=100.0, tpm=None, clock=asyncio.get_running_loop().time)

        async def one() -> None:
            async with limits.slot(1) as at:
                sent.append(at)

        async def spaced() -> None:  # refusals far enough apart to pass for jitter (3 in 2 s at most)
            for _ in range(70):
                await one()

        for answered in (False, True):  # one refused in its reclaimed slot, then one answered
            await spaced()
            limits.on_rate_limited(sent_at=sent[-1], delay=1.0)
            assert limits.control.reclaimed
            await one()
            if answered:
                limits.on_answer(0.1, sent[-1])  # the reclaimed slot was free: the count restarts
            else:
                limits.on_rate_limited(sent_at=sent[-1], delay=1.0)
        for episode in range(RECLAIM_FAILURES + 1):
            await spaced()
            limits.on_rate_limited(sent_at=sent[-1], delay=1.0)
            assert limits.control.reclaimed == (episode < RECLAIM_FAILURES)
            if not limits.control.reclaimed:
                break
            await one()  # the send in the reclaimed slot ...
            assert sent[-1] - sent[-2] < 1.0 / 100.0  # before the regular slot, one interval on
            limits.on_rate_limited(sent_at=sent[-1], delay=1.0)  # ... refused as well
        assert not limits.control.reclaimed

    run_in_virtual_time(main, monkeypatch)
    assert len(sent) > 70 * (RECLAIM_FAILURES + 3)


def test_a_long_hint_or_nothing_accepted_is_followed() -> None:
    """A window that ran out (per-minute limit): the server accepts nothing; its hint stands."""
    ctl = AdaptiveRate(30.0)
    t = paced(ctl, 2.0)
    ctl.record_send(t)
    assert ctl.on_rate_limited(now=t + 0.001, sent_at=t, delay=37.0) == 37.0
    assert ctl.blocked_until == pytest.approx(t + 37.001)
    # a coarse "Retry-After: 1" is followed once a second of sending brought no accepted request
    ctl = AdaptiveRate(30.0)
    t = paced(ctl, 2.0)
    now, refusals = t, 0
    while refusals < 200:
        now = max(now + 1.0 / (ctl.current(now) or 1.0), ctl.blocked_until)
        ctl.record_send(now)
        refusals += 1
        if ctl.on_rate_limited(now=now + 0.001, sent_at=now, delay=1.0) == 1.0:
            break
    assert now - t >= 1.0 and refusals <= 40


def test_crossing_a_strict_limit_steps_back_gently() -> None:
    ctl = AdaptiveRate(90.0)
    ctl.rate = 31.0  # just above a strict limit of 30: about every other request is refused
    t = paced(ctl, 3.0)
    refuse_sends(ctl, t, JITTER_ALLOWED, every=0.066)
    assert ctl.decreases == 1
    assert 0.9 * 31.0 <= ctl.rate <= 31.0  # not the deep cut of a rate far above the limit
    assert ctl.blocked_until - t < 0.5  # and no second of silence


def strict_server_run(configured: float | None, limit: float = 30.0, seconds: float = 60.0) -> tuple[int, int]:
    """Simulated time: the pacer's policy (grid, least gap, 429 handling) against a strict
    spacing limiter that answers an integer ``Retry-After: 1``, with ±0.3 ms of arrival jitter.
    Returns (accepted, refused)."""
    import random

    rnd = random.Random(7)
    ctl = AdaptiveRate(configured)
    t = last_send = 0.0
    last_accepted = -1.0
    accepted = refused = 0
    if configured is None:  # an unlimited start sends a burst (16 in flight) before any answer
        for _ in range(16):
            ctl.record_send(0.0)
        last_accepted, accepted = 0.0, 1
        for _ in range(15):
            refused += 1
            ctl.on_rate_limited(now=0.002, sent_at=0.0, delay=1.0)
    while t < seconds:
        t = max(t, ctl.blocked_until)
        rate = ctl.current(t)
        if rate is not None:
            t = max(t, last_send + max(1.0 / rate, ctl.min_gap(rate)))
        else:
            t += 0.02
        ctl.record_send(t)
        last_send = t
        arrival = t + rnd.uniform(-0.0003, 0.0003)
        if arrival - last_accepted >= 1.0 / limit:
            last_accepted = arrival
            accepted += 1
        else:
            refused += 1
            ctl.on_rate_limited(now=t + 0.001, sent_at=t, delay=1.0)
    return accepted, refused


@pytest.mark.parametrize("configured", [30.0, 90.0, None], ids=["rpm right", "rpm 3x too high", "rpm unset"])
def test_strict_limiter_converges_near_its_ceiling(configured: float | None) -> None:
    accepted, refused = strict_server_run(configured)
    assert accepted >= (0.95 if configured == 30.0 else 0.9) * 30 * 60
    assert refused <= (0.02 if configured == 30.0 else 0.05) * (accepted + refused)


def test_with_no_rate_known_the_cap_triples_per_round_trip_while_every_slot_is_busy() -> None:
    from assay.judges.limits import AUTO_START_CONCURRENCY, SLOW_START_STEP, InFlightCap

    cap = InFlightCap(None)
    start = cap.update(rate=None, in_flight=0)
    assert start == AUTO_START_CONCURRENCY
    for _ in range(start):  # one round trip: every request in flight answers once, all slots busy
        cap.update(rate=None, in_flight=cap.value)
    assert cap.value == start * (1 + SLOW_START_STEP)
    assert cap.update(rate=None, in_flight=0) == cap.value  # idle slots: no growth
    # once a rate is known, Little's law sizes it: rate x p90 latency x headroom + 2
    for _ in range(50):
        cap.observe(2.0)
    assert cap.update(rate=10.0, in_flight=0) == 32
    assert InFlightCap(8).update(rate=100.0, in_flight=8) == 8  # max_concurrency is a hard cap


def test_an_announced_limit_becomes_the_rate_when_none_or_a_higher_one_is_configured() -> None:
    unset = Limits(max_concurrency=None, rps=None, tpm=None)
    assert unset.control.current(0.0) is None
    unset.announce(1800.0)  # x-ratelimit-limit-requests: 1800 (per minute)
    assert unset.control.current(0.0) == pytest.approx(30.0 * PACE_MARGIN)
    assert unset.control.configured == pytest.approx(30.0)

    too_high = Limits(max_concurrency=None, rps=90.0, tpm=None)
    too_high.announce(1800.0)
    assert too_high.control.current(0.0) == pytest.approx(30.0 * PACE_MARGIN)

    lower = Limits(max_concurrency=None, rps=10.0, tpm=None)  # the user keeps a part for others
    lower.announce(1800.0)
    assert lower.control.current(0.0) == pytest.approx(10.0 * PACE_MARGIN)

    shard = Limits(max_concurrency=None, rps=None, tpm=None, limit_share=0.5)  # --workers 2
    shard.announce(1800.0)
    assert shard.control.current(0.0) == pytest.approx(15.0 * PACE_MARGIN)

    raised = Limits(max_concurrency=None, rps=None, tpm=None)
    raised.announce(1800.0)
    raised.announce(3600.0)  # the provider raised the limit mid-run
    assert raised.control.current(0.0) == pytest.approx(60.0 * PACE_MARGIN)


def test_a_rate_cut_below_an_announced_limit_recovers_towards_it() -> None:
    limits = Limits(max_concurrency=None, rps=None, tpm=None)
    limits.announce(1800.0)
    ctl = limits.control
    refuse_burst(ctl, paced(ctl, 3.0), 12)  # far above whatever the server accepts now
    cut = ctl.rate
    assert cut is not None and cut < 30.0 * PACE_MARGIN
    limits.announce(1800.0)  # the same announcement again changes nothing
    assert ctl.rate == cut


def bucket_server_run(configured: float, limit: float, seconds: float = 60.0) -> tuple[int, int]:
    """Simulated time: the pacer's policy against a token bucket of ``limit`` requests/s holding
    ``limit`` tokens that answers a precise ``retry-after-ms``. Returns (accepted, refused)."""
    ctl = AdaptiveRate(configured)
    t = last_send = 0.0
    tokens, filled = limit, 0.0
    accepted = refused = 0
    while t < seconds:
        t = max(t, ctl.blocked_until)
        rate = ctl.current(t)
        assert rate is not None
        t = max(t, last_send + max(1.0 / rate, ctl.min_gap(rate)))
        t += ctl.window_wait(t, rate)
        ctl.record_send(t)
        last_send = t
        tokens, filled = min(limit, tokens + (t - filled) * limit), t
        if tokens >= 1.0:
            tokens -= 1.0
            accepted += 1
        else:
            refused += 1
            ctl.on_rate_limited(now=t + 0.001, sent_at=t, delay=(1.0 - tokens) / limit)
    return accepted, refused


@pytest.mark.parametrize("limit", [1.5, 5.0])
def test_at_a_low_rate_a_wrong_rpm_is_not_refused_at_every_other_request(limit: float) -> None:
    """rpm 3x too high against 1.5 req/s: two seconds hold three sends, so every refusal passed
    for jitter and 42 % of the requests were refused; the last JITTER_RECENT sends are kept now."""
    accepted, refused = bucket_server_run(3 * limit, limit)
    assert accepted >= 0.9 * limit * 60
    assert refused <= 0.25 * (accepted + refused)


def test_a_process_sharing_a_budget_takes_scattered_refusals_for_jitter_and_many_for_a_wrong_rpm() -> None:
    """A process that sends half of a shared budget (15 of 30/s) is refused now and then: no cut,
    although it sends far less than its rate. When most of its sends are refused, it cuts."""
    ctl = AdaptiveRate(30.0)
    ctl.shared = True
    t = 10.0
    for i in range(200):
        t = 10.0 + i / 15
        ctl.record_send(t)
        if i % 25 == 24:
            ctl.on_rate_limited(now=t + 0.001, sent_at=t, delay=1.0)
    assert ctl.decreases == 0 and ctl.jitter_refusals == 8
    assert ctl.rate == pytest.approx(30 * PACE_MARGIN)
    for i in range(1, 25):  # then two sends in three refused
        sent = t + i / 15
        ctl.record_send(sent)
        if i % 3:
            ctl.on_rate_limited(now=sent + 0.001, sent_at=sent, delay=1.0)
    assert ctl.decreases >= 1
    assert ctl.rate is not None and ctl.rate < 30 * PACE_MARGIN


def test_retries_go_ahead_of_first_attempts_and_a_cancelled_waiter_leaves_the_line() -> None:
    from anyio import wait_all_tasks_blocked

    from assay.judges.turns import FIRST, RETRY, TurnQueue

    async def main() -> tuple[list[str], int]:
        gate, order = TurnQueue(1), []

        async def one(name: str, priority: int) -> None:
            async with gate.turn(priority):
                order.append(name)

        await gate.acquire()  # held: everyone else queues
        async with anyio.create_task_group() as tg:
            for name, priority in (("new-1", FIRST), ("retry-1", RETRY), ("new-2", FIRST), ("retry-2", RETRY)):
                tg.start_soon(one, name, priority)
                await wait_all_tasks_blocked()
            with anyio.CancelScope() as scope:  # a waiter that gives up
                scope.cancel()
                await gate.acquire(RETRY)
            gate.release()
        return order, gate.borrowed

    order, borrowed = anyio.run(main)
    assert order == ["retry-1", "retry-2", "new-1", "new-2"]
    assert borrowed == 0


def test_refusals_whose_reclaimed_slots_are_accepted_are_cheap() -> None:
    """Once a send in a reclaimed slot was answered, a strict limiter's refusal costs a tenth of a
    slot: the next reclaim may come RECLAIM_EVERY sends later (not JITTER_RECENT), and it widens
    the least gap by CHEAP_WEIGHT of a step, not a whole one (so refusals settle near 4 %, not 1 %).
    The limiter's clock runs at a quarter of real time, as in the reclaim test above: a worker held
    up by a loaded machine stays inside the 10 ms slots the test is about."""
    offset = 0.0
    limits = Limits(max_concurrency=8, rps=100.0, tpm=None, clock=lambda: time.monotonic() * 0.25 + offset)
    sent: list[float] = []

    async def one() -> None:
        async with limits.slot(1) as at:
            sent.append(at)

    async def main() -> None:
        nonlocal offset
        for _ in range(20):
            await one()
        offset += STARTUP_S  # past the start-up seconds, whose refusals do not widen the gap
        for _ in range(20):
            await one()
        control = limits.control
        before = control.spacing
        limits.on_rate_limited(sent_at=sent[-1], delay=1.0)
        assert control.reclaimed and control.spacing - before == pytest.approx(SPACING_STEP)
        await one()
        limits.on_answer(0.1, sent[-1])  # the send in the reclaimed slot was accepted
        for _ in range(RECLAIM_EVERY):
            await one()
        before = control.spacing
        limits.on_rate_limited(sent_at=sent[-1], delay=1.0)
        assert control.reclaimed  # RECLAIM_EVERY + 1 sends after the last reclaim
        assert control.spacing - before == pytest.approx(SPACING_STEP * CHEAP_WEIGHT)
        assert control.decreases == 0

    anyio.run(main)


def test_after_a_cut_at_the_configured_rate_jitter_does_not_hold_the_rate_below_it() -> None:
    """A cluster of early requests at the configured rate cuts the rate a little; a later jitter
    refusal, sent at the cut rate, is no sign that the limit is there: the rate still returns to
    the configured one (it stayed at the cut rate as long as jitter kept coming)."""
    ctl = AdaptiveRate(30.0)
    t = paced(ctl, 3.0)
    refuse_sends(ctl, t, JITTER_ALLOWED, every=0.034)
    assert ctl.decreases == 1
    assert ctl.rate is not None and ctl.ceiling is not None and ctl.rate < ctl.ceiling
    t = paced(ctl, 2.0, start=t + 0.1)  # past the cluster's two seconds
    before = ctl.current(t)
    assert before is not None and before < ctl.ceiling  # still on the way back
    ctl.on_rate_limited(now=t + 0.001, sent_at=t, delay=1.0)
    assert ctl.decreases == 1 and ctl.jitter_refusals >= 1  # jitter, no second cut
    t = paced(ctl, 3.0, start=t + 0.05)
    assert ctl.current(t) == pytest.approx(ctl.ceiling)
