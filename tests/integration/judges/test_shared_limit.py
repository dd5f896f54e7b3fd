"""One rate budget for many processes through a real Redis server (GCRA in a Lua script)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from assay.exceptions import ConfigError, JudgeUnavailableError
from assay.judges.config import parse_judge_config
from assay.judges.limits import Limits
from assay.judges.shared_limit import SHARED_PACE_MARGIN, SharedRate
from assay.pipeline.shard import share_judge
from assay.testing.judge_server import JudgeServerThread
from tests.support.redis_server import RedisServer


async def _tat(url: str, key: str) -> int:
    """The theoretical arrival time a key holds (µs on the Redis server's clock)."""
    import redis.asyncio as aioredis

    client = aioredis.from_url(url)
    try:
        return int(await client.get(key))
    finally:
        await client.aclose()


def test_two_holders_of_one_budget_get_evenly_spaced_slots(redis_server: RedisServer) -> None:
    """Two SharedRate objects (as two processes) draw alternately: each reservation's slot is one
    emission interval after the one before, whoever made it (read from Redis: slots, not wall
    time, so a slow call cannot fail this)."""

    async def main() -> tuple[list[float], list[int], int]:
        a = SharedRate(redis_server.url, "j", rpm=600, tpm=None, scope="t1")
        b = SharedRate(redis_server.url, "j", rpm=600, tpm=None, scope="t1")
        waits, slots = [], []
        try:
            for i in range(10):
                waits.append(await (a if i % 2 else b).reserve(10))
                slots.append(await _tat(redis_server.url, a.keys[0]))
            return waits, slots, a.request_interval_us
        finally:
            await a.aclose()
            await b.aclose()

    waits, slots, interval_us = anyio.run(main)
    assert interval_us == round(60e6 / (600 * SHARED_PACE_MARGIN))
    assert waits[0] == 0.0  # a fresh budget: the first call goes at once
    assert all(w > 0 for w in waits[1:])  # every later one waits for its slot
    assert [later - earlier for earlier, later in itertools.pairwise(slots)] == [interval_us] * 9


def test_another_scope_or_judge_has_its_own_budget(redis_server: RedisServer) -> None:
    async def main() -> tuple[float, float, float, int, int]:
        a = SharedRate(redis_server.url, "j", rpm=60, tpm=None, scope="t2")
        other = SharedRate(redis_server.url, "j", rpm=60, tpm=None, scope="t2-other-model")
        try:
            first = await a.reserve(1)
            before = await _tat(redis_server.url, a.keys[0])
            same, fresh = await a.reserve(1), await other.reserve(1)
            return first, same, fresh, before, await _tat(redis_server.url, a.keys[0])
        finally:
            await a.aclose()
            await other.aclose()

    first, same, fresh, before, after = anyio.run(main)
    assert first == 0.0 and fresh == 0.0  # the other model's budget is untouched by the first
    assert 0 < same <= 1 / SHARED_PACE_MARGIN and after - before == round(60e6 / (60 * SHARED_PACE_MARGIN))


def test_token_budget_and_keys_expire(redis_server: RedisServer) -> None:
    async def main() -> tuple[list[float], list[int], list[int]]:
        import redis.asyncio as aioredis

        shared = SharedRate(redis_server.url, "tok", rpm=None, tpm=6000, scope="t3")  # 100 tokens/s, 10 s burst
        client = aioredis.from_url(redis_server.url)
        try:
            waits, tats = [], []
            for _ in range(4):  # 2,000 tokens: the burst holds 1,000
                waits.append(await shared.reserve(500))
                tats.append(await _tat(redis_server.url, shared.keys[1]))
            ttls = [await client.pttl(key) for key in shared.keys]
            return waits, tats, ttls
        finally:
            await shared.aclose()
            await client.aclose()

    waits, tats, ttls = anyio.run(main)
    per_token_us = 60e6 / 6000
    # 500 tokens move the token stream on by 500 tokens' time; it may run 10 s ahead: three fit,
    # the fourth waits (about 5 s at the configured rate, less the time the calls took)
    assert waits[:3] == [0.0] * 3
    assert 0 < waits[3] <= 5.0
    assert [later - earlier for earlier, later in itertools.pairwise(tats)] == [500 * per_token_us] * 3
    assert ttls[0] == -2  # no request limit: no request key at all
    assert 0 < ttls[1] <= 60_000 + 60_000  # the token key expires once idle


def test_a_redis_that_is_down_is_a_clear_error() -> None:
    async def main() -> None:
        shared = SharedRate("redis://127.0.0.1:9/0", "j", rpm=60, tpm=None)
        try:
            await shared.reserve(1)
        finally:
            await shared.aclose()

    with pytest.raises(JudgeUnavailableError, match=r"redis://127\.0\.0\.1:9/0"):
        anyio.run(main)


def test_shared_limit_config() -> None:
    with pytest.raises(ConfigError, match="grader"):
        parse_judge_config("grader", {"model": "m", "shared_limit": "http://localhost:6379"})
    cfg = {"model": "m", "rpm": 600, "tpm": 60000, "max_concurrency": 8}
    shard = {"model": "m", "rpm": 150.0, "tpm": 15000.0, "max_concurrency": 2, "limit_share": 0.25}
    assert share_judge(cfg, 4) == shard
    shared = {**cfg, "shared_limit": "redis://127.0.0.1:6379/0"}
    assert share_judge(shared, 4) == shared  # one budget in Redis: not divided among shards


def _run_file(tmp_path: Path, name: str, url: str, model: str, shared: str | None, n: int, *, run_level: bool) -> Path:
    (tmp_path / f"{name}.jsonl").write_text(
        "".join(json.dumps({"id": f"{name}-{i}", "inputs": f"q{i}", "outputs": f"a{i}"}) + "\n" for i in range(n))
    )
    judge: dict[str, Any] = {
        "provider": "openai",
        "base_url": f"{url}/v1",
        "model": model,
        "rpm": 20 * 60,
        "timeout": 5,
    }
    if shared and not run_level:
        judge["shared_limit"] = shared
    cfg: dict[str, Any] = {
        "source": {"path": f"{name}.jsonl"},
        "judges": {"j": judge},
        "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "j"}}],
        "sink": {"path": f"out-{name}/"},
        "state_dir": f"state-{name}",
    }
    if shared and run_level:
        cfg["rate_store"] = shared  # the run's Redis, for every judge without a shared_limit
    f = tmp_path / f"{name}.yaml"
    f.write_text(json.dumps(cfg))
    return f


def _two_processes(tmp_path: Path, url: str, shared: str | None, n: int) -> list[subprocess.CompletedProcess[str]]:
    # one process names the Redis in its judge (shared_limit), the other for the whole run (rate_store)
    files = [_run_file(tmp_path, name, url, "judge-model", shared, n, run_level=name == "b") for name in ("a", "b")]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "assay.cli", "run", str(f), "-q", "--no-cache"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for f in files
    ]
    done = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done


