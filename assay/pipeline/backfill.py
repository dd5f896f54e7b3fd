"""The engine's half of ``assay backfill``: a day's plan (what its published output already holds,
what is left to score and what that costs), the verdict of a day with nothing left, the verdict
over all days, and ``_BACKFILL.json``.

A day's plan reads no judge cache: the published output is the ledger
(:mod:`assay.pipeline.ledger`). Its pairs are read column by column and anti-joined with the
input's trace ids in Arrow (:func:`~assay.pipeline.ledger.plan_pairs`); the judge calls, tokens and
cost are the dry run's estimate (:mod:`assay.pipeline.dry_run`) over the pairs left to score only,
after each evaluator's sample. ``assay/backfill_command.py`` runs the days.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio.to_thread
import orjson

from assay.config import RunConfig
from assay.connectors import registry
from assay.connectors.layout import SUMMARIES
from assay.evaluators.base import offers
from assay.exceptions import EXIT_OK, ConfigError
from assay.paths import safe_join
from assay.pipeline.assembly import build_evaluators, judge_pool
from assay.pipeline.dry_run import dry_run
from assay.pipeline.ledger import (
    PairCounts,
    current_ids,
    expected_identities,
    plan_pairs,
    published_pairs,
    published_summary,
)
from assay.pipeline.merge import open_results
from assay.pipeline.outputs import RunPlan
from assay.pipeline.summary import RunStats
from assay.pipeline.verdict import STOPPED, WHOLE_STATUSES, Policy, decide

BACKFILL = "_BACKFILL.json"

__all__ = [
    "BACKFILL",
    "DayPlan",
    "backfill_location",
    "day_verdict_from_summary",
    "days_between",
    "plan_day",
    "shared_ledger_path",
    "worst",
    "write_backfill",
]


def days_between(start: str, end: str) -> list[str]:
    """Every day from ``start`` to ``end``, both included (``YYYY-MM-DD``).

    >>> days_between("2026-02-27", "2026-03-01")
    ['2026-02-27', '2026-02-28', '2026-03-01']
    """
    try:
        a, b = dt.date.fromisoformat(start), dt.date.fromisoformat(end)
    except ValueError as exc:
        raise ConfigError(f"--from/--to: expected YYYY-MM-DD: {exc}") from exc
    if b < a:
        raise ConfigError(f"--to {end} is before --from {start}")
    return [(a + dt.timedelta(days=i)).isoformat() for i in range((b - a).days + 1)]


@dataclass
class DayPlan:
    """What a backfill does for one day, before anything is spent."""

    ds: str
    published: bool
    """A whole output of the day is there (its results are the ledger)."""
    pairs: PairCounts
    estimate: dict[str, Any] = field(default_factory=dict)
    """The dry run's estimate of the pairs to score: calls, tokens, cost (real-time and batch)."""

    @property
    def nothing_to_do(self) -> bool:
        return self.published and self.pairs.nothing_to_do

    def to_dict(self) -> dict[str, Any]:
        est = self.estimate
        return {
            "ds": self.ds,
            "published": self.published,
            **self.pairs.to_dict(),
            "calls": int(est.get("calls", 0)),
            "calls_per_key": {r["evaluator"]: r["calls"] for r in est.get("evaluators", [])},
            "input_tokens": int(est.get("input_tokens", 0)),
            "output_tokens": int(est.get("output_tokens", 0)),
            "cost_usd": round(float(est.get("cost_usd", 0.0)), 6),
            "realtime_cost_usd": round(float(est.get("realtime_cost_usd", 0.0)), 6),
            "batch_cost_usd": round(float(est.get("batch_cost_usd", 0.0)), 6),
            "dead_letters": int(est.get("dead_letters", 0)),
        }


