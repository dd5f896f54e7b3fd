"""``--workers N``: N processes score disjoint shards of the input, then their outputs are merged.

Each process runs the ordinary single-process pipeline on shard i/N (a byte range of a plain JSONL
file, else the records whose running index is i modulo N), writing part files into a scratch
directory under the state dir and publishing its counts into shared memory (the parent shows their
sum as progress). The parent then moves the parts into a directory sink (part names carry the shard
number, so they never collide), or concatenates them into a file sink (gzip members and zstd frames
concatenate into valid streams), merges the shard summaries and writes one ``_SUMMARY.json``.
Judge limits (rpm, tpm, concurrency) and the budget are the run's: each of N processes gets 1/N.

SIGTERM/SIGINT to the parent stop every worker gracefully, and so does the parent's death (Linux);
each checkpoints under the run's real sink (``<sink>#i/N``) and keeps its checkpoint until the
parent has merged its rows, so the same command with the same N resumes every shard: it merges any
rows a crashed parent left in scratch (``<state_dir>/shards/<sink key>-<N>/``) with the new ones and
appends to the output only if an earlier run of the lineage merged into it. At least once: a crash
between the output's rename and the scratch removal can repeat rows, never lose them.
"""

from __future__ import annotations

import datetime as dt
import gc
import hashlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from pathlib import Path
from types import FrameType
from typing import Any, BinaryIO

import anyio

from assay.config import RunConfig
from assay.connectors.file import CHUNK, is_directory_target
from assay.exceptions import AssayError, ConnectorError
from assay.pipeline.progress import Progress
from assay.pipeline.run import Layout, RunReport, build_summary, execute, finish, merge_summaries, shard_ledger
from assay.pipeline.summary import RunStats


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


_COUNTS = ("read", "scored", "dead_letters")


class _SharedCounts:
    """A worker's progress, published into its slots of a shared array the parent reads."""

    def __init__(self, counters: Any, i: int) -> None:
        self.counters = counters
        self.base = i * len(_COUNTS)

    def update(self, stats: RunStats) -> None:
        c = stats.counts
        for k, name in enumerate(_COUNTS):
            self.counters[self.base + k] = c[name]


@dataclass(frozen=True, slots=True)
class _Job:
    """What every worker of one sharded run shares."""

    origin: str
    n: int
    fresh: bool
    use_cache: bool
    ledger_key: str
    parent: int


def _shard_main(conn: Connection, config: RunConfig, i: int, job: _Job, counters: Any) -> None:
    """A worker process: one shard's run; its summary (or its error) goes back through ``conn``.
    SIGTERM/SIGINT (from the parent, which repeats them until the worker is gone, or on the parent's
    death) set a flag for the whole life of the process, and the run stops gracefully as a
    one-process run does; its checkpoint ledger is kept under the run's real sink, so the same
    command resumes every shard."""
    stop = [False]

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop[0] = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, request_stop)
    _stop_with_parent(job.parent)
    try:
        report = anyio.run(
            lambda: execute(
                config,
                origin=job.origin,
                fresh=job.fresh,
                shard=(i, job.n),
                use_cache=job.use_cache,
                progress=_SharedCounts(counters, i),
                stop_requested=lambda: stop[0],
                ledger_key=job.ledger_key,
                keep_ledger=True,
            )
        )
        message: tuple[str, Any] = ("ok", report.summary)
    except BaseException as exc:  # everything is reported to the parent
        err = exc if isinstance(exc, AssayError) else ConnectorError(f"{type(exc).__name__}: {exc}")
        message = ("error", err)
    with suppress(OSError):  # the parent may be gone: the ledger and the scratch rows remain
        try:
            conn.send(message)
        except Exception:  # an error that does not pickle
            conn.send(("error", ConnectorError(str(message[1]))))
    conn.close()


def _stop_with_parent(parent: int) -> None:
    """Linux: SIGTERM this worker when the parent dies (even by SIGKILL), so no worker is orphaned."""
    if sys.platform != "linux":
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


class _Signals:
    """SIGTERM/SIGINT to the parent of a sharded run, from its start to the end of the merge: the
    workers are told to stop gracefully (each drains, writes what it scored and reports
    ``interrupted``), again every half second until they are gone (a worker forked just before
    its handler was installed may have missed the first), instead of being left orphaned."""

    RESEND_S = 0.5

    def __init__(self) -> None:
        self.pids: list[int] = []
        self.stopping = False
        self._sent = 0.0

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True
        self.forward()

    def forward(self) -> None:
        self._sent = time.monotonic()
        for pid in self.pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def resend_due(self) -> bool:
        return self.stopping and time.monotonic() - self._sent >= self.RESEND_S

    @contextmanager
    def installed(self) -> Iterator[_Signals]:
        old = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield self
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)


