"""Server errors and hangs against the pacer: they are no rate signal, and a hung attempt is
hedged instead of waited out (counts only, never a duration)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from assay.judges import JudgeEndpoint, JudgeRequest
from assay.judges.hedge import HEDGE_MIN_SAMPLES, HedgePolicy
from assay.testing.judge_server import JudgeServer

REQUEST = JudgeRequest([{"role": "user", "content": "Is 2+2=4?"}])


def _request(i: int) -> JudgeRequest:
    return JudgeRequest([{"role": "user", "content": f"Is {i}+{i}={2 * i}?"}])


@pytest.mark.parametrize("fault", ["error_rate", "hang_rate"])
def test_500s_and_timeouts_do_not_lower_the_rate(fault: str) -> None:
    """A third of the requests answered 500, or never answered (the attempt times out): every call
    still ends answered, and the adaptive rate is where it started (no decrease, no pause)."""

    async def go() -> tuple[dict[str, Any], float | None, float | None, int]:
        async with JudgeServer(latency=0.005, seed=4, **{fault: 0.3}) as server:
            cfg = {"base_url": server.url + "/v1", "model": "m", "rpm": 6000, "timeout": 0.5, "max_retries": 8}
            async with JudgeEndpoint("j", cfg) as judge:
                judge.hedge = HedgePolicy(timeout=0.5)  # no hedge: the timeouts themselves are the subject
                judge.hedge.delay = lambda: None  # type: ignore[method-assign]
                async with anyio.create_task_group() as tg:
                    for i in range(40):
                        tg.start_soon(judge.complete, _request(i))
                control = judge.limits.control
                return judge.stats.to_dict(), control.rate, control.ceiling, control.decreases

    stats, rate, ceiling, decreases = anyio.run(go)
    assert stats["ok"] == 40 and stats["errors"] == 0
    assert stats["http_5xx"] + stats["timeouts"] > 0  # the faults did happen
    assert decreases == 0
    assert rate == ceiling


def test_a_hung_attempt_is_hedged_and_the_copy_answers() -> None:
    """The first request hangs: once the hedge delay has passed, the same request is sent again and
    that copy's answer is the call's; the hung copy is cancelled (no timeout, no retry, no failure)."""
    hung: list[int] = []

    async def rule(body: dict[str, Any]) -> dict[str, Any]:
        if not hung:
            hung.append(1)
            await anyio.sleep(30)
        return {"score": True}

    async def go() -> tuple[dict[str, Any], int]:
        async with JudgeServer(rule=rule) as server:
            cfg = {"base_url": server.url + "/v1", "model": "m", "timeout": 20, "max_retries": 0}
            async with JudgeEndpoint("j", cfg) as judge:
                for _ in range(HEDGE_MIN_SAMPLES):
                    judge.hedge.observe(0.01)  # a known tail: the delay is HEDGE_MIN_S
                await judge.complete(REQUEST)
                return judge.stats.to_dict(), server.stats.requests

    stats, requests = anyio.run(go)
    assert requests == 2
    assert (stats["ok"], stats["hedges"], stats["timeouts"], stats["retries"], stats["errors"]) == (1, 1, 0, 0, 0)
    assert stats["requests"] == 2


def test_hedges_stay_within_their_budget() -> None:
    """However slow the answers get, at most one attempt in twenty (plus the one saved up at the
    start) is hedged."""
    policy = HedgePolicy(timeout=60.0)
    for _ in range(HEDGE_MIN_SAMPLES):
        policy.observe(0.1)
    allowed = 0
    for _ in range(1000):
        policy.earn()
        allowed += policy.allow()
    assert allowed == 1 + 1000 // 20


def test_no_hedge_before_the_tail_is_known_or_past_the_timeout() -> None:
    policy = HedgePolicy(timeout=3.0)
    for _ in range(HEDGE_MIN_SAMPLES - 1):
        policy.observe(1.0)
    assert policy.delay() is None
    policy.observe(1.0)
    assert policy.delay() == 1.5
    for _ in range(HEDGE_MIN_SAMPLES * 10):
        policy.observe(2.5)  # 1.5 x 2.5 s is past the 3 s timeout: the timeout decides
    assert policy.delay() is None


def test_hedge_false_never_sends_an_attempt_twice() -> None:
    """``hedge: false`` (a user who pays per request and would rather wait): the hung request is
    waited out to its timeout and retried; no copy is ever sent while it is open."""
    hung: list[int] = []

    async def rule(body: dict[str, Any]) -> dict[str, Any]:
        if not hung:
            hung.append(1)
            await anyio.sleep(30)
        return {"score": True}

    async def go() -> tuple[dict[str, Any], int]:
        async with JudgeServer(rule=rule) as server:
            cfg = {"base_url": server.url + "/v1", "model": "m", "timeout": 2, "max_retries": 1, "hedge": False}
            async with JudgeEndpoint("j", cfg) as judge:
                for _ in range(HEDGE_MIN_SAMPLES):
                    judge.hedge.observe(0.01)  # a known tail: with hedging on, a copy would go at 1 s
                await judge.complete(REQUEST)
                return judge.stats.to_dict(), server.stats.requests

    stats, requests = anyio.run(go)
    assert requests == 2
    assert (stats["ok"], stats["hedges"], stats["timeouts"], stats["retries"]) == (1, 0, 1, 1)
