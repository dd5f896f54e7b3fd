"""One writer: one process's pipeline over its shard, with commits, checkpoints and a clean stop.

A writer restores its sinks and its source from its checkpoint (or starts on outputs the
orchestrator already reset), runs the pipeline, commits every ``limits.commit_interval_s``, and on
any ending (done, budget, signal, failure) makes what it wrote durable, acknowledges it and saves
its checkpoint before it returns. Its stats are cumulative over every attempt of the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from assay.config import RunConfig
from assay.connectors.base import Source
from assay.connectors.registry import EMPTY_SINK_STATE, SinkContext, SourceContext, build_sink, build_source
from assay.evaluators.base import BaseEvaluator
from assay.exceptions import AssayError, ConnectorError
from assay.pipeline.assembly import build_evaluators, judge_pool
from assay.pipeline.checkpoint import CheckpointStore
from assay.pipeline.columnar_run import make_pipeline
from assay.pipeline.commit import Committer
from assay.pipeline.ledger import Ledger, LedgerEvaluate, load_ledger
from assay.pipeline.progress import ProgressSink, sample_gauges
from assay.pipeline.runner import Pipeline, RunOptions
from assay.pipeline.stopping import watch_flag, watch_signals
from assay.pipeline.summary import RunStats, merge_judge_stats
from assay.pipeline.targets import dead_letter_of, scales_by_group
from assay.sampling import samplers_of
from assay.stages.evaluate import EvaluateStage
from assay.stages.sampling import prepare_sampling
from assay.stats.labels import load_labels


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


def run_options(config: RunConfig) -> RunOptions:
    """The engine's knobs from the run file (``limits``, ``normalize``, ``stats.cluster_by``)."""
    return RunOptions(
        batch_size=config.limits.batch_size,
        buffer=config.limits.buffer,
        workers=config.limits.workers,
        normalize=config.normalize,
        run_id=config.run_id or RunOptions().run_id,
        cluster_by=config.stats.cluster_by,
    )


