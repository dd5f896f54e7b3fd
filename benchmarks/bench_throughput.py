"""Throughput and memory benchmark: ``assay score`` with trajectory match vs orjson and openevals.

One run measures, on the same generated corpus of OpenAI-format agent traces (``gen_corpus.py``,
~7.8 KB per line, cached under ``benchmarks/data/``):

(a) a loop of ``orjson.loads`` per line over the file (the parse-only ceiling);
(b) ``assay score FILE -e trajectory_match:mode=strict -o OUT`` file to file, as a subprocess,
    with ``--workers`` auto, 1 and 2: wall time, traces/s and % of the orjson rate (target ≥ 50%);
(c) openevals' ``create_trajectory_match_evaluator`` called in a loop over the parsed records of a
    prefix of the corpus, in the reference python (``--ref-python``), and assay's rate as a
    multiple of it (target ≥ 20×); the scores of that prefix are compared with assay's output;
(d) peak RSS of ``assay score`` at N and 10·N traces (the 10·N file repeats the N file), summed
    over the process tree, and the ratio (target ≤ 1.2), with ``--workers`` 1 and auto.

    python benchmarks/bench_throughput.py                 # N = 100,000
    python benchmarks/bench_throughput.py --n 20000 --skip-memory
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
EVALUATOR = "trajectory_match:mode=strict"


def load_gen_corpus() -> Any:
    spec = importlib.util.spec_from_file_location("gen_corpus", HERE / "gen_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def corpus(n: int, seed: int, data_dir: Path) -> Path:
    """The cached corpus of ``n`` flat records (generated once; byte-identical for the same seed)."""
    path = data_dir / f"corpus-flat-s{seed}-{n}.jsonl"
    if not path.exists():
        gen = load_gen_corpus()
        tmp = path.with_suffix(".tmp")
        print(f"generating {n:,} traces into {path} ...", file=sys.stderr)
        with gen.open_out(str(tmp)) as out:
            gen.generate(n, out, seed=seed, shape="flat")
        tmp.rename(path)
    return path


def repeated(src: Path, times: int, data_dir: Path) -> Path:
    path = data_dir / f"{src.stem}-x{times}.jsonl"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as out:
            for _ in range(times):
                with open(src, "rb") as f:
                    shutil.copyfileobj(f, out, 1 << 24)
        tmp.rename(path)
    return path


# --------------------------------------------------------------------------------------------
# (a) orjson


def orjson_rate(path: Path, repeats: int = 2) -> tuple[int, float]:
    """Lines and best wall time of ``for line in file: orjson.loads(line)``."""
    best = float("inf")
    n = 0
    loads = orjson.loads
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = 0
        with open(path, "rb") as f:
            for line in f:
                loads(line)
                n += 1
        best = min(best, time.perf_counter() - t0)
    return n, best


# --------------------------------------------------------------------------------------------
# (b), (d) assay score as a subprocess, with the RSS of its process tree sampled


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(c) for c in f.read().split())
    except OSError:
        pass
    return out


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kb(root: int) -> int:
    total, stack, seen = 0, [root], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += _rss_kb(pid)
        stack.extend(_children(pid))
    return total


@dataclass
class Run:
    label: str
    traces: int
    wall: float
    peak_tree_kb: int
    max_proc_kb: int
    returncode: int
    stderr: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def run_assay(label: str, cmd: list[str], traces: int) -> Run:
    peak = 0
    done = threading.Event()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss_kb(proc.pid))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert proc.stderr is not None
    err = proc.stderr.read()  # drain so the child never blocks on a full pipe
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    # ru_maxrss of wait4 = the largest single process among the child and its reaped descendants
    return Run(label, traces, wall, peak, usage.ru_maxrss, proc.returncode, err.decode(errors="replace")[-2000:])


def assay_cmd(python: str, inp: Path, out: Path, workers: str | None) -> list[str]:
    cmd = [python, "-m", "assay.cli", "score", str(inp), "-e", EVALUATOR, "-o", str(out), "-q"]
    if workers is not None:
        cmd += ["--workers", workers]
    return cmd


def read_scores(out: Path) -> dict[str, float | None]:
    """trace id → trajectory_strict_match score from assay's output (a file or a directory of parts)."""
    files = sorted(out.glob("*.jsonl")) if out.is_dir() else [out]
    scores: dict[str, float | None] = {}
    for f in files:
        if f.name.endswith(".dead_letter.jsonl"):
            continue
        with open(f, "rb") as fh:
            for line in fh:
                row = orjson.loads(line)
                res = row.get("results", {}).get("trajectory_strict_match")
                scores[str(row.get("trace_id"))] = None if res is None else res.get("score")
    return scores


# --------------------------------------------------------------------------------------------
# (c) openevals in the reference python, and assay's library face on the same prefix

