"""Evaluate a repeatable sample: an evaluator's ``sample:`` spec picks the traces it scores.

```yaml
evaluators:
  - name: llm_judge
    params: {prompt: correctness, judge: gpt}
    sample: {rate: 0.02, by: trace_id, seed: 0, strata: metadata.model, min_per_stratum: 50}
```

A trace is in an evaluator's sample when ``u < rate``, where ``u`` in [0, 1) is a hash of (the
seed, the evaluator's result key, the trace's ``by`` value): the same traces on every rerun, every
shard and every worker count, and independent samples for two evaluators. ``by`` is ``trace_id``
(the default) or a dotted path into the trace (``metadata.session_id``: a whole session in or out).

With ``strata`` (a dotted path, e.g. ``metadata.model``) and ``min_per_stratum: k``, each stratum
also gets its k traces of smallest ``u`` (all of them when it has fewer), so a rare model is never
left out. That needs the size of each stratum: a counting pass reads the whole input once before
the run (:func:`prepare_sampling`; for local files its counts are kept under
``<state_dir>/sampling/`` for the other workers and later attempts on the same files); a source
without an end (Kafka with ``stop_at: never``) is refused. A sampled result carries
``metadata.sample_weight`` = 1 / its stratum's inclusion probability (``max(rate, k /
N_stratum)``), from which the summary's means and intervals are weighted (:mod:`assay.stats`). An
unsampled trace gets no result for that key: not an error, not a score.

>>> s = Sampler(SampleSpec(rate=0.5, seed=1), "correctness")
>>> from assay.traces.model import Trace
>>> [s.weight(Trace(id=f"t{i}")) for i in range(6)]
[None, None, None, 2.0, None, 2.0]
"""

from __future__ import annotations

import fcntl
import hashlib
import heapq
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
import orjson
from pydantic import BaseModel, ConfigDict, Field, model_validator

from assay.exceptions import AssayError, ConfigError
from assay.traces.base import get_path
from assay.traces.model import Trace

if TYPE_CHECKING:
    from assay.config import RunConfig
    from assay.evaluators.base import BaseEvaluator

MISSING_STRATUM = "(missing)"


