"""Parquet in and out against JSON lines in and out, on the same traces: ``assay run`` with trajectory
match, wall time, CPU time and peak RSS, at N and at 10·N rows.

The corpus is ``gen_corpus.py``'s (flat OpenAI records, ~7.8 KB a line, cached under
``benchmarks/data/``); its Parquet twin holds the same records as a plain nested table (``id``,
``messages`` and ``reference`` as ``list<struct<role, content, tool_calls: list<struct<id, type,
function: struct<name, arguments>>>, tool_call_id, name>>``, ``metadata``), zstd, row groups of
10,000 rows. The 10·N inputs are 10 hard links of the N files (no extra disk). Each run is a fresh
``python -m assay.cli run`` process into a directory sink (``part-*.jsonl`` or ``part-*.parquet``);
CPU time and peak RSS come from ``os.wait4``. The scores of both outputs are compared (means per key).

    python benchmarks/bench_lake.py                         # N = 100,000 (memory at 10^5 and 10^6)
    python benchmarks/bench_lake.py --n 20000 --skip-memory --repeat 3
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
EVALUATOR = "trajectory_match:mode=strict"


def _gen() -> Any:
    spec = importlib.util.spec_from_file_location("gen_corpus", HERE / "gen_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def jsonl_corpus(n: int, seed: int) -> Path:
    path = DATA / f"corpus-flat-s{seed}-{n}.jsonl"
    if not path.exists():
        gen = _gen()
        tmp = path.with_suffix(".tmp")
        print(f"generating {n:,} traces into {path} ...", file=sys.stderr)
        with gen.open_out(str(tmp)) as out:
            gen.generate(n, out, seed=seed, shape="flat")
        tmp.rename(path)
    return path


def _message_schema() -> Any:
    import pyarrow as pa

    fn = pa.struct([("name", pa.string()), ("arguments", pa.string())])
    call = pa.struct([("id", pa.string()), ("type", pa.string()), ("function", fn)])
    return pa.list_(
        pa.struct(
            [
                ("role", pa.string()),
                ("content", pa.string()),
                ("tool_calls", pa.list_(call)),
                ("tool_call_id", pa.string()),
                ("name", pa.string()),
            ]
        )
    )


def _as_table_messages(msgs: Any) -> list[dict[str, Any]]:
    """Messages with JSON-text arguments and text content (what a Parquet table of them holds)."""
    import orjson

    out = []
    for m in msgs or []:
        m = dict(m)
        if m.get("content") is not None and not isinstance(m["content"], str):
            m["content"] = orjson.dumps(m["content"]).decode()
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                args = c["function"].get("arguments")
                text = args if isinstance(args, str) else orjson.dumps(args).decode()
                calls.append({**c, "function": {"name": c["function"]["name"], "arguments": text}})
            m["tool_calls"] = calls
        out.append(m)
    return out


def parquet_corpus(src: Path, row_group: int = 10_000) -> Path:
    """The Parquet twin of a JSON-lines corpus (cached beside it)."""
    import orjson
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = src.with_suffix(".parquet")
    if path.exists():
        return path
    print(f"converting {src.name} to Parquet ...", file=sys.stderr)
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("messages", _message_schema()),
            ("reference", _message_schema()),
            ("metadata", pa.struct([("variant", pa.string())])),
        ]
    )
    tmp = path.with_suffix(".tmp")
    rows: list[dict[str, Any]] = []
    with pq.ParquetWriter(tmp, schema, compression="zstd") as writer, open(src, "rb") as f:
        for line in f:
            r = orjson.loads(line)
            ref = r.get("reference_outputs")
            ref = ref.get("messages", []) if isinstance(ref, dict) else ref
            rows.append(
                {
                    "id": r["id"],
                    "messages": _as_table_messages(r["messages"]),
                    "reference": _as_table_messages(ref),
                    "metadata": {"variant": (r.get("metadata") or {}).get("variant")},
                }
            )
            if len(rows) == row_group:
                writer.write_table(pa.Table.from_pylist(rows, schema), row_group_size=row_group)
                rows = []
        if rows:
            writer.write_table(pa.Table.from_pylist(rows, schema), row_group_size=row_group)
    tmp.rename(path)
    return path


def linked(src: Path, times: int, work: Path) -> Path:
    """A directory of ``times`` hard links to ``src`` (10·N rows without 10× the disk)."""
    d = work / f"x{times}-{src.suffix.lstrip('.')}"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    for i in range(times):
        os.link(src, d / f"part-{i:03d}{src.suffix}")
    return d


@dataclass
class Run:
    label: str
    rows: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    exit_code: int


def run_assay(label: str, source: Path, sink: dict[str, Any], rows: int, work: Path, workers: int) -> Run:
    out = work / f"out-{label}"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(work / ".assay", ignore_errors=True)
    cfg = {
        "source": {"path": str(source)},
        "evaluators": [EVALUATOR],
        "sink": {"path": str(out) + "/", **sink},
        "state_dir": str(work / ".assay"),
    }
    run_file = work / f"{label}.yaml"
    run_file.write_text(json.dumps(cfg))
    cmd = [sys.executable, "-m", "assay.cli", "run", str(run_file), "-q", "--workers", str(workers)]
    stats = work / f"{label}.time"
    # GNU time measures the run's own peak RSS and CPU (wait4 in this process would count the RSS
    # this process had when it forked); the largest process of a --workers tree for RSS
    timed = ["/usr/bin/time", "-f", "%e %U %S %M", "-o", str(stats), *cmd]
    proc = subprocess.run(timed, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    if proc.returncode not in (0, 3):
        print(f"{label}: exit {proc.returncode}\n{proc.stderr.decode(errors='replace')[-2000:]}", file=sys.stderr)
    wall, user, system, rss_kb = stats.read_text().split()[-4:]
    return Run(label, rows, float(wall), float(user) + float(system), int(rss_kb) / 1024, proc.returncode)


def means(out: Path) -> dict[str, float]:
    """Mean score per result key of an output directory (JSON lines or Parquet parts)."""
    from assay.report import iter_rows, read_run_info

    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for row in iter_rows(read_run_info(str(out)).store):
        for key, res in row["results"].items():
            if res.get("score") is not None:
                sums[key] = sums.get(key, 0.0) + res["score"]
                counts[key] = counts.get(key, 0) + 1
    return {k: round(sums[k] / counts[k], 6) for k in sums}


def best(runs: list[Run]) -> Run:
    """The fastest wall time, the least CPU time and the lowest peak RSS of repeated runs (each the
    best of its own column: on a shared machine they need not come from the same run)."""
    return Run(
        runs[0].label,
        runs[0].rows,
        min(r.wall_s for r in runs),
        min(r.cpu_s for r in runs),
        min(r.peak_rss_mb for r in runs),
        max(r.exit_code for r in runs),
    )


def ratio_line(label: str, p: Run, j: Run) -> str:
    wall, cpu = p.wall_s / j.wall_s, p.cpu_s / j.cpu_s
    return f"{label}: Parquet / JSON lines wall {wall:.2f}x, CPU {cpu:.2f}x (target <= 1.15x)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per format at N (best wall, best CPU kept)")
    ap.add_argument("--mem-repeat", type=int, default=2, help="runs per format at mem-factor x N")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--mem-factor", type=int, default=10)
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--json", type=Path, help="write the results as JSON here too")
    args = ap.parse_args(argv)

    DATA.mkdir(parents=True, exist_ok=True)
    work = DATA / "lake"
    work.mkdir(exist_ok=True)
    src_jsonl = jsonl_corpus(args.n, args.seed)
    src_parquet = parquet_corpus(src_jsonl)
    formats = {
        "jsonl": (src_jsonl, {}),
        "parquet": (src_parquet, {"format": "parquet"}),
    }
    runs: dict[str, list[Run]] = {fmt: [] for fmt in formats}
    for _ in range(args.repeat):  # alternating, so that a burst of outside load hits both formats
        for fmt, (src, sink) in formats.items():
            runs[fmt].append(run_assay(fmt, src, sink, args.n, work, args.workers))
    timed = {fmt: best(rs) for fmt, rs in runs.items()}
    agree = means(work / "out-jsonl") == means(work / "out-parquet")
    memory: dict[str, Run] = {}
    small: dict[str, Run] = {}
    if not args.skip_memory:
        big = args.n * args.mem_factor
        dirs = {fmt: linked(src, args.mem_factor, work) for fmt, (src, _) in formats.items()}
        big_runs: dict[str, list[Run]] = {fmt: [] for fmt in formats}
        for _ in range(args.mem_repeat):
            for fmt, (_, sink) in formats.items():
                big_runs[fmt].append(run_assay(f"{fmt}-x{args.mem_factor}", dirs[fmt], sink, big, work, 1))
        memory = {fmt: best(rs) for fmt, rs in big_runs.items()}
        small = {
            fmt: timed[fmt] if args.workers == 1 else run_assay(f"{fmt}-mem", src, sink, args.n, work, 1)
            for fmt, (src, sink) in formats.items()
        }

    j, p = timed["jsonl"], timed["parquet"]
    print(f"N = {args.n:,} traces, trajectory_match:mode=strict, --workers {args.workers}, best of {args.repeat}")
    print(f"{'':28} {'wall s':>8} {'CPU s':>8} {'traces/s':>10} {'peak RSS':>10}")
    for label, r in (("JSON lines -> JSON lines", j), ("Parquet -> Parquet", p)):
        print(f"{label:28} {r.wall_s:8.2f} {r.cpu_s:8.2f} {r.rows / r.wall_s:10,.0f} {r.peak_rss_mb:8.0f} MB")
    print(ratio_line(f"{args.n:,} rows", p, j))
    for fmt, rs in runs.items():
        print(f"  {fmt} runs: wall {[r.wall_s for r in rs]} CPU {[round(r.cpu_s, 2) for r in rs]}")
    print(f"same mean scores: {agree}")
    if memory:
        big = args.n * args.mem_factor
        jb, pb = memory["jsonl"], memory["parquet"]
        print(f"{big:,} rows (--workers 1, best of {args.mem_repeat}):")
        for label, r in (("JSON lines -> JSON lines", jb), ("Parquet -> Parquet", pb)):
            print(f"{label:28} {r.wall_s:8.2f} {r.cpu_s:8.2f} {r.rows / r.wall_s:10,.0f} {r.peak_rss_mb:8.0f} MB")
        print(ratio_line(f"{big:,} rows", pb, jb))
        for fmt, rs in big_runs.items():
            print(f"  {fmt} runs: wall {[r.wall_s for r in rs]} CPU {[round(r.cpu_s, 2) for r in rs]}")
        print(f"peak RSS at {args.n:,} and {big:,} rows (--workers 1):")
        for fmt in formats:
            s_, b_ = small[fmt].peak_rss_mb, memory[fmt].peak_rss_mb
            print(f"  {fmt:8} {s_:6.0f} MB -> {b_:6.0f} MB ({b_ / s_:.2f}x)")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "timed": {k: asdict(v) for k, v in timed.items()},
                    "memory": {k: asdict(v) for k, v in memory.items()},
                    "runs": {k: [asdict(r) for r in v] for k, v in runs.items()},
                    "same_means": agree,
                },
                indent=2,
            )
        )
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
