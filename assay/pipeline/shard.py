"""``--workers N``: N processes score disjoint shards of the input, then their outputs are merged.

Each process runs the ordinary single-process pipeline on shard i/N (records whose running index is
i modulo N), writing part files into a scratch directory under the state dir. The parent then moves
the parts into a directory sink (part names carry the shard number, so they never collide), or
concatenates them into a file sink (gzip members and zstd frames concatenate into valid streams),
merges the shard summaries and writes one ``_SUMMARY.json``. Judge limits (rpm, tpm, concurrency)
and the budget are the run's: each of N processes gets 1/N of them.
"""

from __future__ import annotations

import datetime as dt
import gc
import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any, BinaryIO

import anyio

from assay.config import RunConfig
from assay.connectors.file import CHUNK, is_directory_target
from assay.exceptions import AssayError, ConnectorError
from assay.pipeline.run import Layout, RunReport, build_summary, execute, finish, merge_summaries


def _shard_config(config: RunConfig, scratch: Path, i: int, n: int) -> RunConfig:
    return share_limits(config, n).model_copy(
        update={
            "sink": config.sink.model_copy(update={"path": str(scratch / f"rows-{i}") + "/"}),
            "dead_letter": None,
            "gates": {},
        }
    )


def share_limits(config: RunConfig, n: int) -> RunConfig:
    """One of N shards' share of the run's judge limits and budget (``--workers`` and ``--shard``)."""
    if n <= 1:
        return config
    budget = config.limits.budget_usd
    return config.model_copy(
        update={
            "judges": {name: share_judge(cfg, n) for name, cfg in config.judges.items()},
            "limits": config.limits.model_copy(update={"budget_usd": None if budget is None else budget / n}),
        }
    )


def share_judge(cfg: dict[str, Any], n: int) -> dict[str, Any]:
    """One shard's share of a judge endpoint: the run's rpm, tpm and concurrency are limits of the
    endpoint, not of each process, so N processes get 1/N each."""
    out = dict(cfg)
    for key in ("rpm", "tpm"):
        if out.get(key) is not None:
            out[key] = float(out[key]) / n
    if out.get("max_concurrency") is not None:
        out["max_concurrency"] = max(1, int(out["max_concurrency"]) // n)
    return out


def _shard_main(config: RunConfig, origin: str, i: int, n: int, use_cache: bool) -> dict[str, Any]:
    report = anyio.run(lambda: execute(config, origin=origin, fresh=True, shard=(i, n), use_cache=use_cache))
    return report.summary


def _parts(directory: Path, prefix: str) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.startswith(prefix + "-") and p.is_file())


def _concat(parts: list[Path], target: Path) -> None:
    """Concatenate the shards' parts into ``target`` atomically. The first part becomes the output
    (a rename, no copy) when it can; the others are appended by the kernel (copy_file_range)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    rest = parts
    if parts:
        try:
            os.replace(parts[0], tmp)
            rest = parts[1:]
        except OSError:  # another file system: copy it too
            pass
    if rest is parts:
        open(tmp, "wb").close()
    with open(tmp, "r+b", buffering=0) as out:
        out.seek(0, os.SEEK_END)
        for p in rest:
            with open(p, "rb", buffering=0) as f:
                _append(f, out)
        os.fsync(out.fileno())
    os.replace(tmp, target)


def _append(src: BinaryIO, dst: BinaryIO) -> None:
    """Copy the rest of ``src`` to ``dst`` (unbuffered files): in the kernel where it can."""
    try:
        while os.copy_file_range(src.fileno(), dst.fileno(), CHUNK << 4):
            pass
        return
    except OSError:  # not supported here: copy through user space from where it stopped
        pass
    shutil.copyfileobj(src, dst, CHUNK)


def _place(parts: list[Path], target: str) -> None:
    if is_directory_target(target):
        Path(target).mkdir(parents=True, exist_ok=True)
        for p in parts:
            os.replace(p, Path(target) / p.name)
    else:
        _concat(parts, Path(target))


def execute_sharded(
    config: RunConfig, *, origin: str, workers: int, fresh: bool = True, use_cache: bool = True
) -> RunReport:
    """Run ``workers`` processes on disjoint shards and merge their outputs and summaries."""
    started_at = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    layout = Layout.from_config(config)
    scratch = Path(config.state_dir) / "shards" / f"{os.getpid()}-{int(time.time())}"
    scratch.mkdir(parents=True, exist_ok=True)
    run_id = config.run_id or os.urandom(6).hex()
    base = config.model_copy(update={"run_id": run_id})
    try:
        # fork where available: the children start with assay already imported (the parent runs no
        # threads and no event loop at this point, so forking is safe); spawn elsewhere.
        ctx = get_context("fork" if sys.platform == "linux" else "spawn")
        # everything alive now is shared with the children: frozen, their collector never walks
        # (and so never copies) the parent's pages; thawed again when they are done
        gc.freeze()
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = [
                pool.submit(_shard_main, _shard_config(base, scratch, i, workers), origin, i, workers, use_cache)
                for i in range(workers)
            ]
            summaries = []
            for f in futures:
                try:
                    summaries.append(f.result())
                except AssayError:
                    raise
                except Exception as exc:
                    raise ConnectorError(f"a worker process failed: {type(exc).__name__}: {exc}") from exc
        rows = [p for i in range(workers) for p in _parts(scratch / f"rows-{i}", "part")]
        dead = [p for i in range(workers) for p in _parts(scratch / f"rows-{i}" / "_dead_letter", "dead")]
        _place(rows, layout.sink_path)
        _place(dead, layout.dead_letter_path)
    finally:
        gc.unfreeze()
        shutil.rmtree(scratch, ignore_errors=True)
    stats = merge_summaries(summaries)
    for s in summaries:  # thresholds travel with the key stats
        for key, ks in s.get("evaluators", {}).items():
            stats.keys[key].threshold = ks.get("threshold", 0.5)
    statuses = {s.get("status", "ok") for s in summaries}
    status = "budget" if "budget" in statuses else "interrupted" if "interrupted" in statuses else "ok"
    judges: dict[str, Any] = {}
    for i, s in enumerate(summaries):
        for name, j in (s.get("judges") or {}).items():
            judges[f"{name}#{i}"] = j
    summary = build_summary(config, stats, status, time.perf_counter() - t0, run_id, started_at, layout, judges)
    summary["workers"] = workers
    summary["shards"] = [
        {"shard": i, "wall_time_s": s.get("wall_time_s"), "records": s.get("counts", {}).get("read")}
        for i, s in enumerate(summaries)
    ]
    return finish(config, summary, stats, status, layout, write=True)
