"""Evaluate stage: run every evaluator on a batch of traces.

Deterministic evaluators run inline on the batch (the hot path); evaluators with a batched path
(``score_traces``, e.g. embeddings) get the whole batch at once; async evaluators (judges, code
checkers) run as concurrent tasks, one per trace, inside a task group, so a batch finishes when
all its traces have, and a slow trace holds up only its own batch: the engine keeps
:meth:`EvaluateStage.wanted_batches_in_flight` batches in flight so the judges' in-flight caps
stay busy while memory stays bounded (at most that many batches of traces).

An evaluator with a ``sample:`` spec (:mod:`assay.sampling`) scores only the traces of its sample:
the others get no result for its key, and each sampled result carries ``metadata.sample_weight``.

Failures that say the run cannot go on propagate instead of becoming error results: a
:class:`~assay.exceptions.ConfigError` (an unknown judge, a rejected key:
:class:`~assay.exceptions.JudgeAuthError`) and a :class:`~assay.exceptions.ConnectorError` (a judge
that cannot be reached: :class:`~assay.exceptions.JudgeUnavailableError`) fail the engine's task group.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from assay.evaluators.base import BaseEvaluator, offers
from assay.exceptions import BudgetExceeded, ConfigError, ConnectorError
from assay.judges.base import judge_capacity
from assay.records import Result
from assay.traces.model import Trace

if TYPE_CHECKING:
    from assay.sampling import Sampler

#: In-flight calls assumed for an async evaluator that is not a judge (code checkers, custom ones).
OTHER_ASYNC_IN_FLIGHT = 16
#: Traces kept in flight per judge slot: twice the cap, so traces waiting for the slowest of their
#: batch never leave the judge idle.
TRACES_PER_SLOT = 2
#: Bound on batches in flight (memory: at most this many batches of traces).
MAX_BATCHES_IN_FLIGHT = 64
#: A batch's async evaluations are started this many at a time, with a turn of the event loop in
#: between: each start renders a prompt (about 0.2 ms), and a whole batch of 256 started at once
#: held the loop for 50 ms, so a paced judge's sender woke that late and its slots were lost (at
#: 100 req/s, 5 slots per batch: 2 % of the rate).
SPAWN_CHUNK = 16


class EvaluateStage:
    """Runs a fixed set of evaluators; one instance is shared by every worker of a run."""

    def __init__(self, evaluators: Sequence[BaseEvaluator[Any]], samplers: Mapping[str, Sampler] | None = None) -> None:
        self.evaluators = list(evaluators)
        if samplers is None:
            samplers = {ev.key: ev.sampler for ev in self.evaluators if ev.sampler is not None}
        self.samplers = dict(samplers)
        """Result key of an evaluator → its sampler (default: the evaluators' own ``sampler``)."""
        self._counting: anyio.Lock | None = None
        self._spawning: anyio.Lock | None = None
        """Held while a batch's evaluations are started: batches enter the judges' line in order."""
        self.batched = [e for e in evaluators if not e.is_async and offers(e, "score_traces")]
        self.inline = [e for e in evaluators if not e.is_async and e not in self.batched]
        self.async_ = [e for e in evaluators if e.is_async]

    @property
    def weighs(self) -> bool:
        """Whether :meth:`sample_weights` decides per trace which evaluators run (a sample, or a
        subclass that skips results a published output already holds)."""
        return bool(self.samplers)

    @property
    def has_async(self) -> bool:
        return bool(self.async_)

    @property
    def reads_text(self) -> bool:
        """Whether any evaluator reads message text (see ``BaseEvaluator.reads_text``)."""
        return any(e.reads_text for e in self.evaluators)

    @property
    def reads_scenario(self) -> bool:
        """Whether any evaluator reads ``trace.scenario`` (see ``BaseEvaluator.reads_scenario``)."""
        return any(e.reads_scenario for e in self.evaluators)

    @property
    def streaming(self) -> bool:
        """Only inline evaluators: each trace can be scored (and dropped) as soon as it is read."""
        return not self.async_ and not self.batched

    def wanted_batches_in_flight(self, batch_size: int) -> int:
        """How many batches the engine should process at once so the judges stay busy.

        1 without async evaluators. Otherwise enough batches to hold TRACES_PER_SLOT × the sum of
        the capacities of the judges in use (:func:`~assay.judges.base.judge_capacity`), plus one
        batch being filled; at least 2 and at most MAX_BATCHES_IN_FLIGHT. Resolves the judges, so
        an unknown judge name raises ConfigError here at the latest.

        >>> EvaluateStage([]).wanted_batches_in_flight(256)
        1
        """
        if not self.async_:
            return 1
        slots = 0
        seen: set[int] = set()
        for ev in self.async_:
            if not offers(ev, "resolve_judge"):
                slots += OTHER_ASYNC_IN_FLIGHT
                continue
            judge = ev.resolve_judge()
            if id(judge) in seen:
                continue
            seen.add(id(judge))
            slots += judge_capacity(judge)
        wanted = math.ceil(TRACES_PER_SLOT * slots / max(batch_size, 1)) + 1
        return max(2, min(wanted, MAX_BATCHES_IN_FLIGHT))

    async def _count_late(self) -> None:
        """The counting pass of strata minimums, once, when no one ran it before the source opened."""
        from assay.stages.sampling import prepare_late

        if self._counting is None:
            self._counting = anyio.Lock()
        async with self._counting:  # concurrent workers wait for the one pass
            await prepare_late(self.samplers.values())

    def sample_weights(self, trace: Trace) -> dict[str, float | None]:
        """Per sampled evaluator key: the trace's weight, or None when it is not in the sample."""
        return {key: sampler.weight(trace) for key, sampler in self.samplers.items()}

    def score_one(self, trace: Trace, weights: Mapping[str, float | None] | None = None) -> dict[str, Result]:
        """Run the inline evaluators on one trace (those whose sample it is in)."""
        if weights is None:
            weights = self.sample_weights(trace) if self.weighs else {}
        results: dict[str, Result] = {}
        for ev in self.inline:
            weight = weights.get(ev.key, 1.0)
            if weight is None:
                continue
            try:
                rs = ev.score_trace(trace)
            except Exception as exc:  # an evaluator bug must not stop the run: it's an error result
                rs = [Result.from_error(ev.key, exc)]
            for r in rs:
                results[r.key] = _weighted(r, weight, ev.key in weights)
        return results

    async def process(self, traces: Sequence[Trace]) -> tuple[list[dict[str, Result]], list[bool]]:
        """Results per trace, and per trace whether it completed (False: abandoned for the budget)."""
        if self.samplers and not all(s.ready for s in self.samplers.values()):
            await self._count_late()
        weights = [self.sample_weights(trace) for trace in traces] if self.weighs else [{} for _ in traces]
        results = [self.score_one(trace, w) for trace, w in zip(traces, weights, strict=True)]
        for ev in self.batched:  # one call per batch (e.g. one encode), off the event loop when it can be
            chosen = [i for i, w in enumerate(weights) if w.get(ev.key, 1.0) is not None]
            if not chosen:
                continue
            subset = [traces[i] for i in chosen]
            try:
                if offers(ev, "ascore_traces"):
                    per_trace = await ev.ascore_traces(subset)
                else:
                    per_trace = ev.score_traces(subset)
            except (ConfigError, ConnectorError):
                raise  # a wrong key or a dead endpoint (a hosted embedding model): the run stops
            except Exception as exc:
                per_trace = [[Result.from_error(ev.key, exc)] for _ in subset]
            for i, rs in zip(chosen, per_trace, strict=True):
                for r in rs:
                    results[i][r.key] = _weighted(r, weights[i].get(ev.key), ev.key in weights[i])
        done = [True] * len(traces)
        if not self.async_ or not traces:
            return results, done
        budget_hit = False

        async def one(i: int, trace: Trace) -> None:
            nonlocal budget_hit
            for ev in self.async_:
                sampled = ev.key in weights[i]
                weight = weights[i].get(ev.key, 1.0)
                if weight is None:
                    continue
                try:
                    for r in await ev.ascore_trace(trace):
                        results[i][r.key] = _weighted(r, weight, sampled)
                except BudgetExceeded:
                    budget_hit = True
                    done[i] = False
                    return
                except (ConfigError, ConnectorError):
                    raise  # a bad key, an unknown judge, an unreachable endpoint: the run stops
                except Exception as exc:
                    results[i][ev.key] = _weighted(Result.from_error(ev.key, exc), weight, sampled)

        if self._spawning is None:
            self._spawning = anyio.Lock()
        # One batch at a time (the lock is fair): started a chunk at a time, two workers' batches
        # would interleave in the judges' line, finish together, and leave the judge idle while
        # every worker fetched its next batch (measured: a second without a send).
        async with anyio.create_task_group() as tg, self._spawning:
            for i, trace in enumerate(traces):
                tg.start_soon(one, i, trace)
                if i % SPAWN_CHUNK == SPAWN_CHUNK - 1:
                    await anyio.lowlevel.checkpoint()
        if budget_hit:
            raise _PartialBatch(results, done)
        return results, done


def _weighted(result: Result, weight: float | None, sampled: bool) -> Result:
    """``result`` with its sampling weight in ``metadata.sample_weight`` (sampled evaluators only)."""
    if sampled and weight is not None:
        result.metadata["sample_weight"] = weight
    return result


class _PartialBatch(Exception):
    """Some traces of the batch were abandoned because the budget was reached."""

    def __init__(self, results: list[dict[str, Result]], done: list[bool]) -> None:
        super().__init__("budget reached")
        self.results = results
        self.done = done


PartialBatch = _PartialBatch