@pytest.mark.slow
def test_two_processes_share_one_budget_through_redis(tmp_path: Path, redis_server: RedisServer) -> None:
    """Two `assay run` processes, each configured with the endpoint's whole rpm, against one judge
    that accepts 20 requests in any second: with `shared_limit` they send together within the
    limit; without it each believes it has the whole budget and they are refused far more."""
    n = 120
    with JudgeServerThread(latency=(0.05, 0.15), rps=20, limit_kind="window", retry_after_ms=False) as server:
        (tmp_path / "shared").mkdir()
        runs = _two_processes(tmp_path / "shared", server.url, redis_server.url, n)
        shared_requests, shared_429 = server.stats.requests, server.stats.rate_limited
        server.stats.reset()
        (tmp_path / "alone").mkdir()
        alone = _two_processes(tmp_path / "alone", server.url, None, n)
        alone_429 = server.stats.rate_limited
    for proc in (*runs, *alone):
        assert proc.returncode == 0, proc.stderr
    for name in ("a", "b"):
        rows = [
            json.loads(line)
            for p in (tmp_path / "shared" / f"out-{name}").glob("part-*.jsonl")
            for line in p.read_text().splitlines()
        ]
        assert len(rows) == n and all(r["results"]["correctness"]["score"] is not None for r in rows)
    # an order, not a share (the share is measured by benchmarks/bench_shared_limit.py): sharing one
    # budget is refused less than two processes each believing they have the whole budget
    assert shared_429 < alone_429
    assert shared_requests == 2 * n + shared_429  # every refusal retried once, nothing else repeated


def test_two_pacers_sharing_one_budget_send_in_distinct_slots_one_interval_apart(redis_server: RedisServer) -> None:
    """Two processes' pacers (two Limits, each with its own SharedRate) with senders queued on
    both: every send goes out in a slot of its own, the slots (read as Redis reserved them, in
    microseconds of its clock) are at least one emission interval apart whoever holds them, and
    both pacers get a fair part of them."""
    slots: list[tuple[float, str]] = []

    def recording(shared: SharedRate, name: str) -> SharedRate:
        call = shared._call

        async def _call(tokens: int) -> tuple[float, float]:
            now_us, wait_us = await call(tokens)
            slots.append((now_us + wait_us, name))
            return now_us, wait_us

        shared._call = _call  # type: ignore[method-assign]
        return shared

    async def main() -> int:
        pacers = []
        for name in "ab":
            limits = Limits(max_concurrency=None, rps=20.0, tpm=None)
            limits.shared = recording(SharedRate(redis_server.url, "j", rpm=1200, tpm=None, scope="t-pacers"), name)
            pacers.append(limits)

        async def sender(limits: Limits) -> None:
            for _ in range(4):
                async with limits.slot(1):
                    pass

        try:
            async with anyio.create_task_group() as tg:
                for limits in pacers:
                    for _ in range(3):
                        tg.start_soon(sender, limits)
            return sum(limits.shared_skipped for limits in pacers)
        finally:
            for limits in pacers:
                await limits.shared.aclose()

    skipped = anyio.run(main)
    interval_us = round(60e6 / (1200 * SHARED_PACE_MARGIN))
    times = sorted(t for t, _ in slots)
    assert len(slots) == 24 + skipped  # one reservation per send, one more per late slot let go
    assert all(later - earlier >= interval_us for earlier, later in itertools.pairwise(times))
    assert min(sum(1 for _, name in slots if name == who) for who in "ab") >= 8
