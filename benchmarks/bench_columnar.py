"""The columnar scorer: ``assay run`` Parquet → Parquet scored by columns against JSON lines → JSON
lines (and against Parquet → Parquet with the columnar path off) on the same traces, the scoring
alone over dictionary-encoded tool names, and peak RSS from 10× to 100× the corpus.

Evaluators (name level): ``trajectory_match`` strict and unordered with ``tool_args_match_mode:
ignore``, ``tool_call_accuracy`` with ``args_match_mode: ignore``. The corpus is ``gen_corpus.py``'s
(seed 0, flat OpenAI records) and its Parquet twin (``bench_lake.py``'s), cached under
``benchmarks/data/``. Each run is a fresh ``python -m assay.cli run … --workers 1`` measured by GNU
time (wall, user + system CPU, peak RSS); runs of the three kinds alternate, best of ``--repeat``.
The outputs of the Parquet runs are compared (every value of the result tables), and the JSON
run's mean scores with theirs.

The scoring alone: the tool columns of the Parquet file read once (tool names cast to
``dictionary<int32, string>``), then ``ColumnarPlan.score`` over its batches of 65,536 rows (score,
value and ``passed``; comments are built on demand and timed apart), in one process and in two
processes at once (each scoring the whole table; rate = all rows / the slower one's time).

    python benchmarks/bench_columnar.py                      # N = 100,000; memory at 10^6 and 10^7 rows
    python benchmarks/bench_columnar.py --n 20000 --skip-memory --repeat 3
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
EVALUATORS = [
    "trajectory_match:mode=strict,tool_args_match_mode=ignore",
    "trajectory_match:mode=unordered,tool_args_match_mode=ignore",
    "tool_call_accuracy:args_match_mode=ignore",
]


def _lake() -> Any:
    spec = importlib.util.spec_from_file_location("bench_lake", HERE / "bench_lake.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_lake"] = module
    spec.loader.exec_module(module)
    return module


def run(label: str, source: Path, sink: dict[str, Any], work: Path, columnar: bool, workers: int = 1) -> dict[str, Any]:
    out = work / f"out-{label}"
    state = work / f"state-{label}"
    for d in (out, state):
        subprocess.run(["rm", "-rf", str(d)], check=True)
    cfg = {
        "source": {"path": str(source)},
        "evaluators": EVALUATORS,
        "sink": {"path": str(out) + "/", **sink},
        "state_dir": str(state),
    }
    run_file = work / f"{label}.yaml"
    run_file.write_text(json.dumps(cfg))
    stats = work / f"{label}.time"
    cmd = ["/usr/bin/time", "-f", "%e %U %S %M", "-o", str(stats), sys.executable, "-m", "assay.cli", "run"]
    env = {**os.environ, "ASSAY_COLUMNAR": "1" if columnar else "0"}
    proc = subprocess.run(
        [*cmd, str(run_file), "-q", "--workers", str(workers)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    if proc.returncode not in (0, 3):
        print(f"{label}: exit {proc.returncode}\n{proc.stderr.decode(errors='replace')[-2000:]}", file=sys.stderr)
    wall, user, system, rss_kb = stats.read_text().split()[-4:]
    rows = json.loads((out / "_SUMMARY.json").read_text())["counts"]["read"]
    return {
        "label": label,
        "rows": rows,
        "wall_s": float(wall),
        "cpu_s": float(user) + float(system),
        "rss_mb": int(rss_kb) / 1024,
    }


def _score_alone(path: str, batch_rows: int = 65_536) -> tuple[int, float, float]:
    """(rows, seconds scoring, seconds building comments) over the file's tool columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from assay.connectors.parquet_traces import text_free_columns
    from assay.evaluators import ToolCallAccuracy, TrajectoryMatch
    from assay.evaluators.columnar import plan

    pf = pq.ParquetFile(path)
    table = pf.read(columns=text_free_columns(pf, call_ids=False, args=False))
    table = table.select([c for c in table.column_names if c in ("messages", "reference")])
    name = pa.dictionary(pa.int32(), pa.string())

    def encoded(t: pa.DataType) -> pa.DataType:  # tool names as dictionary<int32, string>
        if pa.types.is_list(t):
            return pa.list_(encoded(t.value_type))
        if pa.types.is_struct(t):
            return pa.struct(
                [
                    pa.field(
                        f.name,
                        name
                        if f.name == "name" and pa.types.is_string(f.type) and t.num_fields == 1
                        else encoded(f.type),
                    )
                    for f in t
                ]
            )
        return t

    table = table.cast(pa.schema([pa.field(f.name, encoded(f.type)) for f in table.schema]))
    batches = table.combine_chunks().to_batches(max_chunksize=batch_rows)
    evs = [
        TrajectoryMatch(mode="strict", tool_args_match_mode="ignore"),
        TrajectoryMatch(mode="unordered", tool_args_match_mode="ignore"),
        ToolCallAccuracy(args_match_mode="ignore"),
    ]
    p = plan(evs, batches[0].schema)
    assert p is not None
    best = best_c = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        scored = [p.score(b) for b in batches]
        t1 = time.perf_counter()
        for s in scored:
            for cols in s.results.values():
                _ = cols.comment
        t2 = time.perf_counter()
        best, best_c = min(best, t1 - t0), min(best_c, t2 - t1)
    return table.num_rows, best, best_c


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--mem-factors", default="10,100", help="multiples of N for the peak-RSS runs")
    ap.add_argument("--workers", type=int, default=1, help="--workers of every timed run")
    ap.add_argument(
        "--scale",
        type=int,
        default=0,
        help="also time JSON lines and Parquet by columns once each over this many hard links of the "
        "files (K·N rows: the fixed start-up cost amortised)",
    )
    args = ap.parse_args(argv)

    # an installed package is byte-compiled; with PYTHONDONTWRITEBYTECODE set (as on the CI machine)
    # a source checkout would otherwise compile ~140 modules in every timed run (~0.3-0.5 s CPU)
    import compileall

    compileall.compile_dir(str(HERE.parent / "assay"), quiet=1)
    lake = _lake()
    DATA.mkdir(parents=True, exist_ok=True)
    work = DATA / "columnar"
    work.mkdir(exist_ok=True)
    src_jsonl = lake.jsonl_corpus(args.n, args.seed)
    src_parquet = lake.parquet_corpus(src_jsonl)
    load_before = os.getloadavg()
    kinds = {
        "jsonl": (src_jsonl, {}, True),
        "parquet-columnar": (src_parquet, {"format": "parquet"}, True),
        "parquet-object": (src_parquet, {"format": "parquet"}, False),
    }
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    for _ in range(args.repeat):
        for label, (src, sink, columnar) in kinds.items():
            runs[label].append(run(label, src, sink, work, columnar, args.workers))
    best = {k: min(v, key=lambda r: r["wall_s"]) for k, v in runs.items()}

    import pyarrow.parquet as pq

    # (the run ids differ: each run file names its own output)
    tables = [pq.read_table(work / f"out-{k}").drop_columns(["run_id"]) for k in ("parquet-columnar", "parquet-object")]
    same_table = tables[0].equals(tables[1])
    means_j, means_c = lake.means(work / "out-jsonl"), lake.means(work / "out-parquet-columnar")

    rows, score_s, comment_s = _score_alone(str(src_parquet))
    with concurrent.futures.ProcessPoolExecutor(2) as pool:
        two = list(pool.map(_score_alone, [str(src_parquet)] * 2))
    two_rate = sum(r for r, _, _ in two) / max(s for _, s, _ in two)

    scaled: dict[str, dict[str, Any]] = {}
    if args.scale > 1:
        for label in ("jsonl", "parquet-columnar"):
            src, sink, columnar = kinds[label]
            d = lake.linked(src, args.scale, work)
            scaled[label] = run(f"{label}-x{args.scale}", d, sink, work, columnar, args.workers)

    memory: list[dict[str, Any]] = []
    if not args.skip_memory:
        for factor in (int(f) for f in args.mem_factors.split(",")):
            d = lake.linked(src_parquet, factor, work)
            memory.append(run(f"parquet-columnar-x{factor}", d, {"format": "parquet"}, work, True))
    load_after = os.getloadavg()

    j = best["jsonl"]
    print(f"N = {args.n:,} traces; {', '.join(EVALUATORS)}; --workers {args.workers}; best of {args.repeat}")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (2 cores)")
    print("| run | wall s | CPU s | traces/s | × JSON lines (wall) | × JSON lines (CPU) | peak RSS |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    cpu_j = min(r["cpu_s"] for r in runs["jsonl"])
    for label, r in best.items():
        rate, times = r["rows"] / r["wall_s"], j["wall_s"] / r["wall_s"]
        cpu = min(x["cpu_s"] for x in runs[label])
        print(
            f"| {label} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {rate:,.0f} | {times:.2f}× | {cpu_j / cpu:.2f}× "
            f"| {r['rss_mb']:.0f} MB |"
        )
    print(f"scoring alone, 1 process: {rows / score_s:,.0f} traces/s ({score_s:.3f} s for {rows:,})")
    print(f"comments built afterwards: {rows / comment_s:,.0f} rows/s")
    print(f"scoring alone, 2 processes at once: {two_rate:,.0f} traces/s")
    if scaled:
        sj, sc = scaled["jsonl"], scaled["parquet-columnar"]
        for label, r in scaled.items():
            print(
                f"{r['rows']:,} rows, {label}: wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s, "
                f"{r['rows'] / r['wall_s']:,.0f} traces/s, peak RSS {r['rss_mb']:.0f} MB"
            )
        print(
            f"{sc['rows']:,} rows: Parquet by columns {sj['wall_s'] / sc['wall_s']:.2f}× JSON lines (wall), "
            f"{sj['cpu_s'] / sc['cpu_s']:.2f}× (CPU)"
        )
    for m in memory:
        rate = m["rows"] / m["wall_s"]
        print(f"memory: {m['rows']:,} rows Parquet -> Parquet (columnar): peak RSS {m['rss_mb']:.0f} MB, ", end="")
        print(f"wall {m['wall_s']:.1f} s, {rate:,.0f} traces/s")
    for label, rs in runs.items():
        print(f"  {label} runs: wall {[r['wall_s'] for r in rs]} CPU {[round(r['cpu_s'], 2) for r in rs]}")
    print(f"Parquet outputs equal (columnar vs object path): {same_table}")
    print(f"JSON lines means == Parquet means: {means_j == means_c}")
    return 0 if same_table and means_j == means_c else 1


if __name__ == "__main__":
    raise SystemExit(main())
