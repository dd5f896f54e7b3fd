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
the run (:func:`assay.stages.sampling.prepare_sampling`; for local files its counts are kept under
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

import hashlib
import heapq
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import msgspec
import orjson
from pydantic import BaseModel, ConfigDict, Field, model_validator

from assay.traces.base import get_path
from assay.traces.model import Trace


class Sampled(Protocol):
    """What :func:`samplers_of` reads of an evaluator (``BaseEvaluator``)."""

    @property
    def key(self) -> str: ...

    sampler: Sampler | None


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

    def __init__(self, spec: SampleSpec, key: str, *, config: Any = None) -> None:
        self.spec = spec
        self.key = key
        self.config = config
        """The run whose input the counting pass reads (its ``RunConfig``, set by ``build_evaluators``)."""
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


def samplers_of(evaluators: Iterable[Sampled]) -> dict[str, Sampler]:
    """Result key → sampler of the evaluators that sample (``build_evaluators`` sets them from
    the run file's ``sample:``)."""
    return {ev.key: ev.sampler for ev in evaluators if ev.sampler is not None}


def unbounded_refusal(config: Any) -> str | None:
    """Why the run's sampling (``config``: its ``RunConfig``) cannot work with its source (strata
    minimums over a source without an end: Kafka with ``stop_at: never``), or None."""
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