def run_source(
    config: RunConfig,
    evaluators: Sequence[BaseEvaluator[Any]],
    *,
    shard: tuple[int, int] | None,
    resume_state: Any = None,
) -> Source:
    """The run file's source for one writer's ``shard`` (not opened), told what ``evaluators``
    read; ``resume_state``: where an earlier attempt of this writer stopped (None: from the start)."""
    return build_source(
        config.source,
        SourceContext(
            batch_size=config.limits.batch_size,
            shard=shard,
            resume_state=resume_state,
            options=config.s3,
            reads_text=any(ev.reads_text for ev in evaluators),
            reads_call_ids=any(ev.reads_call_ids for ev in evaluators),
            reads_args=any(ev.reads_args for ev in evaluators),
            owns_input=not scales_by_group(config),
        ),
    )


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
    stop_requested: Callable[[], bool | float | str] | None = None,
    abandon_requested: Callable[[], bool] = lambda: False,
    shard: tuple[int, int] | None = None,
    budget_scope: str | None = None,
) -> WriterResult:
    """Run writer ``writer`` of ``n`` (``state``: its checkpoint; sinks must not be None-reset here:
    the orchestrator resets outputs before any writer starts; ``budget_scope``: the budget shared
    with the other writers, see :mod:`assay.judges.budget_store`)."""
    started = time.perf_counter()
    state = state or {}
    sink_states = state.get("sinks") or {}
    staged = bool(state.get("staged"))  # write into the sinks' staging areas (see RunPlan.prepare)
    prior_judges: dict[str, Any] = state.get("judges") or {}
    async with judge_pool(config, use_cache=use_cache, budget_scope=budget_scope) as pool:
        evaluators = build_evaluators(config, origin, judges=pool)
        await prepare_sampling(config, samplers_of(evaluators))  # the counting pass, when strata need one
        # over a published output: its current results are kept, only the other pairs are scored
        ledger: Ledger | None = await load_ledger(config, evaluators) if state.get("ledger") else None
        prior_pairs: dict[str, int] = state.get("pairs") or {}
        stats = RunStats(
            thresholds={ev.key: ev.threshold for ev in evaluators},
            level=config.stats.ci_level,
            labels=load_labels(config.calibration.labels) if config.calibration else None,
        )
        if isinstance(state.get("stats"), dict):
            stats.merge(RunStats.from_dict(state["stats"]))
        read_before = stats.counts["read"]  # an earlier attempt's: not this invocation's rate
        resumed = getattr(progress, "resumed_from", None)  # a shard worker's counters have none
        if resumed is not None:
            resumed(read_before)
        spent_before = 0.0
        if pool is not None:
            spent_before = sum(float(j.get("cost_usd", 0.0) or 0.0) for j in prior_judges.values())
            if writer == 0 and store is not None:  # and what writers no longer run (fewer now) spent
                carried = store.carried().get("judges") or {}
                spent_before += sum(float(j.get("cost_usd", 0.0) or 0.0) for j in carried.values())
            pool.budget.spent_usd += spent_before  # one budget for the whole run, not per attempt
            # an earlier attempt stopped at this budget (or a higher one): it stays spent, not one
            # more call per rerun (the calibration that stopped it is not in the checkpoint)
            stopped_at = state.get("budget_stopped_at")
            limit = config.limits.budget_usd
            if isinstance(stopped_at, (int, float)) and limit is not None and limit <= stopped_at:
                pool.budget.close()
        source = run_source(
            config,
            evaluators,
            shard=shard if shard is not None else ((writer, n) if n > 1 else None),
            resume_state=state.get("source"),
        )
        sinks = {
            role: build_sink(
                section,
                SinkContext(
                    role,
                    writer,
                    sink_states.get(role, EMPTY_SINK_STATE),
                    config.s3,
                    staged=staged,
                    state_dir=config.state_dir,
                ),
            )
            for role, section in (("results", config.sink), ("dead_letter", dead_letter_of(config)))
        }

        def checkpoint_state() -> dict[str, Any]:
            judges = prior_judges
            if pool is not None:  # this writer's earlier attempts, then this one
                judges = merge_judge_stats([prior_judges, pool.stats()], side_by_side=False)
            record: dict[str, Any] = {"stats": stats.to_dict(), "judges": judges, "writer": writer, "n": n}
            if ledger is not None:  # this writer's earlier attempts' counts, then this one's
                record["pairs"] = {k: prior_pairs.get(k, 0) + v for k, v in ledger.counts.items()}
            stopped_at = state.get("budget_stopped_at")  # a raised budget that was not reached keeps it
            if pipeline is not None and pipeline.status == "budget":
                stopped_at = config.limits.budget_usd
            if stopped_at is not None:
                record["budget_stopped_at"] = stopped_at
            return record

        pipeline: Pipeline | None = None
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
        pipeline = make_pipeline(  # the columnar path where the source and every evaluator allow it
            source,
            EvaluateStage(evaluators) if ledger is None else LedgerEvaluate(evaluators, ledger),
            sinks["results"],
            sinks["dead_letter"],
            run_options(config),
            stats=stats,
            on_progress=progress.update if progress else None,
            committer=committer,
        )
        pipeline.ledger = ledger
        error: AssayError | None = None
        try:
            async with source, sinks["results"], sinks["dead_letter"]:
                try:
                    async with anyio.create_task_group() as tg:
                        grace = config.limits.grace_period_s
                        if stop_requested is not None:
                            scope = tg.cancel_scope
                            tg.start_soon(watch_flag, stop_requested, pipeline, grace, scope, abandon_requested)
                        elif handle_signals:
                            tg.start_soon(watch_signals, pipeline, grace, tg.cancel_scope)
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
        spent_now = pool.spent_usd - spent_before if pool is not None else 0.0
    read_now = int(final["stats"]["counts"]["read"]) - read_before
    return WriterResult(
        status,
        final["stats"],
        final["judges"],
        time.perf_counter() - started,
        error,
        committer.commits,
        extra={
            "read_now": read_now,
            "spent_now_usd": spent_now,
            **({"pairs": ledger.pairs(prior_pairs)} if ledger is not None else {}),
        },
    )
