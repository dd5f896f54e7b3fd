"""Endpoint config validation, the pool, resolve_judge, the budget and the cache."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from assay.exceptions import BudgetExceeded, ConfigError
from assay.judges import (
    Budget,
    JudgeCache,
    JudgeConfig,
    JudgeEndpoint,
    JudgePool,
    JudgeRequest,
    cache_key,
    parse_judge_config,
    resolve_judge,
)
from assay.judges.base import Judge


def test_config_defaults_and_validation() -> None:
    c = JudgeConfig(model="m")
    assert (c.provider, c.temperature, c.resolved_key_env()) == ("openai", 0.0, "OPENAI_API_KEY")
    assert JudgeConfig(provider="ollama", model="m").resolved_key_env() is None
    with pytest.raises(ConfigError, match=r"judges\.grader\.rpm"):
        JudgePool.from_config({"grader": {"model": "m", "rpm": -1}}, state_dir=Path("x"))
    with pytest.raises(ConfigError, match=r"judges\.grader\.api_key"):
        JudgePool.from_config({"grader": {"model": "m", "api_key": "sk-1"}}, state_dir=Path("x"))
    with pytest.raises(ConfigError, match=r"judges\.g\.extra_headers: .*api_key_env") as info:
        parse_judge_config("g", {"model": "m", "extra_headers": {"Authorization": "Bearer sk-secret"}})
    assert "sk-secret" not in str(info.value) and info.value.__cause__ is None


def test_explicit_key_env_must_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASSAY_TEST_MISSING_KEY", raising=False)
    endpoint = JudgeEndpoint("g", {"model": "m", "api_key_env": "ASSAY_TEST_MISSING_KEY"})
    with pytest.raises(ConfigError, match=r"judges\.g\.api_key_env: environment variable ASSAY_TEST_MISSING_KEY"):
        anyio.run(endpoint.open)


def test_pool_get_unknown_names_the_judge(tmp_path: Path) -> None:
    pool = JudgePool.from_config({"a": {"model": "m"}, "b": {"model": "m"}}, state_dir=tmp_path)
    assert pool.get("a").name == "a"
    with pytest.raises(ConfigError, match=r"unknown judge 'c' \(judges: a, b\)"):
        pool.get("c")


def test_resolve_judge(tmp_path: Path) -> None:
    pool = JudgePool.from_config({"grader": {"model": "m"}}, state_dir=tmp_path)
    with pytest.raises(ConfigError, match="referred to by name, but no judges are declared"):
        resolve_judge("grader")  # no pool handed
    with pytest.raises(ConfigError, match="no judges are declared"):
        resolve_judge("grader", JudgePool({}))
    assert resolve_judge("grader", pool) is pool.get("grader")
    first = resolve_judge({"model": "adhoc", "base_url": "http://127.0.0.1:9"}, pool)
    assert resolve_judge({"base_url": "http://127.0.0.1:9", "model": "adhoc"}, pool) is first  # reused per config
    assert resolve_judge({"model": "other", "base_url": "http://127.0.0.1:9"}, pool) is not first
    other = JudgePool({})  # the ad-hoc endpoints are the pool's own, nothing module-wide
    assert resolve_judge({"model": "adhoc", "base_url": "http://127.0.0.1:9"}, other) is not first
    assert resolve_judge(first) is first and isinstance(first, Judge)
    with pytest.raises(ConfigError):
        resolve_judge(42)  # type: ignore[arg-type]


def test_estimate_for_dry_run() -> None:
    endpoint = JudgeEndpoint("g", {"model": "m", "input_price_per_mtok": 1.0, "output_price_per_mtok": 4.0})
    usage = endpoint.estimate(JudgeRequest([{"role": "user", "content": "x" * 4000}], schema={"type": "object"}))
    assert usage.calls == 1 and usage.input_tokens > 1000 and usage.output_tokens == 200
    assert usage.cost_usd == pytest.approx((usage.input_tokens * 1.0 + 200 * 4.0) / 1e6)


def test_budget() -> None:
    budget = Budget(0.5)
    budget.check("j")
    budget.charge(0.5)
    with pytest.raises(BudgetExceeded, match="judge 'j'"):
        budget.check("j")
    Budget(None).check("j")


def test_budget_is_spent_up_to_the_call_that_would_cross_it() -> None:
    """limits.budget_usd 0.10 with calls estimated at 0.03 that really cost 0.01, 8 at a time: the
    run spends the budget (no stop at $0.035 because of in-flight estimates) and never crosses it."""

    async def main() -> tuple[int, float, int]:
        budget = Budget(0.10)
        made = refused = 0

        async def caller() -> None:
            nonlocal made, refused
            while True:
                try:
                    held = await budget.acquire("j", 0.03)
                except BudgetExceeded:
                    refused += 1
                    return
                await anyio.lowlevel.checkpoint()  # the call in flight
                budget.charge(0.01, held)
                made += 1

        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(caller)
        return made, budget.spent_usd, refused

    made, spent, refused = anyio.run(main)
    assert made == 10 and spent == pytest.approx(0.10) and refused == 8
    assert budget_after_release() == 0.0


@pytest.mark.parametrize("seed", range(6))
def test_budget_with_64_calls_in_flight_stops_within_one_call_of_the_limit(seed: int) -> None:
    """Calls estimated at $0.01 that really cost $0.002 to $0.09 (a long answer), 64 at a time,
    answering in random order: the spend ends within one call's cost of the limit, either side."""
    import random

    rng = random.Random(seed)
    costs: list[float] = []
    limit = 1.0

    async def main() -> float:
        budget = Budget(limit)

        async def caller() -> None:
            while True:
                try:
                    held = await budget.acquire("j", 0.01)
                except BudgetExceeded:
                    return
                cost = rng.uniform(0.002, 0.09) if rng.random() < 0.3 else rng.uniform(0.002, 0.02)
                costs.append(cost)
                for _ in range(rng.randrange(1, 20)):  # in flight a while, others answer meanwhile
                    await anyio.lowlevel.checkpoint()
                budget.charge(cost, held)

        async with anyio.create_task_group() as tg:
            for _ in range(64):
                tg.start_soon(caller)
        return budget.spent_usd

    spent = anyio.run(main)
    assert limit - max(costs) < spent <= limit + max(costs), (spent, max(costs), len(costs))


