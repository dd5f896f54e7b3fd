"""``--dry-run``: read and normalize every record, build the judge requests each judge evaluator
would send, and estimate calls, tokens and cost. Nothing is sent and nothing is written.

For a ``mode: batch`` judge the row also has ``mode: batch``, its cost at the batch price
(``cost_usd``, with the real-time price beside it in ``realtime_cost_usd``) and the number of
batches the requests pack into (``max_requests`` and ``max_bytes``)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
import orjson

from assay.config import RunConfig
from assay.connectors.registry import SourceContext, build_source
from assay.evaluators.base import offers
from assay.pipeline.assembly import build_evaluators, judge_pool
from assay.pipeline.ledger import current_ids, expected_identities, published_pairs
from assay.pipeline.outputs import RunPlan
from assay.sampling import samplers_of
from assay.stages.normalize import parse_envelope
from assay.stages.sampling import prepare_sampling
from assay.traces.model import Trace


async def dry_run(
    config: RunConfig,
    origin: str = "run file",
    *,
    wanted: Callable[[str, str | None], bool] | None = None,
    seen: Callable[[str | None], None] | None = None,
    fresh: bool = True,
) -> dict[str, Any]:
    """The estimate of a run (see the module doc). ``wanted(key, trace_id)``: whether the pair is
    to be scored (a backfill's preview: not when the published output holds it current);
    ``seen(trace_id)``: called for every trace read. Not ``fresh`` (``assay run --dry-run``):
    over a published output, its current results are kept and not estimated."""
    kept = 0
    if wanted is None and not fresh and await RunPlan(config).over_published():
        wanted, kept = await _current(config, origin)
    pool = None
    if config.judges:
        from assay.judges.pool import JudgePool

        pool = JudgePool.from_config(config.judges, state_dir=Path(config.state_dir), use_cache=False)
    evaluators = build_evaluators(config, origin)
    samplers = samplers_of(evaluators)
    await prepare_sampling(config, samplers)
    judged = [ev for ev in evaluators if offers(ev, "build_requests")]
    rows: dict[str, dict[str, Any]] = {
        ev.key: {
            "evaluator": ev.key,
            "judge": _judge_name(ev, config),
            "calls": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "cost_usd": 0.0,
        }
        for ev in judged
    }
    records = dead = 0
    no_call: dict[str, Counter[str]] = {ev.key: Counter() for ev in judged}
    options = config.normalize
    # one place builds connectors; nothing is acknowledged, so a dry run commits nothing
    source = build_source(config.source, SourceContext(batch_size=config.limits.batch_size, options=config.s3))
    async with source as src:
        async for batch in src.batches():
            for env in batch:
                t = parse_envelope(env, options)
                if not isinstance(t, Trace):
                    dead += 1
                    continue
                records += 1
                if seen is not None:
                    seen(t.id)
                for ev in judged:
                    if wanted is not None and not wanted(ev.key, t.id):
                        continue  # its result is current: kept, no call
                    if ev.key in samplers and samplers[ev.key].weight(t) is None:
                        continue  # not in this evaluator's sample: no call
                    row = rows[ev.key]
                    requests = ev.build_requests(t)
                    if not requests:
                        no_call[ev.key][getattr(ev, "no_call_reason", None) or "nothing to judge in this trace"] += 1
                    for req in requests:
                        row["calls"] += 1
                        if pool is not None and row["judge"] is not None:
                            endpoint = pool.get(row["judge"])
                            est = endpoint.estimate(req)
                            row["input_tokens"] += est.input_tokens
                            row["output_tokens"] += est.output_tokens
                            row["cost_usd"] += est.cost_usd
                            if endpoint.config.mode == "batch":
                                row["bytes"] = row.get("bytes", 0) + len(orjson.dumps(endpoint.body_and_key(req)[0]))
    if pool is not None:
        _batch_estimates(rows, pool)
    notes = _notes(config, evaluators, judged, rows, no_call, records, dead, pool)
    if kept:
        notes.insert(0, f"{kept:,} judged results of the published output are current: kept, not estimated")
    return {
        "records": records,
        "dead_letters": dead,
        "evaluators": list(rows.values()),
        "calls": sum(r["calls"] for r in rows.values()),
        "input_tokens": sum(r["input_tokens"] for r in rows.values()),
        "output_tokens": sum(r["output_tokens"] for r in rows.values()),
        "cost_usd": sum(r["cost_usd"] for r in rows.values()),
        "realtime_cost_usd": sum(r.get("realtime_cost_usd", r["cost_usd"]) for r in rows.values()),
        "batch_cost_usd": sum(r.get("batch_cost_usd", r["cost_usd"]) for r in rows.values()),
        "batches": sum(r.get("batches", 0) for r in rows.values()),
        "notes": notes,
    }


async def _current(config: RunConfig, origin: str) -> tuple[Callable[[str, str | None], bool], int]:
    """Which pairs the published output holds current (the ledger), and how many of them."""
    pairs = await anyio.to_thread.run_sync(published_pairs, config)
    async with judge_pool(config, use_cache=False) as pool:
        evaluators = build_evaluators(config, origin, judges=pool)
        expected = expected_identities(evaluators)
    done = current_ids(pairs, expected, [ev.key for ev in evaluators if offers(ev, "build_requests")])
    return (lambda key, tid: tid not in done.get(key, ())), sum(len(v) for v in done.values())


def _notes(
    config: RunConfig,
    evaluators: list[Any],
    judged: list[Any],
    rows: dict[str, dict[str, Any]],
    no_call: dict[str, Counter[str]],
    records: int,
    dead: int,
    pool: Any,
) -> list[str]:
    """Why the estimate shows no calls or no cost, where it does (an estimate of 0 calls or $0
    never goes without a reason)."""
    notes: list[str] = []
    if not judged:
        names = ", ".join(ev.key for ev in evaluators)
        notes.append(f"no evaluator calls a judge ({names}): a dry run estimates judge calls only")
    if records == 0:
        notes.append(f"no record was read from the source ({dead} dead letters)")
    for key, row in rows.items():
        skipped = no_call[key]
        if skipped:
            reason = skipped.most_common(1)[0][0]
            more = f" (and {len(skipped) - 1} other reasons)" if len(skipped) > 1 else ""
            notes.append(f"{key}: no call for {sum(skipped.values())} of {records} records: {reason}{more}")
        if row["calls"] and not row["cost_usd"]:
            name = row["judge"]
            if name is None or pool is None or name not in pool.endpoints:
                notes.append(
                    f"{key}: tokens and cost are not estimated for a judge given inline (declare it under judges:)"
                )
            else:
                cfg = pool.get(name).config
                if not cfg.input_price_per_mtok and not cfg.output_price_per_mtok:
                    notes.append(
                        f"{key}: $0 because judge {name!r} has no prices "
                        "(set input_price_per_mtok and output_price_per_mtok)"
                    )
    return notes


#: Bytes a batch line adds around its body (custom_id, method, url).
LINE_OVERHEAD = 150


def _batch_estimates(rows: dict[str, dict[str, Any]], pool: Any) -> None:
    """Rows of batch judges: cost at the batch price, the real-time price beside it, batches."""
    for row in rows.values():
        if row["judge"] is None or row["judge"] not in pool.endpoints:
            continue
        cfg = pool.get(row["judge"]).config
        row["batch_cost_usd"] = row["cost_usd"] * cfg.batch.discount  # what the batch price would be
        if cfg.mode != "batch":
            continue
        max_requests, max_bytes = cfg.batch.limits(pool.get(row["judge"]).provider.batch_limits or (0, 0))
        size = row.pop("bytes", 0) + LINE_OVERHEAD * row["calls"]
        row["mode"] = "batch"
        row["realtime_cost_usd"] = row["cost_usd"]
        row["cost_usd"] = row["cost_usd"] * cfg.batch.discount
        row["batches"] = max(math.ceil(row["calls"] / max_requests), math.ceil(size / max_bytes)) if row["calls"] else 0


def _judge_name(ev: Any, config: RunConfig) -> str | None:
    judge = getattr(ev.params, "judge", None)
    if judge is None and len(config.judges) == 1:  # an omitted judge means the run's only judge
        return next(iter(config.judges))
    return judge if isinstance(judge, str) else None
