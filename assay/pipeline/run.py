"""Run orchestration: config → evaluators, connectors, judges → pipeline(s) → summary and exit code.

Exit codes: 0 ok; 1 infrastructure failure; 2 bad config or usage; 3 a quality gate failed;
4 dead letters above the allowed threshold; 5 budget exhausted (resumable); 130 interrupted.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from assay.config import RunConfig
from assay.connectors.file import expand_paths
from assay.evaluators.base import BaseEvaluator
from assay.exceptions import AssayError, ConfigError
from assay.pipeline.gates import evaluate_gates
from assay.pipeline.outputs import RunPlan, build_summary
from assay.pipeline.progress import ProgressSink
from assay.pipeline.runner import Pipeline, RunOptions
from assay.pipeline.summary import RunStats
from assay.pipeline.writer import WriterResult, run_writer
from assay.registry import build_evaluator

EXIT_OK = 0
EXIT_INFRA = 1
EXIT_CONFIG = 2
EXIT_GATE = 3
EXIT_DEAD_LETTERS = 4
EXIT_BUDGET = 5
EXIT_INTERRUPTED = 130


def build_evaluators(config: RunConfig, origin: str = "run file") -> list[BaseEvaluator[Any]]:
    """Build every evaluator of the run file; errors name the evaluator's index and name."""
    evaluators: list[BaseEvaluator[Any]] = []
    seen: dict[str, int] = {}
    for i, spec in enumerate(config.evaluators):
        try:
            ev = build_evaluator(spec.name, spec.params)
        except ConfigError as exc:
            raise ConfigError(f"{origin}: evaluators[{i}] ({spec.name}): {exc}") from exc
        if ev.key in seen:
            raise ConfigError(
                f"{origin}: evaluators[{i}] ({spec.name}) writes result key {ev.key!r} like evaluators[{seen[ev.key]}];"
                " give one of them params.key"
            )
        seen[ev.key] = i
        evaluators.append(ev)
    return evaluators


@dataclass
class RunReport:
    exit_code: int
    summary: dict[str, Any]
    status: str
    messages: list[str] = field(default_factory=list)
    error: AssayError | None = None


@contextlib.asynccontextmanager
async def _judge_pool(config: RunConfig, *, use_cache: bool) -> AsyncIterator[Any]:
    """Open the run's judge pool when the run file declares judges (judges are optional)."""
    if not config.judges:
        yield None
        return
    from assay.judges.pool import JudgePool, use_pool

    pool = JudgePool.from_config(
        config.judges,
        state_dir=Path(config.state_dir),
        use_cache=use_cache,
        budget_usd=config.limits.budget_usd,
    )
    async with pool:
        with use_pool(pool):
            yield pool


