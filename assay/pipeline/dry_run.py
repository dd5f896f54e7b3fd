"""``--dry-run``: read and normalize every record, build the judge requests each judge evaluator
would send, and estimate calls, tokens and cost. Nothing is sent and nothing is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assay.config import RunConfig
from assay.connectors.registry import SourceContext, build_source
from assay.pipeline.run import build_evaluators
from assay.stages.normalize import parse_envelope
from assay.traces.model import Trace


async def dry_run(config: RunConfig, origin: str = "run file") -> dict[str, Any]:
    pool = None
    if config.judges:
        from assay.judges.pool import JudgePool

        pool = JudgePool.from_config(config.judges, state_dir=Path(config.state_dir), use_cache=False)
    evaluators = build_evaluators(config, origin)
    judged = [ev for ev in evaluators if hasattr(ev, "build_requests")]
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
                for ev in judged:
                    row = rows[ev.key]
                    for req in ev.build_requests(t):
                        row["calls"] += 1
                        if pool is not None and row["judge"] is not None:
                            est = pool.get(row["judge"]).estimate(req)
                            row["input_tokens"] += est.input_tokens
                            row["output_tokens"] += est.output_tokens
                            row["cost_usd"] += est.cost_usd
    return {
        "records": records,
        "dead_letters": dead,
        "evaluators": list(rows.values()),
        "calls": sum(r["calls"] for r in rows.values()),
        "input_tokens": sum(r["input_tokens"] for r in rows.values()),
        "output_tokens": sum(r["output_tokens"] for r in rows.values()),
        "cost_usd": sum(r["cost_usd"] for r in rows.values()),
    }


def _judge_name(ev: Any, config: RunConfig) -> str | None:
    judge = getattr(ev.params, "judge", None)
    if judge is None and len(config.judges) == 1:  # an omitted judge means the run's only judge
        return next(iter(config.judges))
    return judge if isinstance(judge, str) else None
