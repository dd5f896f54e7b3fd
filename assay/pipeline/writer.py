"""One writer: one process's pipeline over its shard, with commits, checkpoints and a clean stop.

A writer restores its sinks and its source from its checkpoint (or starts on outputs the
orchestrator already reset), runs the pipeline, commits every ``limits.commit_interval_s``, and on
any ending (done, budget, signal, failure) makes what it wrote durable, acknowledges it and saves
its checkpoint before it returns. Its stats are cumulative over every attempt of the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from assay.config import RunConfig
from assay.connectors.registry import SinkContext, SourceContext, build_sink, build_source
from assay.exceptions import AssayError, ConnectorError
from assay.pipeline.checkpoint import CheckpointStore
from assay.pipeline.commit import Committer
from assay.pipeline.progress import ProgressSink, sample_gauges
from assay.pipeline.runner import Pipeline, RunOptions
from assay.pipeline.summary import RunStats
from assay.stages.evaluate import EvaluateStage


@dataclass
class WriterResult:
    """What a writer reports: its status, cumulative stats and judge counts, and its error."""

    status: str  # ok | budget | interrupted | failed
    stats: dict[str, Any]
    judges: dict[str, Any]
    wall_s: float
    error: AssayError | None = None
    commits: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def merge_judge_stats(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Per-judge counters summed (latency figures: the later run's)."""
    out = {name: dict(v) for name, v in a.items()}
    for name, stats in b.items():
        cur = out.setdefault(name, {})
        for k, v in stats.items():
            if isinstance(v, int | float) and not isinstance(v, bool) and isinstance(cur.get(k), int | float):
                if "latency" in k or k.startswith(("rate", "concurrency", "p50", "p90", "p99")):
                    cur[k] = v
                else:
                    cur[k] = cur[k] + v
            else:
                cur[k] = v
    return out


def unwrap(exc: BaseException) -> BaseException:
    """The one error inside (nested) exception groups, or the group itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = unwrap(inner)
            if isinstance(found, AssayError):
                return found
    return exc


async def run_writer(
    config: RunConfig,
    *,
    origin: str,
    writer: int,
    n: int,
    state: dict[str, Any] | None,
    store: CheckpointStore | None,
    use_cache: bool = True,
    progress: ProgressSink | None = None,
    handle_signals: bool = False,
    stop_requested: Callable[[], bool | float] | None = None,
    shard: tuple[int, int] | None = None,
) -> WriterResult:
    """Run writer ``writer`` of ``n`` (``state``: its checkpoint; sinks must not be None-reset here:
    the orchestrator resets outputs before any writer starts)."""
    from assay.connectors.registry import EMPTY_SINK_STATE
    from assay.pipeline.outputs import dead_letter_of
    from assay.pipeline.run import _judge_pool, _watch_flag, _watch_signals, build_evaluators

    started = time.perf_counter()
    state = state or {}
    sink_states = state.get("sinks") or {}
    prior_judges: dict[str, Any] = state.get("judges") or {}
    async with _judge_pool(config, use_cache=use_cache) as pool:
        evaluators = build_evaluators(config, origin)
        stats = RunStats(thresholds={ev.key: ev.threshold for ev in evaluators})
        if isinstance(state.get("stats"), dict):
            stats.merge(RunStats.from_dict(state["stats"]))
        if pool is not None:
            spent = sum(float(j.get("cost_usd", 0.0) or 0.0) for j in prior_judges.values())
            pool.budget.spent_usd += spent  # one budget for the whole run, not per attempt
        source = build_source(
            config.source,
            SourceContext(
                batch_size=config.limits.batch_size,
                shard=shard if shard is not None else ((writer, n) if n > 1 else None),
                resume_state=state.get("source"),
                options=config.s3,
            ),
        )
        sinks = {
            "results": build_sink(
                config.sink,
                SinkContext("results", writer, sink_states.get("results", EMPTY_SINK_STATE), config.s3),
            ),
            "dead_letter": build_sink(
                dead_letter_of(config),
                SinkContext("dead_letter", writer, sink_states.get("dead_letter", EMPTY_SINK_STATE), config.s3),
            ),
        }

        def checkpoint_state() -> dict[str, Any]:
            judges = merge_judge_stats(prior_judges, pool.stats()) if pool is not None else prior_judges
            return {"stats": stats.to_dict(), "judges": judges, "writer": writer, "n": n}

        committer = Committer(
            source,
            sinks,
            store=store,
            writer=writer,
            state=checkpoint_state,
            interval_s=config.limits.commit_interval_s,
        )
        if hasattr(source, "on_revoke"):  # a rebalance takes partitions away: commit what is durable first
            source.on_revoke = committer.commit
        options = RunOptions(
            batch_size=config.limits.batch_size,
            buffer=config.limits.buffer,
            workers=config.limits.workers,
            normalize=config.normalize,
            run_id=config.run_id or RunOptions().run_id,
        )
        pipeline = Pipeline(
            source,
            EvaluateStage(evaluators),
            sinks["results"],
            sinks["dead_letter"],
            options,
            stats=stats,
            on_progress=progress.update if progress else None,
            committer=committer,
        )
        error: AssayError | None = None
        try:
            async with source, sinks["results"], sinks["dead_letter"]:
                try:
                    async with anyio.create_task_group() as tg:
                        grace = config.limits.grace_period_s
                        if stop_requested is not None:
                            tg.start_soon(_watch_flag, stop_requested, pipeline, grace, tg.cancel_scope)
                        elif handle_signals:
                            tg.start_soon(_watch_signals, pipeline, grace, tg.cancel_scope)
                        if hasattr(progress, "tick"):  # ETA, judges, queue depths: sampled about once a second
                            tg.start_soon(sample_gauges, pipeline, progress, pool)
                        await pipeline.run()
                        tg.cancel_scope.cancel()
                except Exception as exc:
                    inner = unwrap(exc)
                    error = (
                        inner if isinstance(inner, AssayError) else ConnectorError(f"{type(inner).__name__}: {inner}")
                    )
                    error.__cause__ = inner
                # what was written is made durable and acknowledged, whatever happened
                await committer.commit()
        except Exception as exc:
            inner = unwrap(exc)
            if error is None:
                error = inner if isinstance(inner, AssayError) else ConnectorError(f"{type(inner).__name__}: {inner}")
        finally:
            for ev in evaluators:
                with anyio.CancelScope(shield=True):
                    await ev.aclose()
        if committer.commits:  # (nothing was opened when there was no commit: nothing to record)
            committer.save()  # the sinks' state after close (the current parts finished)
        status = "failed" if error is not None else pipeline.status
        final = checkpoint_state()
    return WriterResult(
        status, final["stats"], final["judges"], time.perf_counter() - started, error, committer.commits
    )
