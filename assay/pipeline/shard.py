"""``--workers N``: N processes score disjoint shards of the input into one output.

Each process is one writer of the run (:mod:`assay.pipeline.writer`): it reads shard i/N (a byte
range of a plain JSONL file, an object index for S3, else the records whose running index is i
modulo N; a Kafka source joins one consumer group), writes its own parts
(``part-{i:05d}-{seq:05d}``; file sinks stage them and the publish concatenates) and commits its own
checkpoint; its counts go into shared memory (the parent shows their sum as progress). The parent
prepares the outputs before the workers start (start over, or resume with any earlier N: see
:mod:`assay.pipeline.outputs`) and publishes the summary of the whole output after they end.
Judge limits (rpm, tpm, concurrency) are the run's: each of N processes gets 1/N (unless the
judges share one limit through Redis). The budget is one for all: the workers reserve against it
in ``<state_dir>/budget.sqlite`` (:mod:`assay.judges.budget_store`), seeded with what earlier
attempts spent.

SIGTERM/SIGINT to the parent stop every worker gracefully, and so does the parent's death (Linux);
the same command, with any ``--workers``, resumes.
"""

from __future__ import annotations

import datetime as dt
import gc
import os
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
from typing import Any

import anyio

from assay.config import RunConfig, stable_run_id
from assay.exceptions import AssayError, ConnectorError
from assay.pipeline.assembly import sweep_leftovers
from assay.pipeline.batch_run import batch_phase, has_batch_judges
from assay.pipeline.checkpoint import CheckpointStore
from assay.pipeline.outputs import RunPlan
from assay.pipeline.progress import Gauges, Progress
from assay.pipeline.run import conclude
from assay.pipeline.summary import RunStats
from assay.pipeline.verdict import RunReport
from assay.pipeline.writer import WriterResult, run_writer


def share_limits(config: RunConfig, n: int, *, budget: bool = True) -> RunConfig:
    """One of N shards' share of the run's judge limits and budget (``--workers`` and ``--shard``;
    ``budget=False``: the budget stays whole, the processes share it in a store)."""
    if n <= 1:
        return config
    limit = config.limits.budget_usd
    share = limit / n if limit is not None and budget else limit
    return config.model_copy(
        update={
            "judges": {name: share_judge(cfg, n) for name, cfg in config.judges.items()},
            "limits": config.limits.model_copy(update={"budget_usd": share}),
        }
    )


