"""What ``assay run`` does for its batch judges before it scores (one invocation).

The rounds over the ledger are the provider-facing half's (:mod:`assay.judges.batch.rounds`:
recover, poll and ingest, submit); this module orders them and owns what is the run's:

1. the ledger's place (:func:`ledger_path`: one per output, per ``--shard``, per day of a Delta
   table) and, first, the draining of an earlier assay's whole-table ledger;
2. recover and poll;
3. **collect** (when nothing is open or waiting, or the last pass did not finish): one pass over
   the input with the batch judges in collect mode — normalize and evaluate, every cache miss
   recorded in the ledger as a line to submit, no rows written, nothing published;
4. submit what waits;
5. everything answered (a collect pass found no miss): the normal run scores with cache hits.
   Otherwise exit 75 (``--wait``: poll every ``poll_interval_s`` with a progress line and go on).

Ctrl-C / SIGTERM while waiting: exit 130, the ledger saved, no batch cancelled.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import orjson

from assay.config import RunConfig
from assay.connectors import registry
from assay.connectors.base import Source
from assay.exceptions import EXIT_INTERRUPTED, EXIT_PENDING, ConfigError
from assay.judges.batch import rounds
from assay.judges.batch.ledger import Ledger
from assay.judges.batch.rounds import BatchState, add_batch_totals, batch_judges, has_batch_judges, say, with_ledger
from assay.judges.pool import JudgePool
from assay.paths import safe_join
from assay.pipeline.assembly import build_evaluators
from assay.pipeline.checkpoint import CheckpointStore
from assay.pipeline.ledger import LedgerEvaluate, load_ledger
from assay.pipeline.outputs import RunPlan
from assay.pipeline.targets import local_summary_path, sink_url
from assay.pipeline.verdict import RunReport
from assay.pipeline.writer import unwrap

PENDING_MESSAGE = "pending: batches submitted, run the same command again to collect"


def ledger_path(config: RunConfig, shard: tuple[int, int] | None = None) -> Path:
    """``<state_dir>/batches/<run key>.sqlite``: one ledger per output (and per ``--shard``); a
    sink that keeps one checkpoint per day (a Delta table's ``ds``) keeps one ledger per day too,
    so a day's invocation polls, resubmits and counts the cost of its own batches only."""
    scope = registry.checkpoint_scope(config.sink)
    scope += f"#shard-{shard[0]}-of-{shard[1]}" if shard else ""
    return safe_join(Path(config.state_dir), "batches", f"{CheckpointStore.key_for(sink_url(config), scope)}.sqlite")


def legacy_ledger_path(config: RunConfig, shard: tuple[int, int] | None = None) -> Path | None:
    """The one ledger an assay before per-day ledgers kept for a whole Delta table (None: the
    sink keeps no per-day scope). Its batches are collected (never resubmitted) until none is open."""
    if not registry.checkpoint_scope(config.sink):
        return None
    scope = f"#shard-{shard[0]}-of-{shard[1]}" if shard else ""
    return safe_join(Path(config.state_dir), "batches", f"{CheckpointStore.key_for(sink_url(config), scope)}.sqlite")


@dataclass
class PhaseResult:
    """``config`` (ready to score, ledger attached) or ``report`` (pending, interrupted, failed)."""

    config: RunConfig | None = None
    report: RunReport | None = None


async def batch_phase(
    config: RunConfig,
    *,
    origin: str = "run file",
    shard: tuple[int, int] | None = None,
    use_cache: bool = True,
    wait: bool = False,
    handle_signals: bool = False,
    source: Callable[[], Source] | None = None,
    fresh: bool = False,
) -> PhaseResult:
    """Recover, poll, collect, submit (see the module doc); a pending report or the config to score.
    ``source``: what the collect pass reads (default: the run file's source; the Spark integration
    gives its DataFrame). Over a published output (not ``fresh``), the collect pass asks only for
    the pairs the output does not hold current (:mod:`assay.pipeline.ledger`)."""
    configs = batch_judges(config)
    if not configs:
        return PhaseResult(config=config)
    if not use_cache:
        raise ConfigError(
            f"--no-cache cannot be used with batch judges ({', '.join(sorted(configs))}): "
            "batch answers reach the run through the judge cache"
        )
    path = ledger_path(config, shard)
    config = with_ledger(config, path)
    ledger = Ledger(path)
    state = BatchState(ledger, batch_judges(config))
    interrupted = False
    try:
        try:
            ready = await _guarded(config, origin, shard, state, wait, handle_signals, source, fresh)
        except BaseExceptionGroup as group:
            raise unwrap(group) from None
        interrupted = ready is None
    finally:
        ledger.close()
    if interrupted:
        summary = {"status": "interrupted", "exit_code": EXIT_INTERRUPTED, "batches": rounds.batch_rows(path)}
        return PhaseResult(report=RunReport(EXIT_INTERRUPTED, summary, "interrupted", state.messages))
    if ready:
        return PhaseResult(config=config)
    return PhaseResult(report=pending_report(config, shard, path, state.messages))


async def _guarded(
    config: RunConfig,
    origin: str,
    shard: tuple[int, int] | None,
    state: BatchState,
    wait: bool,
    handle_signals: bool,
    source: Callable[[], Source] | None = None,
    fresh: bool = False,
) -> bool | None:
    """:func:`_invocation` under a SIGINT/SIGTERM watcher (None: interrupted)."""
    interrupted = False
    ready = False
    async with anyio.create_task_group() as tg:
        if handle_signals:

            async def watch() -> None:
                nonlocal interrupted
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for _ in signals:
                        interrupted = True
                        say("interrupted: the ledger is saved; no batch was cancelled")
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(watch)
        ready = await _invocation(config, origin, shard, state, wait, source, fresh)
        tg.cancel_scope.cancel()
    return None if interrupted else ready


async def _invocation(
    config: RunConfig,
    origin: str,
    shard: tuple[int, int] | None,
    state: BatchState,
    wait: bool,
    source: Callable[[], Source] | None = None,
    fresh: bool = False,
) -> bool:
    """True when every answer is in (score now), False when batches are pending."""
    pool = JudgePool.from_config(
        config.judges, state_dir=Path(config.state_dir), use_cache=True, budget_usd=config.limits.budget_usd
    )
    async with pool, contextlib.AsyncExitStack() as stack:
        await rounds.open_clients(state, pool, stack)
        legacy = rounds.legacy_state(legacy_ledger_path(config, shard), state)
        if legacy is not None:
            stack.callback(legacy.ledger.close)
        while True:
            if legacy is not None and not await rounds.drain_legacy(legacy, state, pool):
                if not wait:
                    return False
                await anyio.sleep(rounds.wait_interval(state))
                continue
            legacy = None
            await rounds.recover(state)  # (in a loop: a create that got no clear answer is resolved next)
            state.refused.clear()
            await rounds.poll(state, pool)
            if rounds.collect_due(state):
                misses = await _collect(config, origin, shard, pool, state, source, fresh)
                if misses and await rounds.refetch(state, pool):  # answers that left the cache: downloaded again
                    misses = await _collect(config, origin, shard, pool, state, source, fresh)
                if rounds.all_answered(state, misses):
                    return True
            await rounds.submit(state, Path(config.state_dir))
            if not wait:
                return False
            rounds.progress(state)
            await anyio.sleep(rounds.wait_interval(state))


async def _collect(
    config: RunConfig,
    origin: str,
    shard: tuple[int, int] | None,
    pool: JudgePool,
    state: BatchState,
    make_source: Callable[[], Source] | None = None,
    fresh: bool = False,
) -> int:
    """One pass over the input: every batch judge's cache misses into the ledger. The misses found.
    Over a published output (not ``fresh``), pairs it holds current are not asked for."""
    endpoints = rounds.begin_collect(state, pool)
    await _collect_pass(config, origin, shard, pool, fresh, make_source)
    return await rounds.end_collect(state, endpoints)


async def _collect_pass(
    config: RunConfig,
    origin: str,
    shard: tuple[int, int] | None,
    pool: JudgePool,
    fresh: bool,
    make_source: Callable[[], Source] | None = None,
) -> None:
    """Read the input with the batch judges in collect mode (their misses go to the ledger)."""
    from assay.connectors.registry import SourceContext, build_source
    from assay.evaluators.base import offers
    from assay.stages.evaluate import EvaluateStage
    from assay.stages.normalize import RecordParser
    from assay.traces.model import Trace

    built = build_evaluators(config, origin, judges=pool)
    evaluators = [ev for ev in built if ev.is_async and offers(ev, "resolve_judge")]
    stage = EvaluateStage(evaluators)
    if not fresh and shard is None and evaluators and await RunPlan(config).over_published():
        stage = LedgerEvaluate(evaluators, await load_ledger(config, evaluators))
    parse = RecordParser(config.normalize)
    if make_source is not None:
        source = make_source()
    else:
        source = build_source(
            config.source, SourceContext(batch_size=config.limits.batch_size, shard=shard, options=config.s3)
        )
    async with source as src:
        async for batch in src.batches():
            traces = [t for t in (parse(env) for env in batch) if isinstance(t, Trace)]
            if traces and evaluators:
                await stage.process(traces)


async def shared_batch_phase(configs: list[RunConfig], path: Path, *, origin: str = "run file") -> bool:
    """The batch judges of several days (``assay backfill``) in one ledger at ``path``: every
    day's missing pairs are collected, then submitted packed together (180 days are a few
    provider batches, not 180), polled and ingested into the judge cache. True when every answer
    is in (each day's own run then scores from the cache); False while batches are pending."""
    if not configs:
        return True
    days = [with_ledger(c, path) for c in configs]
    ledger = Ledger(path)
    state = BatchState(ledger, batch_judges(days[0]))
    try:
        pool = JudgePool.from_config(
            days[0].judges, state_dir=Path(days[0].state_dir), use_cache=True, budget_usd=days[0].limits.budget_usd
        )
        async with pool, contextlib.AsyncExitStack() as stack:
            await rounds.open_clients(state, pool, stack)
            await rounds.recover(state)
            state.refused.clear()
            await rounds.poll(state, pool)
            if rounds.collect_due(state):
                misses = await _collect_days(days, origin, pool, state)
                if misses and await rounds.refetch(state, pool):
                    misses = await _collect_days(days, origin, pool, state)
                if rounds.all_answered(state, misses):
                    return True
            await rounds.submit(state, Path(days[0].state_dir))
            return False
    finally:
        ledger.close()


async def _collect_days(days: list[RunConfig], origin: str, pool: JudgePool, state: BatchState) -> int:
    endpoints = rounds.begin_collect(state, pool)
    for config in days:
        await _collect_pass(config, origin, None, pool, False)
    return await rounds.end_collect(state, endpoints)


# --- reporting -------------------------------------------------------------------------------------


def pending_report(config: RunConfig, shard: tuple[int, int] | None, path: Path, messages: list[str]) -> RunReport:
    """Exit 75: the batch ids and counts; a ``pending`` summary where no whole output's summary is."""
    rows = rounds.batch_rows(path)
    ledger = Ledger(path)
    try:
        counts = ledger.counts()
    finally:
        ledger.close()
    summary: dict[str, Any] = {
        "run_id": config.run_id,
        "status": "pending",
        "exit_code": EXIT_PENDING,
        "batches": rows,
        "lines": counts,
        "ledger": str(path),
    }
    add_batch_totals(summary, config)
    if shard is not None:
        summary["shard"] = {"index": shard[0], "count": shard[1]}
    out = [PENDING_MESSAGE, *messages]
    for r in rows:
        state = r["provider_state"] or r["state"]
        out.append(f"batch {r['id'] or r['ledger_id']} ({r['judge']}): {state}, {r['lines']:,} requests")
    waiting = counts.get("queued", 0) + counts.get("retry", 0)
    if waiting:
        out.append(f"{waiting:,} requests wait for room in the enqueued-token quota or a retry")
    summary["summary_path"] = write_pending_summary(config, shard, summary)
    return RunReport(EXIT_PENDING, summary, "pending", out)


def write_pending_summary(config: RunConfig, shard: tuple[int, int] | None, summary: dict[str, Any]) -> str | None:
    """Write the pending summary unless the summary there describes a whole output."""
    from assay.connectors.file_sink import write_json_atomic

    target = local_summary_path(config)
    if shard is not None:
        target = target.with_name(f"_SUMMARY.shard-{shard[0]}-of-{shard[1]}.json")
    if target.exists():
        try:
            prior = orjson.loads(target.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            prior = {}
        if isinstance(prior, dict) and prior.get("status") not in (None, "pending"):
            return None
    try:
        write_json_atomic(target, summary)
    except OSError:
        return None
    return str(target)


__all__ = [
    "PENDING_MESSAGE",
    "PhaseResult",
    "add_batch_totals",
    "batch_judges",
    "batch_phase",
    "has_batch_judges",
    "ledger_path",
    "legacy_ledger_path",
    "pending_report",
    "shared_batch_phase",
]