_REF_SNIPPET = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import orjson
from openevals import create_trajectory_match_evaluator
path, n = sys.argv[1], int(sys.argv[2])
recs = []
with open(path, "rb") as f:
    for line in f:
        recs.append(orjson.loads(line))
        if len(recs) >= n:
            break
ev = create_trajectory_match_evaluator(trajectory_match_mode="strict")
ev(outputs=recs[0]["messages"], reference_outputs=recs[0]["reference_outputs"])  # warm-up
scores = []
t0 = time.perf_counter()
for r in recs:
    scores.append(ev(outputs=r["messages"], reference_outputs=r["reference_outputs"])["score"])
wall = time.perf_counter() - t0
import openevals, importlib.metadata as md
print(json.dumps({"n": len(recs), "wall": wall, "version": md.version("openevals"),
                  "ids": [r["id"] for r in recs], "scores": scores}))
"""


def openevals_rate(ref_python: str, path: Path, n: int) -> dict[str, Any] | None:
    if not ref_python or not Path(ref_python).exists():
        return None
    probe = subprocess.run([ref_python, "-c", "import openevals"], capture_output=True)
    if probe.returncode != 0:
        return None
    proc = subprocess.run([ref_python, "-c", _REF_SNIPPET, str(path), str(n)], capture_output=True, check=True)
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def assay_library_rate(path: Path, n: int) -> tuple[int, float]:
    """``TrajectoryMatch.evaluate(outputs=..., reference_outputs=...)`` in a loop (the library face)."""
    from assay.evaluators import TrajectoryMatch

    recs = []
    with open(path, "rb") as f:
        for line in f:
            recs.append(orjson.loads(line))
            if len(recs) >= n:
                break
    ev = TrajectoryMatch(mode="strict")
    t0 = time.perf_counter()
    for r in recs:
        ev.evaluate(outputs=r["messages"], reference_outputs=r["reference_outputs"])
    return len(recs), time.perf_counter() - t0


# --------------------------------------------------------------------------------------------


def machine_info() -> str:
    cpu = platform.processor() or "unknown cpu"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        with open("/proc/meminfo") as f:
            mem_kb = int(f.readline().split()[1])
    except OSError:
        mem_kb = 0
    return (
        f"{cpu}; {os.cpu_count()} CPUs; {mem_kb / 1048576:.0f} GiB RAM; "
        f"Python {platform.python_version()}; orjson {orjson.__version__}; {platform.platform()}"
    )


def _mb(kb: int) -> str:
    return f"{kb / 1024:,.0f} MB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="traces in the corpus (default 100,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", type=Path, default=DATA)
    ap.add_argument("--python", default=sys.executable, help="python that runs assay (default: this one)")
    ap.add_argument("--ref-python", default="/tmp/refvenv/bin/python", help="python with openevals installed")
    ap.add_argument("--ref-n", type=int, default=5000, help="records timed with openevals (default 5,000)")
    ap.add_argument("--workers", default="auto,1,2", help="--workers values to time (comma separated)")
    ap.add_argument("--mem-factor", type=int, default=10, help="the memory run scores N and this many × N")
    ap.add_argument("--skip-memory", action="store_true", help="skip (d)")
    ap.add_argument("--mem-workers", default="1,auto", help="--workers values of the memory runs (comma separated)")
    ap.add_argument("--keep", action="store_true", help="keep the repeated corpus and outputs")
    ap.add_argument("--json", type=Path, help="also write the measurements as JSON")
    args = ap.parse_args(argv)

    args.data_dir.mkdir(parents=True, exist_ok=True)
    path = corpus(args.n, args.seed, args.data_dir)
    size = path.stat().st_size
    work = Path(tempfile.mkdtemp(prefix="assay-bench-", dir=args.data_dir))
    report: dict[str, Any] = {"machine": machine_info(), "n": args.n, "bytes": size}
    print(f"# corpus: {path} ({args.n:,} traces, {size / 1e6:,.0f} MB, {size / args.n / 1000:.1f} KB/trace)")
    print(f"# machine: {report['machine']}\n")

    # (a)
    lines, t_orjson = orjson_rate(path)
    orjson_rate_ = lines / t_orjson
    report["orjson"] = {"lines": lines, "wall": t_orjson}
    rows = [("(a) orjson.loads loop", lines, t_orjson, "", "100%", "", "")]

    # (b)
    runs: list[Run] = []
    for w in [x.strip() for x in args.workers.split(",") if x.strip()]:
        out = work / f"out-w{w}.jsonl"
        r = run_assay(f"(b) assay score --workers {w}", assay_cmd(args.python, path, out, w), args.n)
        r.extra["out"] = str(out)
        runs.append(r)
        if r.returncode != 0:
            print(f"!! {r.label} exited {r.returncode}:\n{r.stderr}", file=sys.stderr)
        rate = r.traces / r.wall
        rows.append(
            (
                r.label,
                r.traces,
                r.wall,
                "",
                f"{rate / orjson_rate_ * 100:.0f}%",
                _mb(r.peak_tree_kb),
                _mb(r.max_proc_kb),
            )
        )
    report["assay_score"] = [r.__dict__ for r in runs]
    ok_runs = [r for r in runs if r.returncode == 0]
    best = max(ok_runs, key=lambda r: r.traces / r.wall) if ok_runs else None

    # (c)
    ref = openevals_rate(args.ref_python, path, args.ref_n)
    lib_n, lib_wall = assay_library_rate(path, args.ref_n)
    rows.append((f"(c) assay TrajectoryMatch.evaluate loop (first {lib_n:,})", lib_n, lib_wall, "", "", "", ""))
    agreement = ""
    if ref is None:
        rows.append(("(c) openevals create_trajectory_match_evaluator loop", 0, 0.0, "not installed", "", "", ""))
    else:
        rows.append(
            (
                f"(c) openevals {ref['version']} evaluator loop (first {ref['n']:,})",
                ref["n"],
                ref["wall"],
                "",
                "",
                "",
                "",
            )
        )
        if best is not None:
            got = read_scores(Path(best.extra["out"]))
            same = sum(1 for i, s in zip(ref["ids"], ref["scores"], strict=True) if got.get(i) == (1.0 if s else 0.0))
            agreement = f"{same:,}/{len(ref['ids']):,} scores identical to openevals on that prefix"
        report["openevals"] = {k: v for k, v in ref.items() if k not in ("ids", "scores")}

    # (d)
    mem: dict[str, list[Run]] = {}
    if not args.skip_memory:
        big = repeated(path, args.mem_factor, args.data_dir)
        for w in args.mem_workers.split(","):
            for inp, n in ((path, args.n), (big, args.n * args.mem_factor)):
                out = work / f"mem-{w}-{n}.jsonl"
                label = f"(d) assay score --workers {w}, {n:,} traces"
                r = run_assay(label, assay_cmd(args.python, inp, out, w), n)
                mem.setdefault(w, []).append(r)
                rows.append(
                    (
                        r.label,
                        n,
                        r.wall,
                        "",
                        f"{n / r.wall / orjson_rate_ * 100:.0f}%",
                        _mb(r.peak_tree_kb),
                        _mb(r.max_proc_kb),
                    )
                )
                if not args.keep:
                    shutil.rmtree(out, ignore_errors=True) if out.is_dir() else out.unlink(missing_ok=True)
        if not args.keep:
            big.unlink(missing_ok=True)
        report["memory"] = {w: [r.__dict__ for r in runs_] for w, runs_ in mem.items()}

    # table
    print("| measurement | traces | wall s | traces/s | MB/s | % of orjson rate | peak RSS (tree) | max RSS (1 proc) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, n, wall, note, pct, tree, single in rows:
        if note:
            print(f"| {label} | | | {note} | | | | |")
            continue
        rate = n / wall if wall else 0.0
        mbps = (size * n / args.n) / wall / 1e6 if wall and label.startswith(("(a)", "(b)", "(d)")) else None
        print(
            f"| {label} | {n:,} | {wall:,.2f} | {rate:,.0f} | {'' if mbps is None else f'{mbps:,.0f}'} "
            f"| {pct} | {tree} | {single} |"
        )
    print()
    verdicts = []
    if best is not None:
        pct = best.traces / best.wall / orjson_rate_ * 100
        verdicts.append(
            f"assay score vs orjson: best {pct:.0f}% ({best.label}); target >= 50%: {'PASS' if pct >= 50 else 'FAIL'}"
        )
        if ref is not None:
            x = (best.traces / best.wall) / (ref["n"] / ref["wall"])
            verdicts.append(f"assay score vs openevals loop: {x:.1f}x; target >= 20x: {'PASS' if x >= 20 else 'FAIL'}")
            lib_x = (lib_n / lib_wall) / (ref["n"] / ref["wall"])
            verdicts.append(f"assay library evaluate() loop vs openevals loop: {lib_x:.1f}x")
    if agreement:
        verdicts.append(agreement)
    for w, pair in mem.items():
        if len(pair) == 2 and all(r.returncode == 0 for r in pair):
            ratio = pair[1].peak_tree_kb / max(1, pair[0].peak_tree_kb)
            ratio1 = pair[1].max_proc_kb / max(1, pair[0].max_proc_kb)
            verdicts.append(
                f"peak RSS {args.mem_factor}xN / N with --workers {w}: {ratio:.2f} (tree), {ratio1:.2f} "
                f"(largest process); target <= 1.2: {'PASS' if ratio <= 1.2 else 'FAIL'}"
            )
    for v in verdicts:
        print(f"- {v}")
    report["verdicts"] = verdicts
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    mem_runs = [r for pair in mem.values() for r in pair]
    return 0 if ok_runs and all(r.returncode == 0 for r in runs + mem_runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
