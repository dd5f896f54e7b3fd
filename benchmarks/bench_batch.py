"""Batch vs real time: the same `assay run` (N traces, one `llm_judge`) against the stand-in judge
(real time: a hard limit of R requests/s, 0.2–0.6 s latency) and against the stand-in batch API
(batches end after D seconds; a share of lines fail or expire and are resubmitted), each server in
its own process.

    python benchmarks/bench_batch.py --n 5000 --rps 20 --delay 20 --provider openai

Prints per mode: wall time, invocations, the judge cost from `_SUMMARY.json` (batch at the 0.5
discount), requests sent, and for batch mode the time assay itself worked (every invocation's wall
time; the rest is waiting for the provider) when run as a cron job would run it: the same command
every `--every` seconds until exit 0.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

PRICE_IN, PRICE_OUT = 0.4, 1.6


def corpus(path: Path, n: int) -> None:
    with path.open("w") as f:
        for i in range(n):
            rec = {
                "id": f"t{i}",
                "inputs": f"What is {i} + {i}?",
                "outputs": str(2 * i),
                "reference_outputs": str(2 * i),
            }
            f.write(json.dumps(rec) + "\n")


class Server:
    """A stand-in server module in its own process; ``url`` once it listens."""

    def __init__(self, module: str, *args: str) -> None:
        self.cmd = [sys.executable, "-m", module, "--port", "0", *args]
        self.url = ""

    def __enter__(self) -> Server:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        self.url = line.split("listening on ")[1].split()[0]
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + "/stats") as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]


def run_file(root: Path, url: str, args: argparse.Namespace, batch: bool) -> Path:
    judge: dict[str, Any] = {
        "provider": args.provider,
        "base_url": f"{url}/v1",
        "model": "judge-1",
        "input_price_per_mtok": PRICE_IN,
        "output_price_per_mtok": PRICE_OUT,
    }
    if batch:
        judge["mode"] = "batch"
        judge["batch"] = {"max_requests": args.max_requests, "poll_interval_s": args.poll}
    else:
        judge["rpm"] = args.rps * 60
    cfg = {
        "source": {"path": "corpus.jsonl"},
        "judges": {"j": judge},
        "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "j"}}],
        "sink": {"path": "out-batch/" if batch else "out-realtime/"},
        "state_dir": ".assay-batch" if batch else ".assay-realtime",
    }
    path = root / ("batch.yaml" if batch else "realtime.yaml")
    path.write_text(json.dumps(cfg))
    return path


def assay(root: Path, *args: str) -> tuple[int, float]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "assay.cli", *args, "-q"], cwd=root, capture_output=True, text=True)
    if proc.returncode not in (0, 75):
        sys.stderr.write(proc.stderr)
    return proc.returncode, time.perf_counter() - t0


def outcome(root: Path, out: str) -> dict[str, Any]:
    summary = json.loads((root / out / "_SUMMARY.json").read_text())
    rows = [json.loads(x) for p in sorted((root / out).glob("part-*.jsonl")) for x in p.read_text().splitlines()]
    lost = sum(1 for r in rows for res in r["results"].values() if res.get("error") is not None)
    return {"rows": len(rows), "errors": lost, "totals": summary["totals"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rps", type=float, default=20.0, help="the real-time judge's hard limit")
    ap.add_argument("--delay", default="10-20", help="seconds until a batch ends (or LOW-HIGH)")
    ap.add_argument("--line-error-rate", type=float, default=0.02)
    ap.add_argument("--expire-rate", type=float, default=0.02)
    ap.add_argument("--max-requests", type=int, default=1000)
    ap.add_argument("--poll", type=float, default=2.0)
    ap.add_argument("--every", type=float, default=5.0, help="cron mode: seconds between invocations")
    ap.add_argument("--provider", default="openai", choices=["openai", "anthropic"])
    ap.add_argument("--skip-realtime", action="store_true")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="assay-bench-batch-"))
    corpus(root / "corpus.jsonl", args.n)
    print(f"# {args.n} traces, {args.provider}; real time: {args.rps:g} req/s limit, latency 0.2-0.6 s; "
          f"batch: delay {args.delay} s, {args.max_requests} requests a batch, line errors "
          f"{args.line_error_rate:.0%}, expiry {args.expire_rate:.0%}")  # fmt: skip
    if not args.skip_realtime:
        with Server("assay.testing.judge_server", "--rps", str(args.rps), "--latency", "0.2-0.6") as server:
            code, wall = assay(root, "run", str(run_file(root, server.url, args, batch=False)))
            o = outcome(root, "out-realtime")
            print(
                f"realtime      exit {code}  wall {wall:7.1f} s  invocations 1  requests {server.stats()['requests']:,}"
                f"  rows {o['rows']:,} (errors {o['errors']})  cost ${o['totals']['cost_usd']:.4f}"
            )
    batch_args = ["--delay", args.delay, "--line-error-rate", str(args.line_error_rate)]
    batch_args += ["--expire-rate", str(args.expire_rate)]
    with Server("assay.testing.batch_server", *batch_args) as server:
        f = run_file(root, server.url, args, batch=True)
        code, wall = assay(root, "run", str(f), "--wait")
        o = outcome(root, "out-batch")
        s = server.stats()
        t = o["totals"]
        print(
            f"batch --wait  exit {code}  wall {wall:7.1f} s  invocations 1  batches {s['batches']}"
            f"  lines {s['lines']:,} (resubmitted {s['resubmitted']})  real-time calls {s['realtime']['requests']}"
            f"  rows {o['rows']:,} (errors {o['errors']})  cost ${t['cost_usd']:.4f}"
            f" (batch ${t['batch']['cost_usd']:.4f}, realtime ${t['realtime']['cost_usd']:.4f})"
        )
    with Server("assay.testing.batch_server", *batch_args) as server:
        f = run_file(root, server.url, args, batch=True)
        for d in (root / "out-batch", root / ".assay-batch"):
            subprocess.run(["rm", "-rf", str(d)], check=True)
        t0 = time.perf_counter()
        worked = 0.0
        invocations = 0
        while True:
            code, took = assay(root, "run", str(f))
            worked += took
            invocations += 1
            if code != 75:
                break
            time.sleep(args.every)
        wall = time.perf_counter() - t0
        o = outcome(root, "out-batch")
        print(
            f"batch cron    exit {code}  wall {wall:7.1f} s  invocations {invocations}  assay worked {worked:.1f} s"
            f"  rows {o['rows']:,} (errors {o['errors']})  cost ${o['totals']['cost_usd']:.4f}"
        )


if __name__ == "__main__":
    main()