async def _watch_signals(pipeline: Pipeline, grace_s: float, cancel: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            await _stop(pipeline, grace_s, cancel)
            return


async def _watch_flag(
    requested: Callable[[], bool | float], pipeline: Pipeline, grace_s: float, cancel: anyio.CancelScope
) -> None:
    """The same as ``_watch_signals`` for a process whose own signal handler sets a flag (a shard
    worker: its handler stays installed for the life of the process, so a repeated signal never
    meets the default action). A float from ``requested`` is a shorter grace period (a worker whose
    parent died stops at once instead of running beside a restarted run)."""
    # polled: the flag is set by a signal handler, which must not touch the event loop
    while not (flag := requested()):  # noqa: ASYNC110
        await anyio.sleep(0.1)
    grace = min(grace_s, flag) if isinstance(flag, float) else grace_s
    await _stop(pipeline, grace, cancel)


async def _stop(pipeline: Pipeline, grace_s: float, cancel: anyio.CancelScope) -> None:
    """Stop reading; in-flight work has ``grace_s`` to drain before it is cancelled."""
    pipeline.stop("interrupted")
    pipeline.stop_deadline = time.monotonic() + grace_s  # the progress display counts it down
    print(
        f"assay: stopping: reading no more; finishing {pipeline.in_flight:,} in-flight records"
        f" (grace period {grace_s:g} s, then they are abandoned and redone on resume)",
        file=sys.stderr,
        flush=True,
    )
    with anyio.move_on_after(grace_s):
        await anyio.sleep_forever()
    cancel.cancel()


def sweep_leftovers(config: RunConfig) -> None:
    """What killed runs left behind that no checkpoint needs: code checks' temporary directories."""
    if any(spec.name in ("pyright", "mypy", "code_judge", "code_execution") for spec in config.evaluators):
        from assay.evaluators.code import sweep_stale_dirs

        sweep_stale_dirs()


def tune_gc() -> None:
    """Fewer young-generation collections: the hot path allocates many short-lived containers per
    record, and the default threshold (700) makes the collector run every couple of records.
    Memory stays bounded (the streams are bounded); long-lived startup objects are frozen."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 50)


def auto_workers(config: RunConfig) -> int:
    """Processes for ``--workers auto``: one per core (at most 4) for large file inputs scored by
    deterministic evaluators only; 1 otherwise (judge rate limits are per run, and small inputs
    don't pay back the process start-up)."""
    if config.judges or config.source.type != "file" or any(p == "-" for p in config.source.paths):
        return 1
    try:
        files = expand_paths(config.source.paths)
        size = sum(os.path.getsize(f) for f in files)
    except (AssayError, OSError):
        return 1
    if size < AUTO_WORKERS_MIN_BYTES:
        return 1
    try:
        if any(build_evaluator(spec.name, spec.params).is_async for spec in config.evaluators):
            return 1
    except AssayError:
        return 1
    return max(1, min(os.cpu_count() or 1, 4))


AUTO_WORKERS_MIN_BYTES = 64 << 20


async def execute(
    config: RunConfig,
    *,
    origin: str = "run file",
    fresh: bool = False,
    shard: tuple[int, int] | None = None,
    use_cache: bool = True,
    progress: ProgressSink | None = None,
    handle_signals: bool = False,
) -> RunReport:
    """Run the whole job in this process (or one ``--shard i/N`` of it) and publish its outputs.

    Starts over or resumes (see :mod:`assay.pipeline.outputs`), runs one writer, and publishes the
    summary of the whole output: ``_SUCCESS`` only when the output is whole and the run passed."""
    tune_gc()
    started_at = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    config = config.model_copy(update={"run_id": config.run_id or RunOptions().run_id})
    plan = RunPlan(config, shard)
    sweep_leftovers(config)
    writer = shard[0] if shard else 0
    states = await plan.prepare(1, fresh=fresh) if shard is None else await _prepare_shard(plan, fresh)
    result = await run_writer(
        config,
        origin=origin,
        writer=writer,
        n=1,
        state=states.get(writer),
        store=plan.store,
        use_cache=use_cache,
        progress=progress,
        handle_signals=handle_signals,
        shard=shard,
    )
    return await conclude(plan, [result], started_at=started_at, wall_s=time.perf_counter() - t0)


async def _prepare_shard(plan: RunPlan, fresh: bool) -> dict[int, dict[str, Any]]:
    """A ``--shard i/N`` run keeps one writer's checkpoint, numbered i."""
    assert plan.shard is not None
    states = await plan.prepare(plan.shard[0] + 1, fresh=fresh)
    return {plan.shard[0]: states[plan.shard[0]]} if plan.shard[0] in states else {}


async def conclude(
    plan: RunPlan, results: list[WriterResult], *, started_at: dt.datetime, wall_s: float, **extra: Any
) -> RunReport:
    """The summary of the whole output, the exit code, and the published outputs."""
    config = plan.config
    stats, judges = plan.totals(results)
    for r in results:  # thresholds travel with the key stats
        for key, ks in (r.stats.get("evaluators") or {}).items():
            if key in stats.keys:
                stats.keys[key].threshold = ks.get("threshold", 0.5)
    statuses = [r.status for r in results]
    status = next((s for s in ("failed", "budget", "interrupted") if s in statuses), "ok")
    error = next((r.error for r in results if r.error is not None), None)
    summary = build_summary(config, stats, status, wall_s, str(config.run_id), started_at, judges)
    summary.update(extra)
    if plan.shard is not None:  # what `assay merge` needs to judge the whole run without the run file
        from assay.pipeline.merge import Gates

        summary["shard"] = {"index": plan.shard[0], "count": plan.shard[1]}
        summary.update(Gates.from_config(config).to_dict())
    report = finish(config, summary, stats, status, error=error)
    try:
        where = await plan.publish(
            summary, success=report.exit_code in (EXIT_OK, EXIT_GATE, EXIT_DEAD_LETTERS), completed=status == "ok"
        )
    except AssayError as exc:
        report.error = report.error or exc
        where = None
    report.summary["summary_path"] = where
    return report


def finish(
    config: RunConfig, summary: dict[str, Any], stats: RunStats, status: str, *, error: AssayError | None = None
) -> RunReport:
    """The exit code and status of a run from its stats; written into the summary."""
    messages: list[str] = []
    gates = [r.to_dict() for r in evaluate_gates(config.gates, stats)]
    if error is not None:
        code = error.exit_code
    elif status == "budget":
        code = EXIT_BUDGET
        messages.append("budget reached: the run stopped cleanly; run the same command again to resume")
    elif status == "interrupted":
        code = EXIT_INTERRUPTED
        messages.append("interrupted: written rows are durable; run the same command again to resume")
    else:
        code = EXIT_OK
        lim = config.limits
        dl = stats.counts["dead_letters"]
        errs = error_rate_failures(config, stats)
        if errs:
            code = EXIT_INFRA
            status = "failed"
            messages.extend(errs)
        elif lim.max_dead_letters is not None and dl > lim.max_dead_letters:
            code = EXIT_DEAD_LETTERS
            messages.append(f"{dl} dead letters > max_dead_letters {lim.max_dead_letters}")
        elif lim.max_dead_letter_ratio is not None and stats.dead_letter_ratio() > lim.max_dead_letter_ratio:
            code = EXIT_DEAD_LETTERS
            messages.append(
                f"dead-letter ratio {stats.dead_letter_ratio():.4f} > max_dead_letter_ratio {lim.max_dead_letter_ratio}"
            )
        failed_gates = [g for g in gates if not g["passed"]]
        if failed_gates and code == EXIT_OK:
            code = EXIT_GATE
        messages.extend(g["message"] for g in failed_gates)
        if code == EXIT_GATE:
            status = "gate_failed"
        elif code == EXIT_DEAD_LETTERS:
            status = "dead_letters"
    summary["status"] = status if error is None else "failed"
    summary["exit_code"] = code
    summary["messages"] = messages
    summary["gates"] = gates
    if error is not None:
        summary["error"] = {"type": type(error).__name__, "message": str(error)}
    return RunReport(code, summary, summary["status"], messages, error)


def error_rate_failures(config: RunConfig, stats: RunStats) -> list[str]:
    """Evaluators whose share of error results is above ``limits.max_error_rate``."""
    limit = config.limits.max_error_rate
    if limit is None:
        return []
    out = []
    for key, ks in sorted(stats.keys.items()):
        if ks.count and ks.errors / ks.count > limit:
            out.append(
                f"evaluator {key}: {ks.errors} of {ks.count} results are errors"
                f" ({ks.errors / ks.count:.1%} > max_error_rate {limit:.0%})"
            )
    return out


def merge_summaries(parts: list[dict[str, Any]]) -> RunStats:
    """The stats of several summaries (shards) added up."""
    total = RunStats()
    for p in parts:
        total.merge(RunStats.from_dict(p))
    return total
