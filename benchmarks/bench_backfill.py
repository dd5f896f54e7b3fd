"""Backfill costs (issue 29): the plan over many (trace, key) pairs, and a backfill with nothing
missing against scoring the same days.

1. **planning**: D days of a Parquet output (wide, K result keys, T traces a day, written with
   pyarrow in the sink's schema) read as the ledger (`published_pairs`: the columns trace_id and
   each key's identity) and anti-joined in Arrow with the day's input ids (`plan_pairs`), day
   after day as `assay backfill` plans them. Prints pairs/s, the time and the peak RSS (this
   process, `ru_maxrss`), and the time for 10^8 pairs extrapolated from the rate (a day's memory
   does not grow with the number of days).
2. **30 days**: `assay backfill` of D days × N traces with a real-time `llm_judge` against the
   stand-in judge (latency L) and `exact_match`, from nothing (every pair scored), then the same
   command again with nothing missing; the ratio of the two wall times.

    python benchmarks/bench_backfill.py --plan-days 17 --plan-traces 100000 --keys 6 --days 30 --n 200
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parent / "data" / "backfill"


def write_day(out: Path, day: str, traces: int, keys: list[str], identity: dict[str, str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from assay.connectors.parquet_schema import result_schema

    schema = result_schema(keys)
    ids = pa.array([f"{day}-t{i:07d}" for i in range(traces)])
    cols: dict[str, Any] = {
        "trace_id": ids,
        "run_id": pa.repeat(pa.scalar("bench"), traces),
        "ds": pa.repeat(pa.scalar(day), traces),
        "position": pa.repeat(pa.scalar("in.jsonl:1"), traces),
    }
    for key in keys:
        fields = {
            "score": pa.repeat(pa.scalar(1.0), traces),
            "value": pa.repeat(pa.scalar("true"), traces),
            "passed": pa.repeat(pa.scalar(True), traces),
            "comment": pa.nulls(traces, pa.string()),
            "error": pa.nulls(traces, pa.string()),
            "input_tokens": pa.nulls(traces, pa.int64()),
            "output_tokens": pa.nulls(traces, pa.int64()),
            "cost_usd": pa.nulls(traces, pa.float64()),
            "identity": pa.repeat(pa.scalar(identity[key]), traces),
        }
        cols[key] = pa.StructArray.from_arrays(list(fields.values()), names=list(fields))
    folder = out / f"dt={day}"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols).cast(schema), folder / "part-00000-00000.parquet", compression="zstd")
    (folder / "_SUCCESS").touch()


def days(n: int) -> list[str]:
    start = dt.date(2026, 1, 1)
    return [(start + dt.timedelta(days=i)).isoformat() for i in range(n)]


def bench_planning(n_days: int, traces: int, n_keys: int) -> dict[str, Any]:
    import pyarrow as pa

    from assay.config import build_config
    from assay.pipeline.ledger import plan_pairs, published_pairs

    out = ROOT / "plan"
    shutil.rmtree(out, ignore_errors=True)
    keys = [f"key{k}" for k in range(n_keys)]
    identity = {k: f"{k}/0123456789/-/-" for k in keys}
    expected = {**identity, keys[-1]: f"{keys[-1]}/changed/-/-"}  # one key stale: the anti-join has work
    for day in days(n_days):
        write_day(out, day, traces, keys, identity)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    total = to_score = 0
    for day in days(n_days):
        cfg = build_config(
            {"source": {"path": "in.jsonl"}, "evaluators": [{"name": "exact_match"}],
             "sink": {"path": str(out / f"dt={day}") + "/", "format": "parquet"}},
            ds=day,
        )  # fmt: skip
        pairs = published_pairs(cfg)
        ids = pa.array([f"{day}-t{i:07d}" for i in range(traces)])
        counts = plan_pairs(pairs, ids, expected)
        total += pairs.num_rows
        to_score += sum(counts.score.values())
        del pairs, ids
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert to_score == n_days * traces, to_score  # the stale key of every trace
    return {
        "pairs": total,
        "wall_s": wall,
        "pairs_per_s": total / wall,
        "peak_rss_mb": rss / 1024,
        "rss_before_mb": rss0 / 1024,
        "extrapolated_1e8_s": 1e8 / (total / wall),
    }


def bench_planning_json(n_days: int, traces: int, n_keys: int) -> dict[str, Any]:
    """The same plan over JSON-lines outputs (the rows as the engine writes them)."""
    import orjson
    import pyarrow as pa

    from assay.config import build_config
    from assay.pipeline.ledger import plan_pairs, published_pairs

    out = ROOT / "plan_json"
    shutil.rmtree(out, ignore_errors=True)
    keys = [f"key{k}" for k in range(n_keys)]
    identity = {k: f"{k}/0123456789/-/-" for k in keys}
    res = {k: {"key": k, "score": 1.0, "value": True, "comment": None, "metadata": {}, "error": None} for k in keys}
    for day in days(n_days):
        folder = out / f"dt={day}"
        folder.mkdir(parents=True)
        with open(folder / "part-00000-00000.jsonl", "wb") as f:
            for i in range(traces):
                row = {"trace_id": f"{day}-t{i:07d}", "run_id": "bench", "position": {"file": "in.jsonl", "line": i},
                       "results": res, "identity": identity}  # fmt: skip
                f.write(orjson.dumps(row) + b"\n")
        (folder / "_SUCCESS").touch()
    t0 = time.perf_counter()
    total = 0
    for day in days(n_days):
        cfg = build_config(
            {"source": {"path": "in.jsonl"}, "evaluators": [{"name": "exact_match"}],
             "sink": {"path": str(out / f"dt={day}") + "/"}},
            ds=day,
        )  # fmt: skip
        pairs = published_pairs(cfg)
        plan_pairs(pairs, pa.array([f"{day}-t{i:07d}" for i in range(traces)]), identity)
        total += pairs.num_rows
    wall = time.perf_counter() - t0
    return {"pairs": total, "wall_s": wall, "pairs_per_s": total / wall, "extrapolated_1e8_s": 1e8 / (total / wall)}


def assay(root: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "assay.cli", *args], capture_output=True, text=True, cwd=root)
    return time.perf_counter() - t0, proc


def bench_days(n_days: int, n: int, latency: float, parallel: int) -> dict[str, Any]:
    from assay.testing.judge_server import JudgeServerThread

    root = ROOT / "days"
    shutil.rmtree(root, ignore_errors=True)
    (root / "in").mkdir(parents=True)
    ds = days(n_days)
    for day in ds:
        recs = [
            {"id": f"{day}-t{i}", "inputs": f"q{i} of {day}", "outputs": f"a{i}", "reference_outputs": f"a{i % 2}"}
            for i in range(n)
        ]
        (root / "in" / f"{day}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with JudgeServerThread(latency=latency, seed=1) as server:
        cfg = {
            "source": {"path": "in/{{ ds }}.jsonl"},
            "judges": {"gpt": {"provider": "openai", "base_url": f"{server.url}/v1", "model": "judge-1",
                               "rpm": 600000, "max_concurrency": 16}},
            "evaluators": [{"name": "exact_match"}, {"name": "llm_judge", "params": {"prompt": "correctness"}}],
            "sink": {"path": "out/dt={{ ds }}/"},
        }  # fmt: skip
        (root / "run.yaml").write_text(json.dumps(cfg))
        args = ["backfill", "run.yaml", "--from", ds[0], "--to", ds[-1], "-q", "--parallel-days", str(parallel)]
        scored_s, first = assay(root, *args)
        assert first.returncode == 0, first.stderr
        calls = server.stats.requests
        again_s, second = assay(root, *args)
        assert second.returncode == 0, second.stderr
        assert server.stats.requests == calls
    return {
        "days": n_days,
        "traces": n_days * n,
        "calls": calls,
        "scoring_s": scored_s,
        "nothing_missing_s": again_s,
        "ratio": again_s / scored_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plan-days", type=int, default=17)
    parser.add_argument("--plan-traces", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=6)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.05, help="stand-in judge latency, seconds")
    parser.add_argument("--parallel-days", type=int, default=4)
    parser.add_argument("--json-days", type=int, default=0, help="also plan over JSON-lines outputs of this many days")
    parser.add_argument("--skip-plan", action="store_true")
    parser.add_argument("--skip-days", action="store_true")
    a = parser.parse_args()
    with open("/proc/loadavg") as f:
        print(f"load average: {f.read().split()[:3]}")
    if not a.skip_plan:
        p = bench_planning(a.plan_days, a.plan_traces, a.keys)
        print("\nplanning (Parquet ledger, Arrow semi/anti-join, day after day)")
        print("| days | traces/day | keys | pairs | wall s | pairs/s | peak RSS MB | 10^8 pairs (extrapolated) |")
        print("|---|---|---|---|---|---|---|---|")
        print(
            f"| {a.plan_days} | {a.plan_traces:,} | {a.keys} | {p['pairs']:,} | {p['wall_s']:.1f} |"
            f" {p['pairs_per_s']:,.0f} | {p['peak_rss_mb']:.0f} | {p['extrapolated_1e8_s'] / 60:.1f} min |"
        )
    if a.json_days:
        j = bench_planning_json(a.json_days, a.plan_traces, a.keys)
        print("\nplanning (JSON-lines ledger, parsed line by line into the same columns)")
        print("| days | traces/day | keys | pairs | wall s | pairs/s | 10^8 pairs (extrapolated) |")
        print("|---|---|---|---|---|---|---|")
        print(
            f"| {a.json_days} | {a.plan_traces:,} | {a.keys} | {j['pairs']:,} | {j['wall_s']:.1f} |"
            f" {j['pairs_per_s']:,.0f} | {j['extrapolated_1e8_s'] / 60:.1f} min |"
        )
    if not a.skip_days:
        d = bench_days(a.days, a.n, a.latency, a.parallel_days)
        print(f"\n{a.days}-day backfill (JSON lines, exact_match + llm_judge at {a.latency * 1000:.0f} ms latency)")
        print("| days | traces | judge calls | scoring every day s | nothing missing s | ratio |")
        print("|---|---|---|---|---|---|")
        print(
            f"| {d['days']} | {d['traces']:,} | {d['calls']:,} | {d['scoring_s']:.1f} |"
            f" {d['nothing_missing_s']:.1f} | {100 * d['ratio']:.1f} % |"
        )


if __name__ == "__main__":
    main()
