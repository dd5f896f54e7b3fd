"""Run orchestration: config → evaluators, connectors, judges → pipeline(s) → summary and exit code.

Exit codes: 0 ok; 1 infrastructure failure; 2 bad config or usage; 3 a quality gate failed;
4 dead letters above the allowed threshold; 5 budget exhausted (resumable); 130 interrupted.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import os
import platform
import signal
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson

from assay.config import RunConfig
from assay.connectors.file import FileSource, JsonlSink, expand_paths, is_directory_target
from assay.evaluators.base import BaseEvaluator
from assay.exceptions import AssayError, ConfigError
from assay.pipeline.checkpoint import Ledger
from assay.pipeline.progress import ProgressSink
from assay.pipeline.runner import Pipeline, RunOptions
from assay.pipeline.summary import RunStats
from assay.registry import build_evaluator
from assay.stages.evaluate import EvaluateStage

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
class Layout:
    """Where a run writes its rows, dead letters, summary and success marker."""

    sink_path: str
    dead_letter_path: str
    summary_path: Path
    success_path: Path | None

    @classmethod
    def from_config(cls, config: RunConfig) -> Layout:
        sink = config.sink.path
        if is_directory_target(sink):
            out_dir = Path(sink)
            dead = config.dead_letter.path if config.dead_letter else str(out_dir / "_dead_letter" / "")
            return cls(sink, dead, out_dir / "_SUMMARY.json", out_dir / "_SUCCESS")
        p = Path(sink)
        stem = p.name.split(".")[0]
        dead = config.dead_letter.path if config.dead_letter else str(p.with_name(f"{stem}.dead_letter.jsonl"))
        return cls(sink, dead, p.parent / "_SUMMARY.json", None)


@dataclass
class RunReport:
    exit_code: int
    summary: dict[str, Any]
    status: str
    messages: list[str] = field(default_factory=list)


def _write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2, default=str))
    os.replace(tmp, path)


def evaluate_gates(config: RunConfig, stats: RunStats) -> list[str]:
    failures = []
    for key, gate in config.gates.items():
        ks = stats.keys.get(key)
        if ks is None:
            failures.append(f"gate {key}: no results with this key")
            continue
        if gate.min_mean is not None and (ks.mean is None or ks.mean < gate.min_mean):
            failures.append(f"gate {key}: mean {ks.mean} < min_mean {gate.min_mean}")
        if gate.min_pass_rate is not None and (ks.pass_rate is None or ks.pass_rate < gate.min_pass_rate):
            failures.append(f"gate {key}: pass rate {ks.pass_rate} < min_pass_rate {gate.min_pass_rate}")
    return failures


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
    requested: Callable[[], bool], pipeline: Pipeline, grace_s: float, cancel: anyio.CancelScope
) -> None:
    """The same as ``_watch_signals`` for a process whose own signal handler sets a flag (a shard
    worker: its handler stays installed for the life of the process, so a repeated signal never
    meets the default action)."""
    # polled: the flag is set by a signal handler, which must not touch the event loop
    while not requested():  # noqa: ASYNC110
        await anyio.sleep(0.1)
    await _stop(pipeline, grace_s, cancel)


async def _stop(pipeline: Pipeline, grace_s: float, cancel: anyio.CancelScope) -> None:
    """Stop reading; in-flight work has ``grace_s`` to drain before it is cancelled."""
    pipeline.stop("interrupted")
    with anyio.move_on_after(grace_s):
        await anyio.sleep_forever()
    cancel.cancel()


def shard_ledger(state_dir: str, sink_path: str, shard: tuple[int, int] | None) -> Ledger:
    """The checkpoint ledger of a run (or of shard i/N of it) writing to ``sink_path``."""
    return Ledger.for_run(state_dir, sink_path + (f"#{shard[0]}/{shard[1]}" if shard else ""))


async def execute(
    config: RunConfig,
    *,
    origin: str = "run file",
    fresh: bool = False,
    shard: tuple[int, int] | None = None,
    use_cache: bool = True,
    progress: ProgressSink | None = None,
    handle_signals: bool = False,
    stop_requested: Callable[[], bool] | None = None,
    ledger_key: str | None = None,
    keep_ledger: bool = False,
) -> RunReport:
    """Run one process's share of a run and write its summary.

    ``ledger_key``: the sink path the checkpoint ledger is kept under (default: this run's sink; a
    ``--workers`` shard writes into scratch space but checkpoints under the run's real sink).
    ``stop_requested``: polled instead of handling signals here (a shard worker's flag).
    ``keep_ledger``: keep it even when the run completes (a shard's rows are not final until the
    parent has merged them; the parent removes the ledgers then)."""
    tune_gc()
    started_at = dt.datetime.now(dt.UTC)
    layout = Layout.from_config(config)
    run_id = config.run_id or RunOptions().run_id
    ledger = shard_ledger(config.state_dir, ledger_key or layout.sink_path, shard)
    if fresh:
        ledger.remove()
    resuming = ledger.load()
    async with _judge_pool(config, use_cache=use_cache) as pool:
        evaluators = build_evaluators(config, origin)
        stats = RunStats(thresholds={ev.key: ev.threshold for ev in evaluators})
        if resuming and isinstance(ledger.extra.get("stats"), dict):
            stats.merge(RunStats.from_dict(ledger.extra["stats"]))
        source = FileSource(
            config.source.paths,
            batch_size=config.limits.batch_size,
            input_format=config.source.input_format,
            read_mode=config.source.read_mode,
            shard=shard,
            skip=ledger.is_done if resuming else None,
        )
        shard_no = shard[0] if shard else 0
        sink = JsonlSink(
            layout.sink_path,
            compression=config.sink.compression,
            max_rows_per_part=config.sink.max_rows_per_part,
            shard=shard_no,
            append=resuming,
        )
        dead = JsonlSink(layout.dead_letter_path, prefix="dead", shard=shard_no, append=resuming)
        options = RunOptions(
            batch_size=config.limits.batch_size,
            buffer=config.limits.buffer,
            workers=config.limits.workers,
            normalize=config.normalize,
            run_id=run_id,
        )
        pipeline = Pipeline(
            source,
            EvaluateStage(evaluators),
            sink,
            dead,
            options,
            stats=stats,
            on_progress=progress.update if progress else None,
            on_durable=ledger.add,  # folded into line intervals as it goes: memory stays flat
        )
        try:
            async with source, sink, dead, anyio.create_task_group() as tg:
                grace = config.limits.grace_period_s
                if stop_requested is not None:
                    tg.start_soon(_watch_flag, stop_requested, pipeline, grace, tg.cancel_scope)
                elif handle_signals:
                    tg.start_soon(_watch_signals, pipeline, grace, tg.cancel_scope)
                outcome = await pipeline.run()
                tg.cancel_scope.cancel()
        finally:
            for ev in evaluators:
                with anyio.CancelScope(shield=True):
                    await ev.aclose()
        judge_stats = pool.stats() if pool is not None else {}
    status = pipeline.status
    if status == "ok" and not keep_ledger:
        ledger.remove()
    else:
        ledger.extra["stats"] = stats.to_dict()
        ledger.save()
    summary = build_summary(config, stats, status, outcome.wall_s, run_id, started_at, layout, judge_stats)
    return finish(config, summary, stats, status, layout, write=True)


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
    if config.judges or any(p == "-" for p in config.source.paths):
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


def build_summary(
    config: RunConfig,
    stats: RunStats,
    status: str,
    wall_s: float,
    run_id: str,
    started_at: dt.datetime,
    layout: Layout,
    judge_stats: dict[str, Any],
) -> dict[str, Any]:
    data = stats.to_dict()
    counts = data["counts"]
    judges_total = {
        "requests": sum(int(j.get("requests", 0)) for j in judge_stats.values()),
        "rate_limited_429": sum(int(j.get("http_429", 0)) for j in judge_stats.values()),
        "server_errors_5xx": sum(int(j.get("http_5xx", 0)) for j in judge_stats.values()),
        "timeouts": sum(int(j.get("timeouts", 0)) for j in judge_stats.values()),
        "cached": sum(int(j.get("cached", 0)) for j in judge_stats.values()),
        "retries": sum(int(j.get("retries", 0)) for j in judge_stats.values()),
        "errors": sum(int(j.get("errors", 0)) for j in judge_stats.values()),
        "input_tokens": sum(int(j.get("input_tokens", 0)) for j in judge_stats.values()),
        "output_tokens": sum(int(j.get("output_tokens", 0)) for j in judge_stats.values()),
        "cost_usd": round(sum(float(j.get("cost_usd", 0.0)) for j in judge_stats.values()), 8),
    }
    return {
        "run_id": run_id,
        "status": status,
        "started_at": started_at.isoformat(),
        "finished_at": dt.datetime.now(dt.UTC).isoformat(),
        "wall_time_s": round(wall_s, 3),
        "records_per_s": round(counts["read"] / wall_s, 1) if wall_s > 0 else None,
        "counts": counts,
        "evaluators": data["evaluators"],
        "judges": judge_stats,
        "totals": judges_total,
        "outputs": {"results": layout.sink_path, "dead_letter": layout.dead_letter_path},
        "source": config.source.paths,
        "host": {"hostname": socket.gethostname(), "python": platform.python_version()},
    }


def finish(
    config: RunConfig, summary: dict[str, Any], stats: RunStats, status: str, layout: Layout, *, write: bool
) -> RunReport:
    messages: list[str] = []
    if status == "budget":
        code = EXIT_BUDGET
        messages.append("budget reached: the run stopped cleanly; run the same command again to resume")
    elif status == "interrupted":
        code = EXIT_INTERRUPTED
        messages.append("interrupted: written rows are durable; run the same command again to resume")
    else:
        code = EXIT_OK
        lim = config.limits
        dl = stats.counts["dead_letters"]
        if lim.max_dead_letters is not None and dl > lim.max_dead_letters:
            code = EXIT_DEAD_LETTERS
            messages.append(f"{dl} dead letters > max_dead_letters {lim.max_dead_letters}")
        elif lim.max_dead_letter_ratio is not None and stats.dead_letter_ratio() > lim.max_dead_letter_ratio:
            code = EXIT_DEAD_LETTERS
            messages.append(
                f"dead-letter ratio {stats.dead_letter_ratio():.4f} > max_dead_letter_ratio {lim.max_dead_letter_ratio}"
            )
        gate_failures = evaluate_gates(config, stats)
        if gate_failures and code == EXIT_OK:
            code = EXIT_GATE
        messages.extend(gate_failures)
    summary["exit_code"] = code
    summary["messages"] = messages
    if write:
        _write_json_atomic(layout.summary_path, summary)
        if layout.success_path is not None and status == "ok":
            layout.success_path.touch()
    return RunReport(code, summary, status, messages)


def merge_summaries(parts: Sequence[dict[str, Any]]) -> RunStats:
    total = RunStats()
    for p in parts:
        total.merge(RunStats.from_dict(p))
    return total