async def plan_day(config: RunConfig, origin: str = "run file") -> DayPlan:
    """One day's plan: its published pairs against its input, and the estimate of what is left."""
    import pyarrow as pa

    published = await RunPlan(config).over_published()
    pairs = await anyio.to_thread.run_sync(published_pairs, config) if published else None
    async with judge_pool(config, use_cache=False) as pool:
        evaluators = build_evaluators(config, origin, judges=pool)
        expected = expected_identities(evaluators)
    judged = [ev.key for ev in evaluators if offers(ev, "build_requests")]
    # the day's current pairs of judged keys: no call for them
    done = current_ids(pairs, expected, judged) if pairs is not None else {}
    ids: list[str | None] = []
    estimate = await dry_run(
        config,
        origin,
        wanted=lambda key, tid: tid not in done.get(key, ()),
        seen=ids.append,
        fresh=True,
    )
    empty = pa.table({"trace_id": pa.array([], pa.string()), "key": pa.array([], pa.string()), "identity": []})
    counts = await anyio.to_thread.run_sync(
        plan_pairs, pairs if pairs is not None else empty, pa.array(ids, pa.string()), expected
    )
    return DayPlan(_day_of(config), published, counts, estimate)


def _day_of(config: RunConfig) -> str:
    return str(getattr(config.sink, "ds", None) or config.ds or "")


def day_verdict_from_summary(config: RunConfig) -> dict[str, Any]:
    """A day with nothing left to score: its verdict under the run file's gates now, from the
    counts its published summary holds (nothing is read again, nothing is written)."""
    summary = published_summary(config) or {}
    stats = RunStats.from_dict(summary) if summary else RunStats()
    verdict = decide(Policy.from_config(config), stats, status="ok")
    return {
        "status": verdict.status,
        "exit_code": verdict.exit_code,
        "messages": list(verdict.messages),
        "summary": summary,
    }


_ORDER = [*STOPPED, "dead_letters", "gate_failed", "ok"]


def worst(days: list[dict[str, Any]]) -> tuple[str, int]:
    """The status and exit code over all days: the worst day's (a stopped day first, in the order
    :func:`~assay.pipeline.verdict.combine_statuses` uses, then dead letters, a failed gate, ok)."""
    if not days:
        return "ok", EXIT_OK
    ranked = sorted(days, key=lambda d: _ORDER.index(d["status"]) if d["status"] in _ORDER else 0)
    return str(ranked[0]["status"]), int(ranked[0]["exit_code"])


def backfill_location(configs: list[RunConfig]) -> tuple[Any, str]:
    """Where ``_BACKFILL.json`` goes: the folder holding the days' summaries (a Delta table's
    ``_summaries/``, the parent of ``dt=D/`` folders, or an ``s3://`` prefix), as a results store
    and a description."""
    locations = [_summary_dir(c) for c in configs]
    if len(configs) > 1 and len(set(locations)) == 1 and configs[0].sink.type != "delta":
        raise ConfigError(
            f"the sink writes every day to the same place ({locations[0]}): a backfill needs a sink path"
            " that changes with the day (e.g. out/dt={{ ds }}/) or a Delta table"
        )
    parent = _common_parent(locations)
    return open_results(parent, configs[0].s3), parent


def _summary_dir(config: RunConfig) -> str:
    if config.sink.type == "delta":
        from assay.connectors.delta import table_url

        return f"{table_url(str(getattr(config.sink, 'path', '')))}/{SUMMARIES}/ds={_day_of(config)}"
    beside = registry.summary_path(config.sink)
    if beside is not None:
        return str(beside.parent)
    return str(getattr(config.sink, "path", "") or "").rstrip("/")


def _common_parent(locations: list[str]) -> str:
    split = [loc.rstrip("/").split("/") for loc in locations]
    common: list[str] = []
    for parts in zip(*split, strict=False):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    if len(locations) == 1 or len(common) == len(split[0]):
        common = split[0][:-1]  # one day: beside its folder
    return "/".join(common) or "."


def write_backfill(fs: Any, data: dict[str, Any]) -> None:
    """Write ``_BACKFILL.json`` atomically (temp file and rename; an object store: one put)."""
    fs.write_bytes(BACKFILL, orjson.dumps(data, option=orjson.OPT_INDENT_2, default=str))


def whole(status: str) -> bool:
    return status in WHOLE_STATUSES


def shared_ledger_path(config: RunConfig, run_file: str, start: str, end: str) -> Path:
    """``<state_dir>/batches/backfill-<digest>.sqlite``: the one batch ledger of the days of one
    backfill (the run file and the range name it, so the same command finds it again)."""
    digest = hashlib.sha256(f"{Path(run_file).resolve()}\x1f{start}\x1f{end}".encode()).hexdigest()[:16]
    return safe_join(Path(config.state_dir), "batches", f"backfill-{digest}.sqlite")
