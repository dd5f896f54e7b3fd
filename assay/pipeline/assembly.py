"""The assembly of a run from its run file: evaluators, the judge pool, the process's tuning and
how many worker processes ``--workers auto`` takes. Used by every writer and by ``--dry-run``."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.config import RunConfig
from assay.connectors.registry import input_size
from assay.evaluators.base import BaseEvaluator
from assay.evaluators.judge_base import require_judge
from assay.exceptions import AssayError, ConfigError
from assay.registry import build_evaluator
from assay.sampling import Sampler

if TYPE_CHECKING:
    from assay.judges.pool import JudgePool


def build_evaluators(
    config: RunConfig, origin: str = "run file", judges: JudgePool | None = None
) -> list[BaseEvaluator[Any]]:
    """Build every evaluator of the run file; errors name the evaluator's index and name.
    ``judges``: the run's judge pool (:func:`judge_pool`), handed to every evaluator
    (``use_judges``); None: in a run that declares no judge, the evaluators that call judges share
    one pool of their own (equal inline judge configs are one endpoint); else the evaluators are
    built to be looked at (``--dry-run``, ``validate``), not to call judges."""
    evaluators: list[BaseEvaluator[Any]] = []
    seen: dict[str, int] = {}
    for i, spec in enumerate(config.evaluators):
        try:
            ev = build_evaluator(spec.name, spec.params)
            require_judge(ev, len(config.judges))
        except ConfigError as exc:
            raise ConfigError(f"{origin}: evaluators[{i}] ({spec.name}): {exc}") from exc
        if ev.key in seen:
            raise ConfigError(
                f"{origin}: evaluators[{i}] ({spec.name}) writes result key {ev.key!r} like evaluators[{seen[ev.key]}];"
                " give one of them params.key"
            )
        seen[ev.key] = i
        ev.version = spec.version  # enters the identity (a stale result is scored again)
        if spec.sample is not None:  # the EvaluateStage scores only its sample
            ev.sampler = Sampler(spec.sample, ev.key, config=config)
        evaluators.append(ev)
    if judges is None and not config.judges and any(ev.calls_judges() for ev in evaluators):
        from assay.judges.pool import JudgePool  # lazy: a run that calls no judge loads no HTTP client

        judges = JudgePool({})
    if judges is not None:
        for i, ev in enumerate(evaluators):
            try:
                ev.use_judges(judges)
            except ConfigError as exc:
                raise ConfigError(f"{origin}: evaluators[{i}] ({config.evaluators[i].name}): {exc}") from exc
    return evaluators


@contextlib.asynccontextmanager
async def judge_pool(config: RunConfig, *, use_cache: bool, budget_scope: str | None = None) -> AsyncIterator[Any]:
    """Open the run's judge pool when the run file declares judges (judges are optional);
    ``budget_scope``: the budget is shared with the other processes of that scope."""
    if not config.judges:
        yield None
        return
    from assay.judges.pool import JudgePool

    pool = JudgePool.from_config(
        config.judges,
        state_dir=Path(config.state_dir),
        use_cache=use_cache,
        budget_usd=config.limits.budget_usd,
        budget_scope=budget_scope,
        budget_store=config.rate_store,
    )
    async with pool:
        yield pool


def sweep_leftovers(config: RunConfig) -> None:
    """What killed runs left behind that no checkpoint needs: code checks' temporary directories."""
    if any(spec.name in ("pyright", "mypy", "code_judge", "code_execution") for spec in config.evaluators):
        from assay.evaluators.code import sweep_stale_dirs

        sweep_stale_dirs()


def tune_gc() -> None:
    """Fewer young-generation collections: the hot path allocates many short-lived containers per
    record, and the default threshold (700) makes the collector run every couple of records.
    Memory stays bounded (the streams are bounded); long-lived startup objects are frozen (with
    no collection first: it cost 25 ms of start-up for little garbage)."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 50)


def auto_workers(config: RunConfig) -> int:
    """Processes for ``--workers auto``: one per core (at most 4) for large file inputs scored by
    deterministic evaluators only; 1 otherwise (judge rate limits are per run, and small inputs
    don't pay back the process start-up)."""
    if config.judges:
        return 1
    size = input_size(config.source)
    if size is None or size < AUTO_WORKERS_MIN_BYTES:
        return 1
    try:
        if any(build_evaluator(spec.name, spec.params).is_async for spec in config.evaluators):
            return 1
    except AssayError:
        return 1
    return max(1, min(os.cpu_count() or 1, 4))


AUTO_WORKERS_MIN_BYTES = 64 << 20


__all__ = ["AUTO_WORKERS_MIN_BYTES", "auto_workers", "build_evaluators", "judge_pool", "sweep_leftovers", "tune_gc"]
