"""Multi-row exports: a LangSmith run-per-line dump (one file, rows shuffled) read into traces.

For N and 10·N traces (about 5 rows each), each in a fresh process: rows/s and traces/s of read →
group by trace id → normalize, and the peak RSS, with the rows held in memory (the default budget)
and spilled to a temporary file (``spill_bytes=0``). Also what the export check costs a plain JSON
lines file: FileSource alone vs wrapped in AssembleExports.

    python benchmarks/bench_exports.py [N]

Grouping alone (read → group by trace id, no normalization), each budget in a fresh process: rows/s
and peak RSS for a dump of about 5·N rows, rows held up to each budget (bytes) and then sorted
into runs on disk:

    python benchmarks/bench_exports.py --group 200000 67108864 4194304

A LangSmith bulk export as Parquet (the bulk export's columns, about 5 runs per trace, row groups
of some 10,000 rows) scored by ``assay run`` (``max_turns``) in a fresh process: wall time and the
process's peak RSS, for each number of traces given:

    python benchmarks/bench_exports.py --parquet 13300 198700
"""

from __future__ import annotations

import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT / "benchmarks" / "data"


def make_export(n: int) -> Path:
    from tests.support.exports import langsmith_export

    path = DATA / f"langsmith-{n}.jsonl"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        rows, _ = langsmith_export(n, seed=1)
        random.Random(2).shuffle(rows)
        path.write_bytes(b"".join(orjson.dumps(r, default=str) + b"\n" for r in rows))
    return path


def export_path(n: int) -> Path:
    """The export of ``n`` traces, written by a child process: a child's peak RSS counts its
    parent's (Linux keeps it across fork and exec), and generating the rows takes gigabytes."""
    path = DATA / f"langsmith-{n}.jsonl"
    if not path.exists():
        subprocess.run([sys.executable, __file__, "--make", str(n)], check=True)
    return path


def make_plain(n: int) -> Path:
    path = DATA / f"plain-{n}.jsonl"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}]
        path.write_bytes(b"".join(orjson.dumps({"id": f"t{i}", "messages": msgs}) + b"\n" for i in range(n)))
    return path


def child(path: str, spill: str) -> None:
    """One measurement, in its own process: prints rows, traces, seconds, peak RSS (MiB)."""
    from assay.connectors.exports import AssembleExports
    from assay.connectors.file_source import FileSource
    from assay.stages.normalize import parse_envelope
    from assay.traces.model import Trace
    from assay.traces.normalize import NormalizeOptions

    options = NormalizeOptions()
    kwargs = {} if spill == "memory" else {"spill_bytes": 0}

    async def run() -> int:
        traces = 0
        inner = FileSource([path], batch_size=256)
        src = AssembleExports(inner, **kwargs) if spill != "none" else inner
        async with src:
            async for batch in src.batches():
                for env in batch:
                    if spill == "none":
                        traces += 1
                        continue
                    t = parse_envelope(env, options)
                    assert isinstance(t, Trace), t
                    traces += 1
        return traces

    t0 = time.perf_counter()
    traces = anyio.run(run)
    dt = time.perf_counter() - t0
    with open(path, "rb") as f:
        rows = sum(1 for _ in f)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(orjson.dumps({"rows": rows, "traces": traces, "s": dt, "rss_mib": rss}).decode())


def group_child(path: str, budget: int) -> None:
    """Grouping alone, in its own process: prints rows, traces, seconds, peak RSS (MiB)."""
    from assay.connectors.exports import AssembleExports
    from assay.connectors.file_source import FileSource

    class Unledgered(FileSource):
        async def ack(self, positions: Any) -> None:
            """Not recorded: the resume ledger's cost is the file source's, not the grouping's."""

    async def run() -> tuple[int, int]:
        traces = rows = 0
        async with AssembleExports(Unledgered([path], batch_size=256), spill_bytes=budget) as src:
            async for batch in src.batches():
                traces += len(batch)
                rows += sum(e.payload.count(b'"run_type"') for e in batch)
                await src.ack([e.position for e in batch])  # lets go of each trace's row positions
        return rows, traces

    t0 = time.perf_counter()
    rows, traces = anyio.run(run)
    dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(orjson.dumps({"rows": rows, "traces": traces, "s": dt, "rss_mib": rss}).decode())


def group_main(n: int, budgets: list[int]) -> None:
    path = export_path(n)
    print("| rows | traces | budget | rows/s | peak RSS |")
    print("|---:|---:|---:|---:|---:|")
    for budget in budgets:
        out = subprocess.run(
            [sys.executable, __file__, "--group-child", str(path), str(budget)],
            capture_output=True,
            text=True,
            check=True,
        )
        r = orjson.loads(out.stdout.splitlines()[-1])
        print(
            f"| {r['rows']:,} | {r['traces']:,} | {budget / (1 << 20):g} MiB | {r['rows'] / r['s']:,.0f} | "
            f"{r['rss_mib']:.0f} MiB |"
        )