def share_judge(cfg: dict[str, Any], n: int) -> dict[str, Any]:
    """One shard's share of a judge endpoint: the run's rpm, tpm and concurrency are limits of the
    endpoint, not of each process, so N processes get 1/N each (unless they share one budget
    through Redis: ``shared_limit``)."""
    out = dict(cfg)
    if out.get("shared_limit"):  # one budget in Redis for every process: nothing to divide
        return out
    for key in ("rpm", "tpm"):
        if out.get(key) is not None:
            out[key] = float(out[key]) / n
    out["limit_share"] = float(out.get("limit_share", 1.0)) / n  # of a limit the provider announces
    if out.get("max_concurrency") is not None:
        out["max_concurrency"] = max(1, int(out["max_concurrency"]) // n)
    return out


_COUNTS = ("read", "scored", "dead_letters")
_GAUGES = ("size_total", "size_done", "in_flight", "taken", "bytes")  # -1: not known
_SLOTS = len(_COUNTS) + len(_GAUGES)


ORPHAN_GRACE_S = 1.0
"""A worker whose parent died gives its in-flight records this long (they are redone on resume)."""
SIBLING_FAILED = signal.SIGUSR1
"""What the parent sends the other workers when one failed: they stop gracefully, saying why (a
SIGTERM would read as the user's signal)."""


class _SharedCounts:
    """A worker's progress, published into its slots of a shared array the parent reads."""

    def __init__(self, counters: Any, i: int) -> None:
        self.counters = counters
        self.base = i * _SLOTS
        for k in range(len(_COUNTS), _SLOTS):
            counters[self.base + k] = -1

    def update(self, stats: RunStats) -> None:
        c = stats.counts
        for k, name in enumerate(_COUNTS):
            self.counters[self.base + k] = c[name]

    def tick(self, gauges: Gauges) -> None:
        """The input's size and how much is read (the parent's ETA); the rest stays per process."""
        values = (gauges.size_total, gauges.size_done, gauges.in_flight, gauges.taken, gauges.size_unit == "bytes")
        for k, v in enumerate(values, len(_COUNTS)):
            self.counters[self.base + k] = -1 if v is None else int(v)


@dataclass(frozen=True, slots=True)
class _Job:
    """What every worker of one sharded run shares."""

    origin: str
    n: int
    use_cache: bool
    store_key: str
    parent: int
    states: dict[int, dict[str, Any]]
    budget_scope: str | None = None


def _shard_main(conn: Connection, config: RunConfig, i: int, job: _Job, counters: Any) -> None:
    """A worker process: writer i of the run; its result (or its error) goes back through ``conn``.
    SIGTERM/SIGINT (from the parent, which repeats SIGTERM until the worker is gone, from the
    terminal's Ctrl-C, or on the parent's death) set a flag for the whole life of the process, and
    the writer stops gracefully; a SIGINT once stopping (a second Ctrl-C, or the parent's second
    signal) abandons in-flight work at once."""
    stop: list[bool | float | str] = [False]
    abandon = [False]

    def request_stop(signum: int, frame: FrameType | None) -> None:
        if signum == SIBLING_FAILED:  # no signal of a user: the parent stops the others of a failed run
            stop[0] = stop[0] or "another worker failed"
            return
        if stop[0] and signum == signal.SIGINT:
            abandon[0] = True
        # orphaned (the parent died): stop now; its restart may already be running beside us
        stop[0] = ORPHAN_GRACE_S if os.getppid() != job.parent else (stop[0] or True)

    for sig in (signal.SIGTERM, signal.SIGINT, SIBLING_FAILED):
        signal.signal(sig, request_stop)
    _stop_with_parent(job.parent)
    try:
        result = anyio.run(
            lambda: run_writer(
                config,
                origin=job.origin,
                writer=i,
                n=job.n,
                state=job.states.get(i),
                store=CheckpointStore(config.state_dir, job.store_key),
                use_cache=job.use_cache,
                progress=_SharedCounts(counters, i),
                stop_requested=lambda: stop[0],
                abandon_requested=lambda: abandon[0],
                budget_scope=job.budget_scope,
            )
        )
        message: tuple[str, Any] = ("ok", result)
    except BaseException as exc:  # everything is reported to the parent
        err = exc if isinstance(exc, AssayError) else ConnectorError(f"{type(exc).__name__}: {exc}")
        message = ("error", err)
    with suppress(OSError):  # the parent may be gone: the checkpoint remains
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
    its handler was installed may have missed the first), instead of being left orphaned. A
    second signal is passed on as SIGINT: the workers abandon their in-flight work at once."""

    RESEND_S = 0.5

    def __init__(self) -> None:
        self.pids: list[int] = []
        self.stopping = False
        self._sent = 0.0

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.stopping:
            self.forward(signal.SIGINT)
            return
        self.stopping = True
        self.forward()

    def forward(self, sig: int = signal.SIGTERM) -> None:
        self._sent = time.monotonic()
        for pid in self.pids:
            with suppress(ProcessLookupError):
                os.kill(pid, sig)

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
) -> list[WriterResult]:
    """Start one process per shard config, show their summed progress, collect their summaries."""
    n = len(configs)
    # fork where available: the children start with assay already imported (the parent runs no
    # threads and no event loop at this point, so forking is safe); spawn elsewhere.
    ctx: Any = get_context("fork" if sys.platform == "linux" else "spawn")
    counters = ctx.Array("q", n * _SLOTS, lock=False)
    for i in range(n):  # the gauges are unknown until each worker publishes them
        counters[i * _SLOTS + len(_COUNTS) : (i + 1) * _SLOTS] = [-1] * len(_GAUGES)
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
        results: list[tuple[str, Any]] = [("error", ConnectorError("no answer"))] * n
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
                if results[i][0] != "ok" or results[i][1].status == "failed":  # one failed: stop the others
                    for p in procs:
                        if p.is_alive() and p.pid is not None:
                            os.kill(p.pid, SIBLING_FAILED)
            if signals.resend_due():
                signals.forward()
            if progress is not None:
                for name, total in zip(_COUNTS, _sum_counts(counters, n), strict=True):
                    stats.counts[name] = total
                progress.update(stats)
                tick = getattr(progress, "tick", None)
                if tick is not None:
                    tick(_sum_gauges(counters, n))
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()
        signals.pids.clear()
        gc.unfreeze()
    out: list[WriterResult] = []
    for kind, value in results:
        if kind != "ok":  # the worker died before its writer could report: its checkpoint remains
            err = value if isinstance(value, AssayError) else ConnectorError(f"a worker process failed: {value}")
            value = WriterResult("failed", {}, {}, 0.0, err)
        out.append(value)
    return out


def _sum_counts(counters: Any, n: int) -> list[int]:
    return [sum(counters[i * _SLOTS + j] for i in range(n)) for j in range(len(_COUNTS))]


def _sum_gauges(counters: Any, n: int) -> Gauges:
    """The workers' input sizes and progress added up (unknown until every worker knows)."""
    first = len(_COUNTS)
    cols = [[counters[i * _SLOTS + first + j] for i in range(n)] for j in range(len(_GAUGES))]
    total, done, in_flight, taken, in_bytes = (None if min(c) < 0 else sum(c) for c in cols)
    return Gauges(
        size_total=total,
        size_done=done if total is not None else None,
        size_unit="bytes" if in_bytes else "records",
        in_flight=in_flight or 0,
        taken=taken or 0,
    )


