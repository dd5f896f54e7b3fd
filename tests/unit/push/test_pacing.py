"""The push pacer on a virtual clock: late wake-ups are caught up within the platform's window,
never beyond it, and a 429 holds every send and empties the bucket."""

from __future__ import annotations

import itertools
import random

import anyio
import pytest

from assay.push.pacing import Pacer


class Clock:
    """A virtual clock whose sleeps wake up late by ``late()`` seconds."""

    def __init__(self, late: float = 0.0, seed: int = 0) -> None:
        self.t = 0.0
        self.late = late
        self.rng = random.Random(seed)

    def __call__(self) -> float:
        return self.t

    async def sleep(self, d: float) -> None:
        self.t += d + self.rng.uniform(0, self.late)


def sends(pacer: Pacer, n: int, *, work: Clock | None = None, stall_every: int = 0, stall: float = 0.0) -> list[float]:
    async def go() -> list[float]:
        out = []
        for i in range(n):
            out.append(await pacer.wait())
            if work is not None and stall_every and i % stall_every == stall_every - 1:
                work.t += stall  # the event loop busy elsewhere
        return out

    return anyio.run(go)


def most_in_window(times: list[float], window: float) -> int:
    j, best = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - window:
            j += 1
        best = max(best, i - j + 1)
    return best


@pytest.mark.parametrize("late", [0.0, 0.004, 0.02])
def test_late_wakeups_are_caught_up_within_the_window_cap(late: float) -> None:
    clock = Clock(late=late, seed=1)
    pacer = Pacer(5000, clock=clock, sleep=clock.sleep)  # 83.3/s, at most 82 in any second
    times = sends(pacer, 3000, work=clock, stall_every=50, stall=0.1)
    achieved = len(times) / times[-1]
    assert achieved >= 0.95 * 5000 / 60
    assert most_in_window(times, 1.0) <= pacer.cap == 82
    assert pacer.caught_up > 0  # the stalls left tokens: some sends went on them


def test_a_plain_spacing_would_lose_the_slots_this_one_catches_up() -> None:
    clock = Clock(late=0.006, seed=2)
    pacer = Pacer(6000, clock=clock, sleep=clock.sleep)
    times = sends(pacer, 2000)
    # a 10 ms grid that waits 0-6 ms late each time sends at ~1/13 ms = 77/s; the bucket keeps ~99
    assert len(times) / times[-1] > 97


def test_a_wider_window_allows_a_longer_catch_up_but_never_more_than_it() -> None:
    clock = Clock()
    pacer = Pacer(600, window_s=60.0, clock=clock, sleep=clock.sleep)  # 10/s, 599 a minute
    times = sends(pacer, 700, work=clock, stall_every=100, stall=5.0)
    assert most_in_window(times, 60.0) == 599  # the catch-up reaches the minute's cap, not past it
    assert len(times) / times[-1] >= 0.9 * 10  # 30 s of stalls made up: 700 in under 78 s


def test_a_429_holds_every_send_and_empties_the_bucket() -> None:
    clock = Clock()
    pacer = Pacer(6000, clock=clock, sleep=clock.sleep)

    async def go() -> list[float]:
        first = [await pacer.wait() for _ in range(10)]
        clock.t += 0.5  # idle: 50 tokens would be there
        assert pacer.on_rate_limited(2.0) == 2.0
        after = [await pacer.wait() for _ in range(5)]
        return first + after

    times = anyio.run(go)
    held = times[10:]
    assert held[0] >= 0.5 + times[9] + 2.0 - 1e-9  # nothing before the Retry-After is over
    gaps = [b - a for a, b in itertools.pairwise(held)]
    assert min(gaps) >= 0.009 and sum(gaps) >= 0.04 - 1e-9  # no burst on tokens from before the refusal


def test_no_rpm_means_no_wait() -> None:
    clock = Clock()
    pacer = Pacer(None, clock=clock, sleep=clock.sleep)
    assert sends(pacer, 100) == [0.0] * 100