def budget_after_release() -> float:
    """A held call that failed frees its amount, and nothing is learnt from it."""

    async def main() -> float:
        budget = Budget(1.0)
        held = await budget.acquire("j", 0.5)
        budget.release(held)
        assert budget.calibrated("j", 0.5) == 0.5
        return budget.reserved_usd

    return anyio.run(main)


def test_cache_roundtrip_ttl_and_concurrency(tmp_path: Path) -> None:
    key = cache_key("openai", "m", {"messages": [1]}, temperature=0.0, seed=None)
    assert key != cache_key("openai", "m", {"messages": [1]}, temperature=0.0, seed=1)
    assert key != cache_key("openai", "m", {"messages": [2]}, temperature=0.0, seed=None)
    assert key != cache_key("anthropic", "m", {"messages": [1]}, temperature=0.0, seed=None)
    assert key != cache_key("openai", "m", {"messages": [1]}, temperature=0.5, seed=None)

    async def main() -> None:
        async with JudgeCache(tmp_path / "c.sqlite") as cache:
            async with anyio.create_task_group() as tg:
                for i in range(200):
                    tg.start_soon(cache.put, f"k{i}", {"text": str(i)})
            got = [await cache.get(f"k{i}") for i in range(200)]
            assert got == [{"text": str(i)} for i in range(200)]
            assert await cache.get("missing") is None
            assert await cache.count() == 200
        async with JudgeCache(tmp_path / "c.sqlite", ttl_s=0.05) as stale:
            await anyio.sleep(0.1)
            assert await stale.get("k1") is None  # older than the TTL
            await stale.put("k1", {"text": "new"})
            assert await stale.get("k1") == {"text": "new"}

    anyio.run(main)
