"""A run in this process (or one ``--shard i/N`` of it): prepare the outputs, run one writer,
conclude: the summary of the whole output, its verdict (:mod:`assay.pipeline.verdict`) and the
published outputs. ``--workers N`` runs its writers in processes (:mod:`assay.pipeline.shard`) and
concludes the same way. With batch judges, their batches are submitted and collected first (exit
75 while pending).

The pieces: :mod:`~assay.pipeline.assembly` builds what a run file describes,
:mod:`~assay.pipeline.writer` runs one writer, :mod:`~assay.pipeline.stopping` stops it on a
signal, :mod:`~assay.pipeline.outputs` prepares and publishes the outputs; the exit codes live
beside the exceptions (:mod:`assay.exceptions`).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from assay.config import RunConfig, expanded_values, redact_summary, stable_run_id
from assay.exceptions import AssayError
from assay.pipeline.assembly import sweep_leftovers, tune_gc
from assay.pipeline.batch_run import batch_phase, has_batch_judges
from assay.pipeline.outputs import RunPlan, build_summary
from assay.pipeline.progress import ProgressSink
from assay.pipeline.summary import RunStats
from assay.pipeline.verdict import Policy, RunReport, budget_message, combine_statuses, decide
from assay.pipeline.writer import WriterResult, run_writer


async def execute(
    config: RunConfig,
    *,
    origin: str = "run file",
    fresh: bool = False,
    shard: tuple[int, int] | None = None,
    use_cache: bool = True,
    progress: ProgressSink | None = None,
    handle_signals: bool = False,
    wait: bool = False,
) -> RunReport:
    """Run the whole job in this process (or one ``--shard i/N`` of it) and publish its outputs.

    Starts over or resumes (see :mod:`assay.pipeline.outputs`), runs one writer, and publishes the
    summary of the whole output: ``_SUCCESS`` only when the output is whole and the run passed.
    With batch judges, their batches are submitted and collected first (exit 75 while pending;
    ``wait``: poll until done)."""
    tune_gc()
    started_at = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    config = config.model_copy(update={"run_id": config.run_id or stable_run_id(config)})

    if has_batch_judges(config):
        phase = await batch_phase(
            config,
            origin=origin,
            shard=shard,
            use_cache=use_cache,
            wait=wait,
            handle_signals=handle_signals,
            fresh=fresh,
        )
        if phase.report is not None:
            return phase.report
        assert phase.config is not None
        config = phase.config
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
    """The summary of the whole output, its verdict, and the published outputs."""
    config = plan.config
    stats, judges = plan.totals(results)
    status = combine_statuses(r.status for r in results)
    error = next((r.error for r in results if r.error is not None), None)
    read_now = sum(int(r.extra.get("read_now", 0)) for r in results)
    summary = build_summary(config, stats, wall_s, str(config.run_id), started_at, judges, read_now=read_now)
    summary.update(extra)
    from assay.judges.batch.rounds import add_batch_totals, has_batch_judges

    if has_batch_judges(config):
        add_batch_totals(summary, config)
    if plan.shard is not None:  # one slice of the run: `assay merge` judges the whole
        summary["shard"] = {"index": plan.shard[0], "count": plan.shard[1]}
    pairs = pair_counts(plan, results, stats)
    summary["pairs"] = {k: pairs[k] for k in ("kept", "scored", "dropped")}
    unchanged = None
    if plan.ledger and status == "ok" and error is None:
        unchanged = await plan.keep_unchanged(summary, pairs)
    elif not plan.ledger:
        kept = await plan.keep_if_nothing_new(summary, stats, status=status, error=error)
        if kept is not None:  # read nothing beside a whole output: that output stays as it was
            return RunReport(0, summary, "nothing_new", [kept], None)
    note = None
    if status == "budget":
        spent = float(summary.get("totals", {}).get("cost_usd") or 0.0)
        spent_now = sum(float(r.extra.get("spent_now_usd", 0.0)) for r in results)
        note = budget_message(config.limits.budget_usd, spent, spent_now)
    verdict = decide(
        Policy.from_config(config), stats, status=status, error=error, final=plan.shard is None, budget_note=note
    )
    verdict.record(summary)
    redact_summary(summary, expanded_values(config))
    report = RunReport(verdict.exit_code, summary, verdict.status, verdict.messages, error)
    if unchanged is not None:  # the verdict of what is there; nothing is written
        summary["unchanged"] = True
        summary["summary_path"] = None
        report.messages = [unchanged, *verdict.messages]
        return report
    try:
        where = await plan.publish(summary, success=verdict.whole, completed=status == "ok")
    except AssayError as exc:  # the output could not be published: the run failed, whatever the verdict
        report.error = report.error or exc
        report.exit_code = exc.exit_code  # nothing was published: retryable, whatever the gates said
        report.status = summary["status"] = "failed"
        summary["exit_code"] = report.exit_code
        where = None
    report.summary["summary_path"] = where
    return report


def pair_counts(plan: RunPlan, results: list[WriterResult], stats: RunStats) -> dict[str, int]:
    """``kept``, ``scored`` and ``dropped`` (trace, key) pairs of the whole run, and ``changed``
    rows: the writers' ledger counts over a published output, else every row's keys scored."""
    if not plan.ledger:
        keys = len(plan.config.evaluators)
        return {"kept": 0, "scored": int(stats.counts["scored"]) * keys, "dropped": 0, "changed": 1}
    out = {"kept": 0, "scored": 0, "dropped": 0, "changed": 0, "existing": 0}
    total = 0
    for r in results:
        got = r.extra.get("pairs") or {}
        for k in ("kept", "scored", "changed", "existing"):
            out[k] += int(got.get(k, 0))
        total = max(total, int(got.get("existing", 0)) + int(got.get("dropped", 0)))
    out["dropped"] = max(0, total - out["existing"])  # each writer read the whole ledger
    return out


__all__ = ["RunReport", "conclude", "execute", "pair_counts"]