def measure(path: Path, spill: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(path), spill], capture_output=True, text=True, check=True
    )
    result: dict[str, float] = orjson.loads(out.stdout.splitlines()[-1])
    return result


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    print("| traces | rows | rows held | rows/s | traces/s | peak RSS |")
    print("|---:|---:|---|---:|---:|---:|")
    for size in (n, 10 * n):
        path = export_path(size)
        for spill in ("memory", "disk"):
            r = measure(path, spill)
            print(
                f"| {r['traces']:,} | {r['rows']:,} | {spill} | {r['rows'] / r['s']:,.0f} | "
                f"{r['traces'] / r['s']:,.0f} | {r['rss_mib']:.0f} MiB |"
            )
    plain = make_plain(50 * n)
    base = min(measure(plain, "none")["s"] for _ in range(3))
    wrapped = min(measure(plain, "wrapped")["s"] for _ in range(3))
    print(f"\nplain JSON lines, {50 * n:,} records, read only: FileSource {base:.3f} s, wrapped {wrapped:.3f} s")


def make_parquet(n: int) -> Path:
    """The bulk export of ``n`` traces as Parquet, written 2,000 traces (a row group) at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.support.exports import langsmith_export
    from tests.support.sdk_exports import langsmith_schema

    path = DATA / f"langsmith-{n}.parquet"
    if path.exists():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    schema = langsmith_schema()
    with pq.ParquetWriter(path.with_suffix(".tmp"), schema) as writer:
        for start in range(0, n, 2000):
            rows, _ = langsmith_export(min(2000, n - start), seed=start)
            random.Random(start).shuffle(rows)
            for r in rows:
                r["is_root"] = r["parent_run_id"] is None
            writer.write_table(pa.Table.from_pylist(rows, schema=schema))
    path.with_suffix(".tmp").rename(path)
    return path


#: Runs ``assay run`` in this process and prints its peak RSS (MiB) on stderr, whatever the exit.
_RUN_AND_MEASURE = """
import atexit, resource, sys
from assay.cli import main
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
atexit.register(lambda: print("peak_rss_mib", peak(), file=sys.stderr))
main()
"""


def parquet_main(sizes: list[int]) -> None:
    import json
    import tempfile

    print("| traces | rows | row groups | wall s | peak RSS |")
    print("|---:|---:|---:|---:|---:|")
    for n in sizes:
        subprocess.run([sys.executable, __file__, "--make-parquet", str(n)], check=True)
        path = DATA / f"langsmith-{n}.parquet"
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(path).metadata
        with tempfile.TemporaryDirectory() as tmp:
            run = Path(tmp) / "run.yaml"
            run.write_text(
                json.dumps(
                    {
                        "source": {"path": str(path)},
                        "evaluators": ["max_turns:max_turns=5"],
                        "sink": {"path": f"{tmp}/out/"},
                        "state_dir": f"{tmp}/state",
                    }
                )
            )
            t0 = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", _RUN_AND_MEASURE, "run", str(run), "--ds", "2026-11-27", "-q"],
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
            wall = time.perf_counter() - t0
        peak = next(float(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("peak_rss_mib"))
        assert done.returncode == 0, done.stderr
        print(f"| {n:,} | {meta.num_rows:,} | {meta.num_row_groups} | {wall:.0f} | {peak:.0f} MiB |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--make":
        make_export(int(sys.argv[2]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--make-parquet":
        make_parquet(int(sys.argv[2]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--parquet":
        parquet_main([int(n) for n in sys.argv[2:]] or [13300])
    elif len(sys.argv) > 1 and sys.argv[1] == "--group-child":
        group_child(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--group":
        group_main(int(sys.argv[2]), [int(b) for b in sys.argv[3:]] or [64 << 20])
    elif len(sys.argv) > 1 and sys.argv[1] == "--child":
        path, mode = sys.argv[2], sys.argv[3]
        if mode == "wrapped":  # the wrapper on a plain file: read only, no normalization
            from assay.connectors.exports import AssembleExports
            from assay.connectors.file_source import FileSource

            async def read() -> int:
                n = 0
                async with AssembleExports(FileSource([path], batch_size=256)) as src:
                    async for batch in src.batches():
                        n += len(batch)
                return n

            t0 = time.perf_counter()
            count = anyio.run(read)
            print(orjson.dumps({"rows": count, "traces": count, "s": time.perf_counter() - t0, "rss_mib": 0}).decode())
        else:
            child(path, mode)
    else:
        main()
