"""The counting pass of a sampled run (see :mod:`assay.sampling`): read the whole input once when
an evaluator's ``sample:`` has ``min_per_stratum``, through the run's source connector and the
normalize stage; for local files the counts are kept under ``<state_dir>/sampling/``. Also the
summary's ``sampling`` block.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from assay.connectors.layout import write_atomic
from assay.exceptions import AssayError, ConfigError
from assay.sampling import Sampler, unbounded_refusal
from assay.traces.model import Trace

if TYPE_CHECKING:
    from assay.config import RunConfig


async def prepare_sampling(config: RunConfig, samplers: Mapping[str, Sampler]) -> None:
    """The counting pass: read the whole input once when a sampler has ``min_per_stratum``.

    Raises ConfigError for a source without an end (Kafka ``stop_at: never``)."""
    need = [s for s in samplers.values() if not s.ready]
    if not need:
        return
    if (why := unbounded_refusal(config)) is not None:
        raise ConfigError(why)
    cache = _counts_path(config, need)
    if cache is None:
        await _count(config, need)
        return
    cache.parent.mkdir(parents=True, exist_ok=True)
    with (cache.parent / f"{cache.stem}.lock").open("a+b") as lock:
        # one counting pass for every --workers process and every later attempt on the same input
        await anyio.to_thread.run_sync(fcntl.flock, lock.fileno(), fcntl.LOCK_EX, abandon_on_cancel=True)
        try:
            try:
                stored = orjson.loads(cache.read_bytes())
                for sampler in need:
                    sampler.load(stored[sampler.key])
                return
            except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError):
                pass  # none yet (or unreadable): count
            await _count(config, need)
            write_atomic(cache, orjson.dumps({s.key: s.counts() for s in need}), per_process=True)
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _counts_path(config: RunConfig, need: list[Sampler]) -> Path | None:
    """Where the counts of this input and these samplers are kept (local files only: their paths,
    sizes and modification times are part of the name, so a changed input is counted again)."""
    source = config.source
    paths = getattr(source, "paths", None)
    if getattr(source, "type", None) != "file" or not paths:
        return None
    from assay.connectors.local import STDIN, expand_paths

    try:
        files = expand_paths(paths)
        if STDIN in files:
            return None
        stats = [(os.path.abspath(f), st.st_size, st.st_mtime_ns) for f in files for st in [os.stat(f)]]
    except (OSError, AssayError):
        return None
    identity = {
        "files": stats,
        "source": source.model_dump(mode="json"),
        "normalize": config.normalize.model_dump(mode="json"),
        "samplers": sorted((s.key, s.spec.model_dump(mode="json")) for s in need),
    }
    digest = hashlib.sha256(orjson.dumps(identity, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]
    return Path(config.state_dir) / "sampling" / f"counts-{digest}.json"


async def _count(config: RunConfig, need: list[Sampler]) -> None:
    from assay.connectors.registry import SourceContext, build_source
    from assay.events import log_event
    from assay.stages.normalize import parse_envelope

    started = time.perf_counter()
    traces = 0
    source = build_source(config.source, SourceContext(batch_size=config.limits.batch_size, options=config.s3))
    async with source as src:  # nothing is acknowledged: the pass commits nothing
        async for batch in src.batches():
            for env in batch:
                trace = parse_envelope(env, config.normalize)
                if isinstance(trace, Trace):
                    traces += 1
                    for sampler in need:
                        sampler.count(trace)
    for sampler in need:
        sampler.finish()
    log_event(
        "sampling_counted",
        message=f"sampling: counted {traces:,} traces for the strata of {', '.join(s.key for s in need)}",
        traces=traces,
        strata={s.key: len(s.populations) for s in need},
        seconds=round(time.perf_counter() - started, 3),
    )


async def prepare_late(samplers: Iterable[Sampler]) -> None:
    """The counting pass for samplers still without one, from inside a stage whose source is
    already open (a batch-mode collect pass): a second reader of a file or S3 input is harmless; a
    second consumer of a Kafka group is not, so a Kafka input must be counted before it opens."""
    pending = [s for s in samplers if not s.ready]
    for config in {id(s.config): s.config for s in pending}.values():
        mine = {s.key: s for s in pending if s.config is config}
        if config is None or getattr(config.source, "type", None) == "kafka":
            key = next(iter(mine))
            raise ConfigError(
                f"evaluator {key!r}: sample.min_per_stratum needs its counting pass before the input is "
                "opened (prepare_sampling); here it cannot run"
            )
        await prepare_sampling(config, mine)


def sampling_summary(config: RunConfig, counts: Mapping[str, int]) -> dict[str, Any]:
    """The summary's ``sampling`` block: per sampled key, its spec and the traces it scored."""
    out: dict[str, Any] = {}
    for i, spec in enumerate(config.evaluators):
        if spec.sample is None:
            continue
        key = spec.params.get("key") if isinstance(spec.params.get("key"), str) else None
        if key is None:
            from assay.registry import build_evaluator

            try:
                key = build_evaluator(spec.name, spec.params).key
            except ConfigError:
                key = f"evaluators[{i}]"
        out[key] = {**spec.sample.model_dump(), "sampled": counts.get(key, 0)}
    return out