def _run_workers(
    configs: list[RunConfig], job: _Job, progress: Progress | None, signals: _Signals
) -> list[dict[str, Any]]:
    """Start one process per shard config, show their summed progress, collect their summaries."""
    n = len(configs)
    # fork where available: the children start with assay already imported (the parent runs no
    # threads and no event loop at this point, so forking is safe); spawn elsewhere.
    ctx: Any = get_context("fork" if sys.platform == "linux" else "spawn")
    counters = ctx.Array("q", n * len(_COUNTS), lock=False)
    procs = []
    pending: dict[Connection, int] = {}
    # everything alive now is shared with the children: frozen, their collector never walks (and so
    # never copies) the parent's pages; thawed again when they are done
    gc.freeze()
    try:
        for i, cfg in enumerate(configs):
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_shard_main, args=(send, cfg, i, job, counters), name=f"assay-shard-{i}")
            proc.start()
            send.close()
            procs.append(proc)
            signals.pids.append(proc.pid)
            pending[recv] = i
        results: list[tuple[str, Any]] = [("error", None)] * n
        stats = RunStats()
        while pending:
            ready = wait(list(pending), timeout=0.1)
            for conn in [c for c in pending if c in ready]:
                i = pending.pop(conn)
                try:
                    results[i] = conn.recv()
                except EOFError:
                    procs[i].join()
                    results[i] = ("error", ConnectorError(f"worker {i} exited with code {procs[i].exitcode}"))
                if results[i][0] != "ok":  # one shard failed: stop the others
                    for p in procs:
                        if p.is_alive() and p.pid is not None:
                            os.kill(p.pid, signal.SIGTERM)
            if signals.resend_due():
                signals.forward()
            if progress is not None:
                for name, total in zip(_COUNTS, _sum_counts(counters, n), strict=True):
                    stats.counts[name] = total
                progress.update(stats)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()
        signals.pids.clear()
        gc.unfreeze()
    for kind, value in results:
        if kind != "ok":
            raise value if isinstance(value, AssayError) else ConnectorError(f"a worker process failed: {value}")
    return [value for _, value in results]


def _sum_counts(counters: Any, n: int) -> list[int]:
    k = len(_COUNTS)
    return [sum(counters[i * k + j] for i in range(n)) for j in range(k)]


def _parts(directory: Path, prefix: str) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.startswith(prefix + "-") and p.is_file())


def _concat(parts: list[Path], target: Path, *, append: bool = False) -> None:
    """Concatenate the shards' parts into ``target`` atomically (a temp file, then a rename), the
    copying done by the kernel (copy_file_range). ``append``: a resumed run adds to what ``target``
    already holds. The parts are left in place: until the output is whole they are the only copy."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    if append and target.exists():
        shutil.copyfile(target, tmp)
    else:
        open(tmp, "wb").close()
    with open(tmp, "r+b", buffering=0) as out:
        out.seek(0, os.SEEK_END)
        for p in parts:
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


def _place(parts: list[Path], target: str, *, append: bool = False) -> None:
    if is_directory_target(target):
        directory = Path(target)
        directory.mkdir(parents=True, exist_ok=True)
        for p in parts:
            dest = directory / p.name
            if append:  # a resumed run: the next free sequence number of that shard's parts
                stem, seq, ext = _split_part_name(p.name)
                while dest.exists():
                    seq += 1
                    dest = directory / f"{stem}-{seq:05d}{ext}"
            os.replace(p, dest)
    else:
        _concat(parts, Path(target), append=append)


def _split_part_name(name: str) -> tuple[str, int, str]:
    """``part-00001-00003.jsonl.gz`` → (``part-00001``, 3, ``.jsonl.gz``)."""
    base, _, rest = name.rpartition("-")
    digits, dot, ext = rest.partition(".")
    return base, int(digits), dot + ext


def execute_sharded(
    config: RunConfig,
    *,
    origin: str,
    workers: int,
    fresh: bool = True,
    use_cache: bool = True,
    progress: Progress | None = None,
) -> RunReport:
    """Run ``workers`` processes on disjoint shards and merge their outputs and summaries."""
    started_at = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    layout = Layout.from_config(config)
    run_id = config.run_id or os.urandom(6).hex()
    base = config.model_copy(update={"run_id": run_id})
    ledgers = [shard_ledger(config.state_dir, layout.sink_path, (i, workers)) for i in range(workers)]
    # one scratch directory per sink and N: rows a crashed parent never merged are found again
    key = hashlib.sha256(os.path.abspath(layout.sink_path).encode()).hexdigest()[:16]
    scratch = Path(config.state_dir) / "shards" / f"{key}-{workers}"
    for i, ledger in enumerate(ledgers):
        if fresh or not ledger.path.exists():  # rows not covered by a checkpoint are redone
            shutil.rmtree(scratch / f"rows-{i}", ignore_errors=True)
    # append to the output only if an earlier run of this lineage merged into it (a parent that
    # crashed before merging left its rows in scratch, and the output is not ours)
    append = not fresh and any(ledger.load() and ledger.extra.get("merged") for ledger in ledgers)
    scratch.mkdir(parents=True, exist_ok=True)
    job = _Job(origin, workers, fresh, use_cache, layout.sink_path, os.getpid())
    signals = _Signals()
    with signals.installed():  # until the merge is done: a signal then cannot cut it short
        configs = [_shard_config(base, scratch, i, workers) for i in range(workers)]
        summaries = _run_workers(configs, job, progress, signals)
        rows = [p for i in range(workers) for p in _parts(scratch / f"rows-{i}", "part")]
        dead = [p for i in range(workers) for p in _parts(scratch / f"rows-{i}" / "_dead_letter", "dead")]
        _place(rows, layout.sink_path, append=append)
        _place(dead, layout.dead_letter_path, append=append)
        # the rows are in the output: drop the scratch copy first, then the checkpoints of finished
        # shards (a crash in between leaves checkpoints with nothing to merge: the rerun is a no-op);
        # unfinished shards' checkpoints note that their rows are merged (the rerun appends)
        shutil.rmtree(scratch, ignore_errors=True)
        for ledger, summary in zip(ledgers, summaries, strict=True):
            if summary.get("status", "ok") == "ok":
                ledger.remove()
            elif ledger.load():
                ledger.extra["merged"] = True
                ledger.save()
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