class SampleSpec(BaseModel):
    """An evaluator's ``sample:`` spec (see the module doc)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rate: float = Field(gt=0.0, le=1.0)
    """Share of traces scored (each trace independently, by its hash)."""
    by: str = "trace_id"
    """What is hashed: ``trace_id``, or a dotted path into the trace (``metadata.session_id``)."""
    seed: int | str = 0
    """Changes which traces are picked (the same seed picks the same traces)."""
    strata: str | None = None
    """A dotted path (``metadata.model``) whose values are the strata."""
    min_per_stratum: int = Field(default=0, ge=0)
    """Each stratum gets at least this many traces (all when it has fewer); needs ``strata``."""

    @model_validator(mode="after")
    def _strata_for_minimum(self) -> SampleSpec:
        if self.min_per_stratum and not self.strata:
            raise ValueError("min_per_stratum needs strata (a dotted path such as metadata.model)")
        return self

    @property
    def needs_counts(self) -> bool:
        """Whether the stratum sizes must be counted before the run."""
        return bool(self.strata and self.min_per_stratum and self.rate < 1.0)


def trace_value(trace: Trace, path: str) -> Any:
    """The value at a dotted path of a trace (``trace_id`` is the trace's id), None when absent.

    >>> trace_value(Trace(id="a", metadata={"m": {"n": 1}}), "metadata.m.n")
    1
    """
    if path in ("trace_id", "id"):
        return trace.id
    head, _, rest = path.partition(".")
    value = getattr(trace, head, None) if head in Trace.__struct_fields__ else None
    if rest:
        if isinstance(value, msgspec.Struct):
            value = msgspec.to_builtins(value)
        value = get_path(value, rest)
    return value


def _text(value: Any) -> str:
    if value is None:
        return MISSING_STRATUM
    if isinstance(value, str):
        return value
    return orjson.dumps(value, default=str, option=orjson.OPT_SORT_KEYS).decode()


class Sampler:
    """Which traces one evaluator scores, and each sampled result's weight."""

    def __init__(self, spec: SampleSpec, key: str, *, config: RunConfig | None = None) -> None:
        self.spec = spec
        self.key = key
        self.config = config
        """The run whose input the counting pass reads (set by ``build_evaluators``)."""
        self._prefix = f"{spec.seed}\x1f{key}\x1f".encode()
        self.populations: dict[str, int] = {}
        """Traces per stratum (after the counting pass)."""
        self._smallest: dict[str, list[float]] = {}
        self._cutoffs: dict[str, float] | None = None

    def __repr__(self) -> str:
        return f"Sampler({self.key!r}, {self.spec!r})"

    def unit(self, trace: Trace) -> float:
        """The trace's uniform draw in [0, 1) for this evaluator (a hash: the same every run)."""
        value = trace_value(trace, self.spec.by)
        if value is None:  # no id: the trace's own content stands for it
            raw = msgspec.json.encode(trace)
        else:
            raw = _text(value).encode()
        digest = hashlib.blake2b(self._prefix + raw, digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2.0**64

    def stratum(self, trace: Trace) -> str:
        return _text(trace_value(trace, self.spec.strata)) if self.spec.strata else ""

    # --- the counting pass ----------------------------------------------------------------------

    def count(self, trace: Trace) -> None:
        """Count one trace of the input (its stratum, and its draw among the k smallest)."""
        s = self.stratum(trace)
        self.populations[s] = self.populations.get(s, 0) + 1
        heap = self._smallest.setdefault(s, [])  # a max-heap (negated) of the k smallest draws
        u = self.unit(trace)
        k = self.spec.min_per_stratum
        if len(heap) < k:
            heapq.heappush(heap, -u)
        elif k and -heap[0] > u:
            heapq.heapreplace(heap, -u)

    @property
    def ready(self) -> bool:
        """Whether :meth:`weight` can answer (no counting pass needed, or it has run)."""
        return not self.spec.needs_counts or self._cutoffs is not None

    def finish(self) -> None:
        """After the counting pass: each stratum's cut-off (its k-th smallest draw)."""
        k = self.spec.min_per_stratum
        self._cutoffs = {s: (1.0 if self.populations[s] <= k else -heap[0]) for s, heap in self._smallest.items()}
        self._smallest = {}

    def counts(self) -> dict[str, Any]:
        """What the counting pass found (for the counts cache)."""
        return {"populations": self.populations, "cutoffs": self._cutoffs}

    def load(self, counts: Mapping[str, Any]) -> None:
        """Take the counting pass's result from :meth:`counts` (of the same input and spec)."""
        self.populations = {str(k): int(v) for k, v in counts["populations"].items()}
        self._cutoffs = {str(k): float(v) for k, v in counts["cutoffs"].items()}
        self._smallest = {}

    def probability(self, stratum: str) -> float:
        """The inclusion probability of a trace of ``stratum``."""
        rate = self.spec.rate
        n = self.populations.get(stratum)
        if not self.spec.needs_counts or not n:
            return rate
        return max(rate, min(1.0, self.spec.min_per_stratum / n))

    # --- membership -----------------------------------------------------------------------------

    def weight(self, trace: Trace) -> float | None:
        """None when the trace is not in the sample, else its weight (1 / inclusion probability)."""
        u = self.unit(trace)
        if not self.spec.needs_counts:
            return 1.0 / self.spec.rate if u < self.spec.rate else None
        if self._cutoffs is None:
            raise RuntimeError(f"sampler {self.key!r}: the counting pass has not run (prepare_sampling)")
        s = self.stratum(trace)
        cutoff = self._cutoffs.get(s)
        if cutoff is None:  # a stratum the counting pass did not see (the input changed): the rate alone
            return 1.0 / self.spec.rate if u < self.spec.rate else None
        if u < self.spec.rate or u <= cutoff:
            return 1.0 / self.probability(s)
        return None


def samplers_of(evaluators: Iterable[BaseEvaluator[Any]]) -> dict[str, Sampler]:
    """Result key → sampler of the evaluators that sample (``build_evaluators`` sets them from
    the run file's ``sample:``)."""
    return {ev.key: ev.sampler for ev in evaluators if ev.sampler is not None}


def unbounded_refusal(config: RunConfig) -> str | None:
    """Why the run's sampling cannot work with its source (strata minimums over a source without
    an end: Kafka with ``stop_at: never``), or None."""
    if getattr(config.source, "stop_at", None) != "never":
        return None
    for i, spec in enumerate(config.evaluators):
        if spec.sample is not None and spec.sample.needs_counts:
            return (
                f"evaluators[{i}] ({spec.name}): sample.min_per_stratum needs a counting pass over the whole "
                "input, and a Kafka source with stop_at: never has no end; use stop_at: end, or sample "
                "without min_per_stratum (rate alone)"
            )
    return None


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
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(orjson.dumps({s.key: s.counts() for s in need}))
            os.replace(tmp, cache)
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
    from assay.observability.logs import log_event
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
