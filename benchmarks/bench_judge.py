"""Judge throughput against a hard rate limit: how close does a JudgePool get to the ceiling?

Starts the stand-in judge server with a limit of R requests/s (token bucket, 429 + Retry-After
beyond it) and a latency of 0.2-0.6 s, then drives N judge calls through a JudgePool, once with
the rate configured correctly and once configured 3x too high, and prints per scenario: achieved
calls/s as a percentage of the ceiling, wall time against the ideal N/R, 429s, retries, lost calls
and p50/p99 latency.

    python benchmarks/bench_judge.py --n 2000 --rps 20
    python benchmarks/bench_judge.py --n 400 --rps 20 --coarse   # server sends only "Retry-After: 1"
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from assay.exceptions import JudgeError
from assay.judges import JudgePool, JudgeRequest
from assay.testing.judge_server import JudgeServer

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"reasoning": {"type": "string"}, "score": {"type": "boolean"}},
    "required": ["reasoning", "score"],
}


@dataclass
class Outcome:
    name: str
    configured_rpm: float
    wall_s: float
    ideal_s: float
    ok: int
    lost: int
    server_requests: int
    server_429: int
    stats: dict[str, Any]


async def run_scenario(name: str, args: argparse.Namespace, factor: float) -> Outcome:
    server = JudgeServer(
        latency=(args.latency_low, args.latency_high),
        rps=args.rps,
        burst=args.burst,
        seed=args.seed,
        retry_after_ms=not args.coarse,
        limit_kind=args.limit,
    )
    async with server:
        rpm = args.rps * 60 * factor
        judge: dict[str, Any] = {
            "base_url": server.url + "/v1",
            "model": "bench",
            "max_retries": args.max_retries,
            "timeout": 10,
        }
        if factor > 0:
            judge["rpm"] = rpm
        if args.concurrency:
            judge["max_concurrency"] = args.concurrency
        judges = {"bench": judge}
        ok = lost = 0
        with tempfile.TemporaryDirectory() as state:
            pool = JudgePool.from_config(judges, state_dir=Path(state), use_cache=False)
            async with pool:
                judge = pool.get("bench")

                async def one(i: int) -> None:
                    nonlocal ok, lost
                    request = JudgeRequest(
                        [{"role": "user", "content": f"Trace {i}: is the answer correct?"}], schema=SCHEMA
                    )
                    try:
                        await judge.complete(request)
                        ok += 1
                    except JudgeError:
                        lost += 1

                started = time.perf_counter()
                async with anyio.create_task_group() as tg:
                    for i in range(args.n):
                        tg.start_soon(one, i)
                wall = time.perf_counter() - started
                stats = pool.stats()["bench"]
        return Outcome(
            name=name,
            configured_rpm=rpm,
            wall_s=wall,
            ideal_s=args.n / args.rps,
            ok=ok,
            lost=lost,
            server_requests=server.stats.requests,
            server_429=server.stats.rate_limited,
            stats=stats,
        )


def print_table(outcomes: list[Outcome], args: argparse.Namespace) -> None:
    print(
        f"\nN={args.n} calls, server limit R={args.rps:g} req/s "
        f"({args.limit if args.limit != 'bucket' else f'token bucket of {args.burst or args.rps:g}'}), "
        f"latency {args.latency_low:g}-{args.latency_high:g} s, max_concurrency={args.concurrency}, "
        f"Retry-After: {'integer seconds only' if args.coarse else 'retry-after-ms + Retry-After'}\n"
    )
    header = (
        "| scenario | configured rpm | calls/s | % of ceiling | wall s | ideal N/R s | wall/ideal "
        "| 429s | 429 % of requests | retries | lost | p50 s | p99 s | final rpm |"
    )
    print(header)
    print("|" + "|".join(["---"] * 14) + "|")
    for o in outcomes:
        rate = o.ok / o.wall_s
        s = o.stats
        share = 100.0 * o.server_429 / max(o.server_requests, 1)
        print(
            f"| {o.name} | {o.configured_rpm:g} | {rate:.2f} | {100 * rate / args.rps:.1f}% | {o.wall_s:.1f} "
            f"| {o.ideal_s:.1f} | {o.wall_s / o.ideal_s:.3f} | {o.server_429} | {share:.1f}% "
            f"| {s['retries']} | {o.lost} | {s['latency_p50_s']} | {s['latency_p99_s']} | {s['rate_rpm']} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="judge calls per scenario")
    parser.add_argument("--rps", type=float, default=20.0, help="server's hard limit R (requests/s)")
    parser.add_argument("--burst", type=float, default=None, help="server token bucket size (default R)")
    parser.add_argument("--latency-low", type=float, default=0.2)
    parser.add_argument("--latency-high", type=float, default=0.6)
    parser.add_argument(
        "--concurrency", type=int, default=None, help="max_concurrency of the endpoint (default: unset, automatic)"
    )
    parser.add_argument("--max-retries", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--limit", default="bucket", choices=["bucket", "window", "spacing", "spacing-any", "minute"])
    parser.add_argument("--coarse", action="store_true", help="server sends only an integer Retry-After")
    parser.add_argument(
        "--scenarios", default="correct,3x", help="comma-separated: correct, 3x (rpm 3x too high), 2x, 1.5x"
    )
    args = parser.parse_args()
    factors = {"correct": 1.0, "1.5x": 1.5, "2x": 2.0, "3x": 3.0, "unset": 0.0}
    outcomes = []
    for name in args.scenarios.split(","):
        label = {"correct": "rpm correct", "unset": "rpm unset"}.get(name, f"rpm {name} too high")
        outcomes.append(anyio.run(run_scenario, label, args, factors[name]))
        print(f"done: {label}", flush=True)
    print_table(outcomes, args)


if __name__ == "__main__":
    main()
