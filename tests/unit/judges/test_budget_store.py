"""The shared budget store: several processes spend one budget within one call's cost of it; a
killed process's reservations are reclaimed; a scope stopped at a limit refuses the same limit."""

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
from assay.judges.budget_store import BudgetStore, process_alive, process_started

LIMIT = 1.0


def _spender(path: str, scope: str, seed: int, out: Any, start: Any) -> None:
    """One process's calls: estimated 0.01 each, really 0.002-0.03 (seeded); reports what it paid."""

    async def main() -> float:
        start.wait()
        rng = random.Random(seed)
        async with BudgetStore(path, scope) as store:
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
def test_processes_spend_one_budget_within_one_call(tmp_path: Path, seed: int) -> None:
    ctx = multiprocessing.get_context("fork")
    out, start = ctx.SimpleQueue(), ctx.Barrier(4)
    path = str(tmp_path / "budget.sqlite")
    procs = [ctx.Process(target=_spender, args=(path, "s", seed * 10 + i, out, start)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    spent = [out.get() for _ in procs]
    assert LIMIT - 0.03 < sum(spent) <= LIMIT + 0.03  # within one call's (largest) cost

    async def totals() -> tuple[float, float, float | None]:
        async with BudgetStore(path, "s") as store:
            return await store.totals()

    total, held, stopped = anyio.run(totals)
    assert total == pytest.approx(sum(spent)) and held == 0.0 and stopped == LIMIT


def _holder(path: str, ready: Any) -> None:
    async def main() -> None:
        async with BudgetStore(path, "s") as store:
            await store.reserve(0.9, 0.1, limit=LIMIT, spent=0.05)
            ready.set()
            await anyio.sleep(60)

    anyio.run(main)


def test_a_killed_process_keeps_no_reservation_but_its_spending_counts(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    path = str(tmp_path / "budget.sqlite")
    proc = ctx.Process(target=_holder, args=(path, ready))
    proc.start()
    assert ready.wait(30)

    async def ask() -> tuple[str, float, float]:
        async with BudgetStore(path, "s") as store:
            grant = await store.reserve(0.5, 0.1, limit=LIMIT, spent=0.0)
            if grant.verdict == "ok":
                store.release(grant.ticket)
            return grant.verdict, grant.spent_usd, grant.reserved_usd

    assert anyio.run(ask) == ("wait", 0.05, 0.9)  # the living holder's 0.9 is in the way
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    assert anyio.run(ask) == ("ok", 0.05, 0.5)  # reclaimed; what it spent stays spent


def test_a_scope_stopped_at_a_limit_refuses_it_and_a_raised_limit_goes_on(tmp_path: Path) -> None:
    async def main() -> list[str]:
        path = tmp_path / "budget.sqlite"
        verdicts = []
        async with BudgetStore(path, "ray:r") as store:
            store.seed(0.98)
            verdicts.append((await store.reserve(0.1, 0.05, limit=LIMIT, spent=0.0)).verdict)
        async with BudgetStore(path, "ray:r") as again:  # a later job under the same cap
            verdicts.append((await again.reserve(0.001, 0.001, limit=LIMIT, spent=0.0)).verdict)
            verdicts.append((await again.reserve(0.1, 0.05, limit=2.0, spent=0.0)).verdict)
        async with BudgetStore(path, "other") as other:  # another scope is not touched
            verdicts.append((await other.reserve(0.1, 0.05, limit=LIMIT, spent=0.0)).verdict)
        return verdicts

    assert anyio.run(main) == ["over", "closed", "ok", "ok"]


def test_a_budget_with_a_store_says_what_every_process_spent(tmp_path: Path) -> None:
    async def main() -> str:
        async with BudgetStore(tmp_path / "b.sqlite", "s") as store:
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
