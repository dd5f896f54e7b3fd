"""S3 → trajectory match → S3 against file → trajectory match → file, in one process.

Uploads N generated traces (``gen_corpus.py``) as 20 gzip objects to a local S3 server (moto's
server mode on a loopback port), then runs the engine (:class:`assay.pipeline.runner.Pipeline`,
``trajectory_match:mode=strict``) twice over the same records:

* ``file → file``: the 20 ``.jsonl.gz`` files from a local directory into a local directory sink;
* ``S3 → S3``: the 20 objects from ``s3://bench/traces/dt=…/`` into ``s3://bench/scores/dt=…/``
  (gzip parts, ``_SUMMARY.json``, ``_SUCCESS``).

Both read gzip and write gzip parts, so the difference is where the bytes live. moto is a Python
server in the same process family on the same machine, so the S3 numbers include its CPU cost:
they are a floor, not what a real bucket gives.

    python benchmarks/bench_s3.py --n 20000
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from assay.connectors.base import Sink, Source  # noqa: E402
from assay.connectors.file import FileSource, LocalSink  # noqa: E402
from assay.connectors.s3 import S3Config, S3Sink, S3Source  # noqa: E402
from assay.evaluators import TrajectoryMatch  # noqa: E402
from assay.pipeline.runner import Pipeline, RunOptions  # noqa: E402
from assay.stages.evaluate import EvaluateStage  # noqa: E402
from tests.support.s3_server import S3Server  # noqa: E402

OBJECTS = 20
DS = "2026-11-21"


def load_gen_corpus() -> Any:
    spec = importlib.util.spec_from_file_location("gen_corpus", HERE / "gen_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_corpus"] = module
    spec.loader.exec_module(module)
    return module


def make_objects(n: int, seed: int) -> list[bytes]:
    """N traces as 20 gzip JSON-lines bodies (record i goes to object i * 20 // n)."""
    gen = load_gen_corpus()
    lines: list[list[bytes]] = [[] for _ in range(OBJECTS)]
    for i in range(n):
        lines[i * OBJECTS // n].append(orjson.dumps(gen.make_record(seed, i)))
    return [gzip.compress(b"\n".join(chunk) + b"\n", compresslevel=6, mtime=0) for chunk in lines]


async def run_engine(source: Source, sink: Sink, dead: Sink) -> tuple[dict[str, int], float]:
    """The engine over one source/sink pair: its counts, wall seconds (open → publish)."""
    started = time.perf_counter()
    pipeline = Pipeline(source, EvaluateStage([TrajectoryMatch(mode="strict")]), sink, dead, RunOptions())
    async with source, sink, dead:
        outcome = await pipeline.run()
        await sink.flush()
        await dead.flush()
        await sink.publish(outcome.stats.to_dict(), success=True)
    return outcome.stats.to_dict()["counts"], time.perf_counter() - started


def rows_in(data: list[bytes]) -> int:
    return sum(gzip.decompress(d).count(b"\n") for d in data)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20_000, help="traces (default 20000, about 140 MB of JSON)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--concurrency", type=int, default=4, help="S3Source max_concurrent_objects")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    bodies = make_objects(args.n, args.seed)
    size = sum(len(b) for b in bodies)
    took = time.perf_counter() - t0
    print(f"# {args.n} traces as {OBJECTS} gzip objects, {size / 1e6:.1f} MB compressed (made in {took:.1f} s)")

    results: list[tuple[str, int, float, int]] = []
    with tempfile.TemporaryDirectory() as tmp, S3Server(process=True) as server:
        inp = Path(tmp) / "traces"
        inp.mkdir()
        for i, body in enumerate(bodies):
            (inp / f"{i:02d}.jsonl.gz").write_bytes(body)
        client = server.client()
        client.create_bucket(Bucket="bench")
        for i, body in enumerate(bodies):
            client.put_object(Bucket="bench", Key=f"traces/dt={DS}/{i:02d}.jsonl.gz", Body=body)

        out = Path(tmp) / "scores"
        f_src = FileSource([str(inp)])
        f_sink = LocalSink(str(out) + "/", compression="gzip")
        f_dead = LocalSink(str(Path(tmp) / "dead") + "/", prefix="dead")
        _, wall = anyio.run(run_engine, f_src, f_sink, f_dead)
        written = [p.read_bytes() for p in sorted(out.glob("part-*"))]
        results.append(("file → file", args.n, wall, rows_in(written)))

        cfg = S3Config(endpoint_url=server.endpoint_url)
        s_src = S3Source(f"s3://bench/traces/dt={DS}/", s3=cfg, max_concurrent_objects=args.concurrency)
        s_sink = S3Sink(f"s3://bench/scores/dt={DS}/", s3=cfg, compression="gzip")
        s_dead = S3Sink.dead_letter(f"s3://bench/scores/dt={DS}/", s3=cfg)
        _, wall = anyio.run(run_engine, s_src, s_sink, s_dead)
        listing = client.list_objects_v2(Bucket="bench", Prefix=f"scores/dt={DS}/part-")
        written = [client.get_object(Bucket="bench", Key=o["Key"])["Body"].read() for o in listing.get("Contents", [])]
        results.append(("S3 → S3 (moto)", args.n, wall, rows_in(written)))
        last = sorted(o["Key"] for o in client.list_objects_v2(Bucket="bench", Prefix="scores/")["Contents"])
        assert f"scores/dt={DS}/_SUCCESS" in last

    print()
    print("| path | traces | rows written | wall s | traces/s |")
    print("|---|---:|---:|---:|---:|")
    for label, n, wall, rows in results:
        print(f"| {label} | {n} | {rows} | {wall:.2f} | {n / wall:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