def _budget_scope(config: RunConfig, plan: RunPlan, states: dict[int, dict[str, Any]]) -> str | None:
    """This attempt's shared budget (None without ``budget_usd``), seeded with what earlier attempts
    spent; an attempt that stopped at the budget stops every writer (each closes under that cap)."""
    if config.limits.budget_usd is None or not config.judges:
        return None
    from assay.judges.budget_store import DEFAULT_FILENAME, open_budget_store

    judges = [st.get("judges") or {} for st in [*states.values(), plan.store.carried()]]
    spent = sum(float(j.get("cost_usd", 0.0) or 0.0) for js in judges for j in js.values())
    stops = [st["budget_stopped_at"] for st in states.values() if st.get("budget_stopped_at") is not None]
    for st in states.values() if stops else ():
        st["budget_stopped_at"] = max(stops)
    scope = f"{plan.store.key}:{os.getpid()}:{time.time_ns()}"
    open_budget_store(config.rate_store or Path(config.state_dir) / DEFAULT_FILENAME, scope).seed(spent)
    return scope


def execute_sharded(
    config: RunConfig,
    *,
    origin: str,
    workers: int,
    fresh: bool = False,
    use_cache: bool = True,
    progress: Progress | None = None,
    wait: bool = False,
) -> RunReport:
    """Run ``workers`` processes as the writers of one run and publish its whole output (batch
    judges: their batches are submitted and collected first, in this process)."""
    started_at = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    config = config.model_copy(update={"run_id": config.run_id or stable_run_id(config)})

    if has_batch_judges(config):
        phase = anyio.run(
            lambda: batch_phase(config, origin=origin, use_cache=use_cache, wait=wait, handle_signals=True, fresh=fresh)
        )
        if phase.report is not None:
            return phase.report
        assert phase.config is not None
        config = phase.config
    plan = RunPlan(config, None)
    sweep_leftovers(config)
    states = anyio.run(lambda: plan.prepare(workers, fresh=fresh))
    job = _Job(origin, workers, use_cache, plan.store.key, os.getpid(), states, _budget_scope(config, plan, states))
    signals = _Signals()
    with signals.installed():  # until the summary is published: a signal then cannot cut it short
        results = _run_workers([share_limits(config, workers, budget=False)] * workers, job, progress, signals)
        return anyio.run(
            lambda: conclude(
                plan,
                results,
                started_at=started_at,
                wall_s=time.perf_counter() - t0,
                workers=workers,
                shards=[{"shard": i, "wall_time_s": round(r.wall_s, 3)} for i, r in enumerate(results)],
            )
        )
