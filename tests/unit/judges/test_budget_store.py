"""The shared budget store, in SQLite and in Redis: several processes spend one budget within one
call's cost of it; a killed process's reservations are reclaimed; a scope stopped at a limit refuses
the same limit."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from assay.exceptions import BudgetExceeded
from assay.judges.budget import Budget
from assay.judges.budget_store import open_budget_store, process_alive, process_started

LIMIT = 1.0


@pytest.fixture(params=["sqlite", "redis"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the store lives: a SQLite file, or a Redis database (each test its own scopes)."""
    if request.param == "sqlite":
        return str(tmp_path / "budget.sqlite")
    pytest.importorskip("redis")
    server = request.getfixturevalue("redis_server")
    return str(server.url.rsplit("/", 1)[0] + "/7")


def _scope(name: str, tmp_path: Path) -> str:
    return f"{name}:{tmp_path.name}"  # unique per test: the Redis database is shared


def _spender(path: str, scope: str, seed: int, out: Any, start: Any) -> None:
    """One process's calls: estimated 0.01 each, really 0.002-0.03 (seeded); reports what it paid."""

    async def main() -> float:
        start.wait()
        rng = random.Random(seed)
        async with open_budget_store(path, scope) as store:
            budget = Budget(LIMIT, store=store)

            async def call() -> None:
                held = await budget.acquire("j", 0.01)
                await anyio.sleep(rng.uniform(0, 0.004))
                budget.charge(rng.uniform(0.002, 0.03), held)

            try:
                while True:
                    async with anyio.create_task_group() as tg:
                        for _ in range(8):
                            tg.start_soon(call)
            except BaseExceptionGroup as group:
                assert all(isinstance(e, BudgetExceeded) for e in group.exceptions), group
            return budget.spent_usd

    out.put(anyio.run(main))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_processes_spend_one_budget_within_one_call(tmp_path: Path, location: str, seed: int) -> None:
    ctx = multiprocessing.get_context("fork")
    out, start = ctx.SimpleQueue(), ctx.Barrier(4)
    path, scope = location, _scope("s", tmp_path)
    procs = [ctx.Process(target=_spender, args=(path, scope, seed * 10 + i, out, start)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    spent = [out.get() for _ in procs]
    assert LIMIT - 0.03 < sum(spent) <= LIMIT + 0.03  # within one call's (largest) cost

    async def totals() -> tuple[float, float, float | None]:
        async with open_budget_store(path, scope) as store:
            return await store.totals()

    total, held, stopped = anyio.run(totals)
    assert total == pytest.approx(sum(spent)) and held == 0.0 and stopped == LIMIT


def _holder(path: str, scope: str, ready: Any) -> None:
    async def main() -> None:
        async with open_budget_store(path, scope) as store:
            await store.reserve(0.9, 0.1, limit=LIMIT, spent=0.05)
            ready.set()
            await anyio.sleep(60)

    anyio.run(main)


def test_a_killed_process_keeps_no_reservation_but_its_spending_counts(tmp_path: Path, location: str) -> None:
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    path, scope = location, _scope("s", tmp_path)
    proc = ctx.Process(target=_holder, args=(path, scope, ready))
    proc.start()
    assert ready.wait(30)

    async def ask() -> tuple[str, float, float]:
        async with open_budget_store(path, scope) as store:
            grant = await store.reserve(0.5, 0.1, limit=LIMIT, spent=0.0)
            if grant.verdict == "ok":
                store.release(grant.ticket)
            return grant.verdict, grant.spent_usd, grant.reserved_usd

    assert anyio.run(ask) == ("wait", 0.05, 0.9)  # the living holder's 0.9 is in the way
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    assert anyio.run(ask) == ("ok", 0.05, 0.5)  # reclaimed; what it spent stays spent


def test_a_scope_stopped_at_a_limit_refuses_it_and_a_raised_limit_goes_on(tmp_path: Path, location: str) -> None:
    async def main() -> list[str]:
        path, scope = location, _scope("ray:r", tmp_path)
        verdicts = []
        async with open_budget_store(path, scope) as store:
            store.seed(0.98)
            verdicts.append((await store.reserve(0.1, 0.05, limit=LIMIT, spent=0.0)).verdict)
        async with open_budget_store(path, scope) as again:  # a later job under the same cap
            verdicts.append((await again.reserve(0.001, 0.001, limit=LIMIT, spent=0.0)).verdict)
            verdicts.append((await again.reserve(0.1, 0.05, limit=2.0, spent=0.0)).verdict)
        async with open_budget_store(path, _scope("other", tmp_path)) as other:  # another scope is not touched
            verdicts.append((await other.reserve(0.1, 0.05, limit=LIMIT, spent=0.0)).verdict)
        return verdicts

    assert anyio.run(main) == ["over", "closed", "ok", "ok"]


def test_a_budget_with_a_store_says_what_every_process_spent(tmp_path: Path, location: str) -> None:
    async def main() -> str:
        async with open_budget_store(location, _scope("s", tmp_path)) as store:
            store.seed(0.995)
            budget = Budget(LIMIT, store=store)
            with pytest.raises(BudgetExceeded) as info:
                await budget.acquire("gpt", 0.01)
            with pytest.raises(BudgetExceeded, match="already spent"):
                await budget.acquire("gpt", 0.001)
            return str(info.value)

    message = anyio.run(main)
    assert "$1.0000 reached" in message and "processes spent $0.9950" in message and "'gpt'" in message


def test_process_liveness_knows_a_reused_pid() -> None:
    me = os.getpid()
    assert process_alive(me, process_started(me))
    if os.path.exists("/proc/self/stat"):
        assert not process_alive(me, "1")  # the pid, but another process's start time


def test_redis_reclaims_a_silent_holder_of_another_machine(tmp_path: Path, redis_server: Any) -> None:
    """A holder on another host cannot be looked at: its reservations go once it has not spoken to
    the store for REDIS_LEASE_S (one that spoke lately keeps them)."""
    redis = pytest.importorskip("redis")
    from assay.judges.budget_store import REDIS_LEASE_S, RedisBudgetStore

    url = redis_server.url.rsplit("/", 1)[0] + "/7"
    store = RedisBudgetStore(url, _scope("lease", tmp_path))
    client = redis.Redis.from_url(url)
    seconds, micros = client.time()
    now_ms = seconds * 1000 + micros // 1000
    for name, seen in (("silent", now_ms - int(REDIS_LEASE_S * 1000) - 1000), ("busy", now_ms - 1000)):
        client.hset(f"{store.prefix}:holders", f"elsewhere:{name}", "elsewhere|1|")
        client.hset(f"{store.prefix}:seen", f"elsewhere:{name}", seen)
        client.hset(f"{store.prefix}:res", f"9{len(name)}", f"elsewhere:{name}|0.4")
    client.close()

    async def ask() -> tuple[str, float]:
        async with store:
            grant = await store.reserve(0.7, 0.1, limit=LIMIT, spent=0.0)
            return grant.verdict, grant.reserved_usd

    assert anyio.run(ask) == ("wait", 0.4)  # the silent holder's 0.4 reclaimed, the busy one's kept


def test_wal_is_switched_on_once_another_process_lets_go_of_a_new_file(tmp_path: Path) -> None:
    """Switching a new state file to WAL needs a lock SQLite's busy timeout does not wait for (four
    processes opening one budget store at once: "database is locked" in a full run): it is retried."""
    import sqlite3
    import threading

    from assay.judges.state_file import use_wal

    path = tmp_path / "state.sqlite"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")  # another process, mid-way through creating the file
    timer = threading.Timer(0.3, holder.execute, args=("COMMIT",))
    timer.start()
    conn = sqlite3.connect(path, timeout=0)  # no busy wait at all: the retry is use_wal's
    try:
        use_wal(conn)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        timer.join()
        conn.close()
        holder.close()
