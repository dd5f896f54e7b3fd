"""A whole judged run against a rate-limited judge: `assay run` scoring N traces with one
`llm_judge` evaluator, end to end (process start-up, reading, judging, writing), against the
stand-in judge server (in its own process) with a hard limit of R requests/s and 0.2–0.6 s latency.

    python benchmarks/bench_judged_run.py --n 2000 --rps 20

Prints, per scenario (rpm configured correctly, 3x too high): wall time vs the ideal N/R, the
server's request and 429 counts, retries, and rows lost (missing or with an error result).
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any


def byte_compile() -> None:
    """Byte-compile assay as ``pip install .`` does (the README's install): an editable checkout
    under ``PYTHONDONTWRITEBYTECODE=1`` compiles its 90-odd modules from source at every start,
    0.17 s more from process start to the first request."""
    import compileall

    import assay

    compileall.compile_dir(str(Path(assay.__file__).parent), quiet=1)


def corpus(path: Path, n: int) -> None:
    with path.open("w") as f:
        for i in range(n):
            msgs = [{"role": "user", "content": f"What is {i} + {i}?"}, {"role": "assistant", "content": str(2 * i)}]
            f.write(
                json.dumps(
                    {"id": f"t{i}", "inputs": msgs[0]["content"], "messages": msgs, "reference_outputs": str(2 * i)}
                )
                + "\n"
            )


class ServerProcess:
    """The stand-in judge in its own process (its clock and event loop are not the client's, as with
    a real endpoint), stopped on exit."""

    def __init__(self, args: argparse.Namespace, rps: float) -> None:
        self.cmd = [
            sys.executable, "-m", "assay.testing.judge_server", "--port", "0",
            "--latency", f"{args.latency_low}-{args.latency_high}", "--rps", str(rps),
            "--limit", args.limit or ("window" if args.window else "bucket"), "--seed", str(args.seed),
        ]  # fmt: skip
        if args.burst:
            self.cmd += ["--burst", str(args.burst)]
        if args.coarse:
            self.cmd.append("--coarse")
        if args.bare:
            self.cmd.append("--bare")
        if args.announce:
            self.cmd.append("--announce")
        if getattr(args, "error_rate", 0.0):
            self.cmd += ["--error-rate", str(args.error_rate)]
        if getattr(args, "hang_rate", 0.0):
            self.cmd += ["--hang-rate", str(args.hang_rate)]
        self.url = ""

    def __enter__(self) -> ServerProcess:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        self.url = line.strip().rsplit(" ", 1)[-1]
        if not self.url.startswith("http"):
            self.proc.kill()
            raise SystemExit(f"judge server did not start: {line!r}")
        return self

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + "/stats?arrivals=1") as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def diagnose(arrivals: list[list[float]], rps: float) -> str:
    """Where the time went, from the server's own arrival log: the accepted rate per second, idle
    gaps (no accepted request for over 2/R) and the share of 429s."""
    ok = sorted(t for t, status in arrivals if status != 429)
    if len(ok) < 2:
        return "too few accepted requests"
    gaps = [b - a for a, b in itertools.pairwise(ok)]
    idle = sum(g - 1.0 / rps for g in gaps if g > 2.0 / rps)
    span = ok[-1] - ok[0]
    ordered = sorted(gaps)

    def q(share: float) -> float:
        return ordered[int(share * (len(ordered) - 1))] * 1000

    return (
        f"accepted span {span:.1f} s ({(len(ok) - 1) / span:.2f}/s), idle beyond 2/R: {idle:.1f} s, "
        f"gap p10/p50/p90 {q(0.1):.1f}/{q(0.5):.1f}/{q(0.9):.1f} ms (1/R = {1000 / rps:.1f} ms)"
    )


def run(workdir: Path, n: int, rps: float, factor: float, args: argparse.Namespace) -> dict[str, object]:
    with ServerProcess(args, rps) as server:
        judge: dict[str, Any] = {
            "provider": "openai",
            "base_url": f"{server.url}/v1",
            "model": "m",
            "timeout": args.timeout,
        }
        if factor > 0:
            judge["rpm"] = rps * 60 * factor
        if args.concurrency:
            judge["max_concurrency"] = args.concurrency
        cfg = {
            "source": {"path": "corpus.jsonl"},
            "judges": {"j": judge},
            "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "j"}}],
            "sink": {"path": f"out-{factor}/"},
        }
        (workdir / "run.yaml").write_text(json.dumps(cfg))
        workers = ["--workers", str(args.workers)]
        t0 = time.perf_counter()
        m0 = time.monotonic()  # the server stamps arrivals with the same (system-wide) clock
        proc = subprocess.run(
            [sys.executable, "-m", "assay.cli", "run", str(workdir / "run.yaml"), "-q", "--no-cache", *workers],
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - t0
        m1 = time.monotonic()
        stats = server.stats()
        requests, http_429 = stats["requests"], stats["rate_limited"]
        if args.diagnose:
            times = [t for t, _ in stats["arrivals"]]
            edges = f"; start to first request {min(times) - m0:.2f} s, last request to exit {m1 - max(times):.2f} s"
            print(f"  [{factor:g}x] {diagnose(stats['arrivals'], rps)}{edges}", flush=True)
    summary = json.loads((workdir / f"out-{factor}" / "_SUMMARY.json").read_text())
    rows = [
        json.loads(line)
        for p in sorted((workdir / f"out-{factor}").glob("part-*.jsonl"))
        for line in p.read_text().splitlines()
    ]
    scored = sum(1 for r in rows if r["results"]["correctness"]["score"] is not None)
    return {
        "scenario": {0: "rpm unset", 1: "rpm correct"}.get(factor, f"rpm {factor:g}x too high")
        + (f", --workers {args.workers}" if args.workers != 1 else ""),
        "exit": proc.returncode,
        "wall_s": wall,
        "ideal_s": n / rps,
        "requests": requests,
        "429": http_429,
        "retries": summary["totals"]["retries"],
        "lost": n - scored,
        "p50": summary["judges"]["j"]["latency_p50_s"],
        "p99": summary["judges"]["j"]["latency_p99_s"],
        "500s": stats["server_errors"],
        "hangs": stats["hangs"],
        "decreases": summary["judges"]["j"].get("rate_decreases"),
        "final_rpm": summary["judges"]["j"].get("rate_rpm"),
        "configured_rpm": summary["judges"]["j"].get("configured_rpm"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rps", type=float, default=20.0)
    ap.add_argument("--burst", type=float, default=None, help="server token bucket size (default R)")
    ap.add_argument("--latency-low", type=float, default=0.2)
    ap.add_argument("--latency-high", type=float, default=0.6)
    ap.add_argument("--concurrency", type=int, default=None, help="max_concurrency (default: unset)")
    ap.add_argument("--workers", type=int, default=1, help="assay run --workers (each takes 1/N of the rpm)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--window", action="store_true", help="server limit: a sliding one-second window")
    ap.add_argument(
        "--limit",
        choices=["bucket", "window", "spacing", "spacing-any", "minute", "second"],
        default=None,
        help="server limit: token bucket (default), sliding 1 s window, strict spacing of 1/R, "
        "per-minute window, fixed 1 s window",
    )
    ap.add_argument("--coarse", action="store_true", help="server sends only an integer Retry-After")
    ap.add_argument("--bare", action="store_true", help="server's 429 carries no hint at all (nginx limit_req)")
    ap.add_argument(
        "--factors", default="1,3", help="rpm configured as these multiples of the real limit (0: rpm unset)"
    )
    ap.add_argument("--announce", action="store_true", help="server announces its limit per minute in every answer")
    ap.add_argument("--diagnose", action="store_true", help="print where the time went (server arrival log)")
    ap.add_argument("--error-rate", type=float, default=0.0, help="share of requests the server answers 500")
    ap.add_argument("--hang-rate", type=float, default=0.0, help="share of requests the server never answers")
    ap.add_argument("--timeout", type=float, default=10.0, help="the judge's request timeout (seconds)")
    args = ap.parse_args()
    byte_compile()
    with tempfile.TemporaryDirectory() as d:
        workdir = Path(d)
        corpus(workdir / "corpus.jsonl", args.n)
        results = [run(workdir, args.n, args.rps, float(f), args) for f in args.factors.split(",")]
    kinds = {
        "window": "sliding 1 s window",
        "spacing": "strict spacing 1/R",
        "spacing-any": "strict spacing 1/R after any request",
        "minute": "per-minute window",
        "second": "fixed one-second window",
    }
    limit = args.limit or ("window" if args.window else "bucket")
    kind = kinds.get(limit, f"bucket {args.burst or args.rps:g}")
    hints = ", no hint in a 429" if args.bare else ", Retry-After only" if args.coarse else ""
    faults = ""
    if args.error_rate or args.hang_rate:
        faults = f", {args.error_rate:.1%} 500s, {args.hang_rate:.1%} hangs (timeout {args.timeout:g} s)"
    print(
        f"# {args.n} traces, server limit {args.rps:g} req/s ({kind}{hints}), "
        f"latency {args.latency_low}-{args.latency_high} s{faults}; ideal wall N/R = {args.n / args.rps:.1f} s"
    )
    print(
        "| scenario | exit | wall s | wall / ideal | calls/s (% of ceiling) | server requests | 429s (% of requests) "
        "| retries | lost | p50 / p99 s | 500s / hangs | rate cuts | final rate (% of rpm) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        rate = args.n / r["wall_s"]  # type: ignore[operator]
        print(
            f"| {r['scenario']} | {r['exit']} | {r['wall_s']:.1f} | {r['wall_s'] / r['ideal_s']:.3f} | "  # type: ignore[operator]
            f"{rate:.2f} ({rate / args.rps:.1%}) | {r['requests']} | {r['429']} "
            f"({r['429'] / max(r['requests'], 1):.1%}) | {r['retries']} | {r['lost']} | {r['p50']} / {r['p99']} "
            f"| {r['500s']} / {r['hangs']} | {r['decreases']} | {final_rate(r, args)} |"
        )  # type: ignore[operator]


def final_rate(r: dict[str, Any], args: argparse.Namespace) -> str:
    """The adaptive rate at the end of the run, as a share of the configured rpm."""
    rpm, configured = r["final_rpm"], r["configured_rpm"]
    if rpm is None or not configured:
        return "-" if rpm is None else f"{rpm:g} rpm"
    return f"{rpm:g} rpm ({rpm / configured:.0%})"


if __name__ == "__main__":
    main()
