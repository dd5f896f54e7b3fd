"""What ``assay run`` does for its batch judges before it scores (one invocation).

The rounds over the ledger are the provider-facing half's (:mod:`assay.judges.batch.rounds`:
recover, poll and ingest, submit); this module orders them and owns what is the run's:

1. the ledger's place (:func:`ledger_path`: one per output, per ``--shard``, per day of a Delta
   table) and, first, the draining of an earlier assay's whole-table ledger;
2. recover and poll;
3. **collect** (when nothing is open or waiting, or the last pass did not finish): an ordinary
   pipeline run over the input (:class:`~assay.pipeline.runner.Pipeline`: the source, shard,
   parse and evaluate of ``assay run``) with the batch judges in collect mode and sinks that keep
   nothing: every cache miss recorded in the ledger as a line to submit; no row, dead letter,
   summary or checkpoint written, nothing published;
4. submit what waits;
5. everything answered (a collect pass found no miss): the normal run scores with cache hits.
   Otherwise exit 75 (``--wait``: poll every ``poll_interval_s`` with a progress line and go on).

A signal stops an invocation the way it stops a run (:mod:`assay.pipeline.stopping`, the same
watcher): a collect pass stops reading and drains (it is read again next time), a wait for
batches ends at once; the ledger is saved and no batch cancelled. Pending, interrupted (and a
budget reached by a collect pass's fallback calls) are :mod:`assay.pipeline.verdict`'s statuses,
exit codes and words.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson

from assay.config import RunConfig
from assay.connectors import registry
from assay.connectors.base import DiscardSink, Source
from assay.connectors.layout import shard_summary_name, write_json_atomic
from assay.evaluators.base import offers
from assay.exceptions import ConfigError
from assay.judges.batch import rounds
from assay.judges.batch.ledger import Ledger
from assay.judges.batch.rounds import BatchState, add_batch_totals, batch_judges, has_batch_judges, with_ledger
from assay.judges.pool import JudgePool
from assay.paths import safe_join
from assay.pipeline.assembly import build_evaluators
from assay.pipeline.checkpoint import CheckpointStore
from assay.pipeline.ledger import LedgerEvaluate, load_ledger
from assay.pipeline.outputs import RunPlan
from assay.pipeline.runner import Pipeline
from assay.pipeline.stopping import watch_signals
from assay.pipeline.summary import RunStats
from assay.pipeline.targets import local_summary_path, sink_url
from assay.pipeline.verdict import Policy, RunReport, Verdict, decide
from assay.pipeline.writer import run_options, run_source, unwrap
from assay.stages.evaluate import EvaluateStage


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
    """``config`` (ready to score, ledger attached) or ``report`` (pending, interrupted, budget)."""

    config: RunConfig | None = None
    report: RunReport | None = None


@dataclass
class Collect:
    """What a collect pass reads: a run file's input (one ``--shard`` of it, a day of ``assay
    backfill``). ``source``: another input (the Spark integration's DataFrame); ``fresh``: read
    for every pair, even over a published output."""

    config: RunConfig
    shard: tuple[int, int] | None = None
    source: Callable[[], Source] | None = None
    fresh: bool = False


@dataclass
class Invocation:
    """One invocation's rounds as the engine's signal watcher sees a run
    (:class:`~assay.pipeline.stopping.Stoppable`): a stop goes to the collect pass under way (its
    pipeline stops reading and drains); between passes nothing is read, so a stop ends the
    invocation at once (``scope``)."""

    scope: anyio.CancelScope
    status: str = "ok"
    """ok, or the :data:`~assay.pipeline.verdict.STOPPED` status that ended it (interrupted, budget)."""
    ready: bool = False
    """Every answer is in: the run scores now (else batches are pending)."""
    pipeline: Pipeline | None = None
    """The collect pass under way."""
    stop_deadline: float | None = None
    messages: list[str] = field(default_factory=list)

    @property
    def in_flight(self) -> int | None:
        return self.pipeline.in_flight if self.pipeline is not None else None

    def stop(self, status: str) -> None:
        if self.status == "ok":
            self.status = status
        if self.pipeline is not None:
            self.pipeline.stop(status)

    def stop_reading_now(self) -> None:
        if self.pipeline is not None:
            self.pipeline.stop_reading_now()
        else:
            self.scope.cancel()


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
    if not batch_judges(config):
        return PhaseResult(config=config)
    if not use_cache:
        raise ConfigError(
            f"--no-cache cannot be used with batch judges ({', '.join(sorted(batch_judges(config)))}): "
            "batch answers reach the run through the judge cache"
        )
    path = ledger_path(config, shard)
    config = with_ledger(config, path)
    done = await invoke(
        [Collect(config, shard, source, fresh)],
        path,
        origin=origin,
        legacy=legacy_ledger_path(config, shard),
        wait=wait,
        handle_signals=handle_signals,
    )
    if done.status != "ok":
        return PhaseResult(report=stopped_report(config, shard, path, done.status, done.messages))
    if done.ready:
        return PhaseResult(config=config)
    return PhaseResult(report=pending_report(config, shard, path, done.messages))


async def shared_batch_phase(configs: list[RunConfig], path: Path, *, origin: str = "run file") -> bool:
    """The batch judges of several days (``assay backfill``) in one ledger at ``path``: every
    day's missing pairs are collected (a collect pass per day), then submitted packed together
    (180 days are a few provider batches, not 180), polled and ingested into the judge cache. True
    when every answer is in (each day's own run then scores from the cache); False while batches
    are pending."""
    if not configs:
        return True
    done = await invoke([Collect(with_ledger(c, path)) for c in configs], path, origin=origin)
    return done.ready and done.status == "ok"


async def invoke(
    passes: list[Collect],
    path: Path,
    *,
    origin: str = "run file",
    legacy: Path | None = None,
    wait: bool = False,
    handle_signals: bool = False,
) -> Invocation:
    """One invocation over the ledger at ``path`` (the judges of ``passes[0]``'s run file):
    recover, poll, collect (a pass per item of ``passes``), submit; with ``wait``, again until
    every answer is in; ``legacy``: an earlier whole-table ledger drained first. With
    ``handle_signals``, under the engine's signal watcher."""
    config = passes[0].config
    ledger = Ledger(path)
    state = BatchState(ledger, batch_judges(config))
    try:
        async with anyio.create_task_group() as tg:
            invocation = Invocation(tg.cancel_scope, messages=state.messages)
            if handle_signals:
                tg.start_soon(watch_signals, invocation, config.limits.grace_period_s, tg.cancel_scope)
            invocation.ready = await _rounds(invocation, state, passes, origin, legacy, wait)
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise unwrap(group) from None
    finally:
        ledger.close()
    return invocation


async def _rounds(
    invocation: Invocation, state: BatchState, passes: list[Collect], origin: str, legacy_path: Path | None, wait: bool
) -> bool:
    """True when every answer is in (score now); False when batches are pending or a collect pass
    was stopped (``invocation.status``)."""
    config = passes[0].config
    pool = JudgePool.from_config(
        config.judges, state_dir=Path(config.state_dir), use_cache=True, budget_usd=config.limits.budget_usd
    )
    async with pool, contextlib.AsyncExitStack() as stack:
        await rounds.open_clients(state, pool, stack)
        legacy = rounds.legacy_state(legacy_path, state)
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
                misses = await _collect(invocation, passes, origin, pool, state)
                if misses and await rounds.refetch(state, pool):  # answers that left the cache: downloaded again
                    misses = await _collect(invocation, passes, origin, pool, state)
                if misses is None:  # a pass was stopped: it is read again next time
                    return False
                if rounds.all_answered(state, misses):
                    return True
            await rounds.submit(state, Path(config.state_dir))
            if not wait:
                return False
            rounds.progress(state)
            await anyio.sleep(rounds.wait_interval(state))


async def _collect(
    invocation: Invocation, passes: list[Collect], origin: str, pool: JudgePool, state: BatchState
) -> int | None:
    """Every pass over its input: the batch judges' cache misses into the ledger. The misses
    found; None when a pass was stopped (the ledger still says a pass is due)."""
    judges, endpoints = rounds.begin_collect(state, pool)
    for one in passes:
        status = await _collect_pass(invocation, one, origin, judges)
        if status != "ok":
            invocation.stop(status)
            return None
    return await rounds.end_collect(state, endpoints)


async def _collect_pass(invocation: Invocation, one: Collect, origin: str, pool: JudgePool) -> str:
    """A pipeline run over one input with the judge evaluators only, the batch judges in collect
    mode (their misses go to the ledger), into sinks that keep nothing; its status (ok, or how it
    was stopped). Over a published output (not ``fresh``), pairs it holds current are not asked for."""
    config = one.config
    built = build_evaluators(config, origin, judges=pool)
    evaluators = [ev for ev in built if ev.is_async and offers(ev, "resolve_judge")]
    stage = EvaluateStage(evaluators)
    if not one.fresh and one.shard is None and evaluators and await RunPlan(config).over_published():
        stage = LedgerEvaluate(evaluators, await load_ledger(config, evaluators))
    source = one.source() if one.source is not None else run_source(config, evaluators, shard=one.shard)
    discard = DiscardSink()
    pipeline = Pipeline(source, stage, discard, discard, run_options(config))
    if invocation.status != "ok":  # stopped before this pass began
        return invocation.status
    invocation.pipeline = pipeline
    try:
        async with source:
            await pipeline.run()
    finally:
        invocation.pipeline = None
    return pipeline.status


# --- reporting -------------------------------------------------------------------------------------


def pending_report(config: RunConfig, shard: tuple[int, int] | None, path: Path, messages: list[str]) -> RunReport:
    """Exit 75 (the verdict's ``pending``): the batch ids and counts; a ``pending`` summary where no
    whole output's summary is."""
    verdict = _verdict(config, shard, "pending")
    rows = rounds.batch_rows(path)
    ledger = Ledger(path)
    try:
        counts = ledger.counts()
    finally:
        ledger.close()
    summary: dict[str, Any] = {
        "run_id": config.run_id,
        "status": verdict.status,
        "exit_code": verdict.exit_code,
        "batches": rows,
        "lines": counts,
        "ledger": str(path),
    }
    add_batch_totals(summary, config)
    if shard is not None:
        summary["shard"] = {"index": shard[0], "count": shard[1]}
    out = [*verdict.messages, *messages]
    for r in rows:
        state = r["provider_state"] or r["state"]
        out.append(f"batch {r['id'] or r['ledger_id']} ({r['judge']}): {state}, {r['lines']:,} requests")
    waiting = counts.get("queued", 0) + counts.get("retry", 0)
    if waiting:
        out.append(f"{waiting:,} requests wait for room in the enqueued-token quota or a retry")
    summary["summary_path"] = write_pending_summary(config, shard, summary)
    return RunReport(verdict.exit_code, summary, verdict.status, out)


def stopped_report(
    config: RunConfig, shard: tuple[int, int] | None, path: Path, status: str, messages: list[str]
) -> RunReport:
    """An invocation a signal stopped (exit 130), or whose collect pass reached the budget with
    its fallback calls (exit 5): the verdict's words, the ledger kept, no batch cancelled."""
    verdict = _verdict(config, shard, status)
    rows = rounds.batch_rows(path)
    summary = {"status": verdict.status, "exit_code": verdict.exit_code, "batches": rows}
    kept = f"the ledger {path} is kept; no batch was cancelled ({len(rows):,} open at the provider)"
    return RunReport(verdict.exit_code, summary, verdict.status, [*verdict.messages, kept, *messages])


def _verdict(config: RunConfig, shard: tuple[int, int] | None, status: str) -> Verdict:
    """A run that stopped before it scored (a :data:`~assay.pipeline.verdict.STOPPED` status)."""
    return decide(Policy.from_config(config), RunStats(), status=status, final=shard is None)


def write_pending_summary(config: RunConfig, shard: tuple[int, int] | None, summary: dict[str, Any]) -> str | None:
    """Write the pending summary unless the summary there describes a whole output."""
    target = local_summary_path(config)
    if shard is not None:
        target = target.with_name(shard_summary_name(*shard))
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
    "Collect",
    "Invocation",
    "PhaseResult",
    "add_batch_totals",
    "batch_judges",
    "batch_phase",
    "has_batch_judges",
    "invoke",
    "ledger_path",
    "legacy_ledger_path",
    "pending_report",
    "shared_batch_phase",
    "stopped_report",
]
