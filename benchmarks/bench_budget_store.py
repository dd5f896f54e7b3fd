"""The shared judge budget's store (``<state_dir>/budget.sqlite``): how many judge calls per second
P processes can reserve and settle through it (each call: one ``BEGIN IMMEDIATE`` reserve, one
settle), against the judge rates a run sees (60,000 rpm is 1,000 calls/s).

    python benchmarks/bench_budget_store.py --processes 1 2 4 --calls 2000
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio

from assay.judges.budget import Budget
from assay.judges.budget_store import BudgetStore


def _worker(path: str, calls: int, out: Any, start: Any) -> None:
    async def main() -> float:
        async with BudgetStore(path, "bench") as store:
            budget = Budget(1e9, store=store)
            start.wait()
            t0 = time.perf_counter()
            for _ in range(calls):
                held = await budget.acquire("j", 0.001)
                budget.charge(0.001, held)
            await store.totals()  # every queued settle applied
            return time.perf_counter() - t0

    out.put(anyio.run(main))


def measure(processes: int, calls: int) -> tuple[float, float]:
    """(calls/s of all processes together, seconds of the slowest process)."""
    ctx = multiprocessing.get_context("fork")
    out, start = ctx.SimpleQueue(), ctx.Barrier(processes)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "budget.sqlite")
        procs = [ctx.Process(target=_worker, args=(path, calls, out, start)) for _ in range(processes)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        slowest = max(out.get() for _ in procs)
    return processes * calls / slowest, slowest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--calls", type=int, default=2000, help="calls per process")
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.1f}")
    print("| processes | calls each | calls/s in all | slowest process |")
    print("|---|---|---|---|")
    for p in args.processes:
        rate, slowest = measure(p, args.calls)
        print(f"| {p} | {args.calls:,} | {rate:,.0f} | {slowest:.2f} s |")


if __name__ == "__main__":
    main()
