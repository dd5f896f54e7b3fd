"""Spark ``local[2]`` over a Parquet table against ``assay run --workers 2`` on the same table.

The table is ``bench_lake.py``'s Parquet twin of ``gen_corpus.py``'s corpus (N rows, ``id``,
``messages`` and ``reference`` as OpenAI ``list<struct>`` columns, ``metadata``), linked ``--times``
times into one directory (10 × 100,000 = 10⁶ rows by default). The evaluators are the name-level
trajectory checks: ``trajectory_match`` strict and unordered with ``tool_args_match_mode: ignore``,
and ``tool_call_accuracy`` with ``args_match_mode: ignore``.

Each measurement is a fresh process, timed by GNU time (wall time; CPU time for ``assay run`` only:
the JVM Spark starts is not a child GNU time waits for):

* ``assay run --workers 2``, the directory → a Parquet directory sink;
* ``spark score``: :func:`assay.integrations.spark.score` over ``spark.read.parquet(dir)`` written
  with ``.write.parquet`` (the scores as a DataFrame; by columns on the executors);
* ``spark score, comments=False``: the same without the comments (neither built nor shipped);
* ``spark score, object path``: the same with ``ASSAY_COLUMNAR=0`` (every row as a trace object);
* ``spark run``: :func:`assay.integrations.spark.run` (the run file's Parquet sink written by the
  driver through the engine's sink stage, summary and gates).

For the Spark rows the child also reports the session's start (JVM, ~5–10 s here) and the job
alone; the ratio is the job's wall time (and the whole process's) over ``assay run``'s. The mean
score of every key is compared between the outputs (they must be equal).

    PYTHONPATH=. python benchmarks/bench_spark.py                  # 10^6 rows, best of 3
    PYTHONPATH=. python benchmarks/bench_spark.py --n 20000 --times 2 --repeat 1
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
EVALUATORS: list[dict[str, Any]] = [
    {"name": "trajectory_match", "params": {"mode": "strict", "tool_args_match_mode": "ignore"}},
    {"name": "trajectory_match", "params": {"mode": "unordered", "tool_args_match_mode": "ignore"}},
    {"name": "tool_call_accuracy", "params": {"args_match_mode": "ignore"}},
]


def _lake() -> Any:
    spec = importlib.util.spec_from_file_location("bench_lake", HERE / "bench_lake.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_lake"] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def run_file(work: Path, table: Path, out: Path) -> Path:
    cfg = {
        "source": {"path": str(table) + "/"},
        "evaluators": EVALUATORS,
        "sink": {"path": str(out) + "/", "format": "parquet"},
        "state_dir": str(work / ".assay"),
        "limits": {"max_dead_letter_ratio": 1.0},
    }
    path = work / f"{out.name}.yaml"
    path.write_text(json.dumps(cfg))
    return path


@dataclass
class Measured:
    label: str
    wall_s: float
    cpu_s: float
    job_s: float | None = None
    start_s: float | None = None


def timed(label: str, cmd: list[str], work: Path, env: dict[str, str] | None = None) -> Measured:
    stats = work / "time.txt"
    report = work / "child.json"
    report.unlink(missing_ok=True)
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%e %U %S", "-o", str(stats), *cmd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{label}: exit {proc.returncode}\n{proc.stderr.decode(errors='replace')[-3000:]}")
    wall, user, system = stats.read_text().split()[-3:]
    m = Measured(label, float(wall), float(user) + float(system))
    if report.exists():
        child = json.loads(report.read_text())
        m.job_s, m.start_s = child["job_s"], child["start_s"]
    return m


# --- the Spark child process ---------------------------------------------------------------------


def child(mode: str, table: Path, out: Path, run_path: Path, report: Path) -> int:
    t0 = time.perf_counter()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    started = time.perf_counter() - t0
    from assay.integrations.spark import run, score

    t1 = time.perf_counter()
    df = spark.read.parquet(str(table))
    if mode in ("score", "score-bare"):
        score(df, run_path, comments=mode == "score").write.mode("overwrite").parquet(str(out))
        code = 0
    else:
        code = run(df, run_path).exit_code
    job = time.perf_counter() - t1
    spark.stop()
    report.write_text(json.dumps({"job_s": job, "start_s": started}))
    return 0 if code in (0, 3) else code


# --- the parent ----------------------------------------------------------------------------------


def key_means(out: Path, spark_columns: bool) -> dict[str, float]:
    import pyarrow as pa
    import pyarrow.dataset as pads

    table = pads.dataset(str(out), format="parquet").to_table()
    keys = [f.name for f in table.schema if pa.types.is_struct(f.type) and f.type.get_field_index("score") >= 0]
    means: dict[str, float] = {}
    for key in keys:
        scores = [s for s in table.column(key).combine_chunks().field("score").to_pylist() if s is not None]
        means[key] = round(sum(scores) / len(scores), 6)
    return means


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="rows of the corpus file")
    ap.add_argument("--times", type=int, default=10, help="links of it in the table (rows = n × times)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", type=Path, default=HERE / "data" / "spark-work")
    ap.add_argument("--skip-object", action="store_true", help="skip the object-path Spark run")
    ap.add_argument("--skip-bare", action="store_true", help="skip the score run without comments")
    ap.add_argument("--child", choices=("score", "score-bare", "run"), help=argparse.SUPPRESS)
    ap.add_argument("--table", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--run-file", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--report", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child, args.table, args.out, args.run_file, args.report)

    lake = _lake()
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    src = lake.parquet_corpus(lake.jsonl_corpus(args.n, args.seed))
    table = lake.linked(src, args.times, work)
    rows = args.n * args.times
    me = [sys.executable, str(Path(__file__).resolve())]

    variants: list[tuple[str, list[str], dict[str, str], Path]] = []
    out = work / "out-assay-run"
    rf = run_file(work, table, out)
    cli = [sys.executable, "-m", "assay.cli", "run", str(rf), "-q", "--workers", "2"]
    variants.append(("assay run --workers 2", cli, {}, out))
    for label, mode, env in (
        ("spark score (columns)", "score", {}),
        ("spark score (columns, comments=False)", "score-bare", {}),
        ("spark score (object path)", "score", {"ASSAY_COLUMNAR": "0"}),
        ("spark run (driver writes)", "run", {}),
    ):
        if (args.skip_object and "object" in label) or (args.skip_bare and mode == "score-bare"):
            continue
        out = work / f"out-spark-{mode}-{'obj' if env else 'col'}"
        rf = run_file(work, table, out)
        cmd = [*me, "--child", mode, "--table", str(table), "--out", str(out), "--run-file", str(rf)]
        cmd += ["--report", str(work / "child.json")]
        variants.append((label, cmd, env, out))

    best: dict[str, Measured] = {}
    for r in range(args.repeat):
        for label, cmd, env, out in variants:
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(work / ".assay", ignore_errors=True)
            m = timed(label, cmd, work, env)
            print(
                f"run {r + 1}: {label}: wall {m.wall_s:.1f} s, CPU {m.cpu_s:.1f} s"
                + (f", job {m.job_s:.1f} s, session start {m.start_s:.1f} s" if m.job_s is not None else ""),
                file=sys.stderr,
                flush=True,
            )
            b = best.get(label)
            if b is None:
                best[label] = m
            else:
                b.wall_s, b.cpu_s = min(b.wall_s, m.wall_s), min(b.cpu_s, m.cpu_s)
                if m.job_s is not None and b.job_s is not None:
                    b.job_s, b.start_s = min(b.job_s, m.job_s), min(b.start_s or m.start_s or 0, m.start_s or 0)

    reference = None
    for label, _, _, out in variants:
        got = key_means(out, label.startswith("spark score"))
        if reference is None:
            reference = got
        elif got != reference:
            print(f"MEANS DIFFER: {label}: {got} vs {reference}", file=sys.stderr)
            return 1
    base = best["assay run --workers 2"]
    print(f"\n{rows:,} rows, best of {args.repeat}; mean scores equal in every output: {reference}\n")
    print("| run | wall s | CPU s | job s (no JVM start) | job / assay run | wall / assay run | traces/s (job) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, _, _, _ in variants:
        m = best[label]
        job = m.job_s if m.job_s is not None else m.wall_s
        cpu = "—" if m.job_s is not None else f"{m.cpu_s:.1f}"  # (GNU time does not see the JVM's CPU)
        print(
            f"| {label} | {m.wall_s:.1f} | {cpu} | {job:.1f} | {job / base.wall_s:.2f}× | "
            f"{m.wall_s / base.wall_s:.2f}× | {rows / job:,.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
