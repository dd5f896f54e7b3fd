"""Evaluate stage: run every evaluator on a batch of traces.

Deterministic evaluators run inline on the batch (the hot path); evaluators with a batched path
(``score_traces``, e.g. embeddings) get the whole batch at once; async evaluators (judges, code
checkers) run as concurrent tasks, one per trace, inside a task group, so a batch finishes when
all its traces have, and a slow trace holds up only its own batch: the engine keeps
:meth:`EvaluateStage.wanted_batches_in_flight` batches in flight so the judges' in-flight caps
stay busy while memory stays bounded (at most that many batches of traces).

Failures that say the run cannot go on propagate instead of becoming error results: a
:class:`~assay.exceptions.ConfigError` (an unknown judge, a rejected key:
:class:`~assay.exceptions.JudgeAuthError`) and a :class:`~assay.exceptions.ConnectorError` (a judge
that cannot be reached: :class:`~assay.exceptions.JudgeUnavailableError`) fail the engine's task group.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import anyio

from assay.evaluators.base import BaseEvaluator
from assay.exceptions import BudgetExceeded, ConfigError, ConnectorError
from assay.records import Result
from assay.traces.model import Trace

#: In-flight calls assumed for an async evaluator that is not a judge (code checkers, custom ones).
OTHER_ASYNC_IN_FLIGHT = 16
#: Traces kept in flight per judge slot: twice the cap, so traces waiting for the slowest of their
#: batch never leave the judge idle.
TRACES_PER_SLOT = 2
#: Bound on batches in flight (memory: at most this many batches of traces).
MAX_BATCHES_IN_FLIGHT = 64


class EvaluateStage:
    """Runs a fixed set of evaluators; one instance is shared by every worker of a run."""

    def __init__(self, evaluators: Sequence[BaseEvaluator[Any]]) -> None:
        self.evaluators = list(evaluators)
        self.batched = [e for e in evaluators if not e.is_async and hasattr(e, "score_traces")]
        self.inline = [e for e in evaluators if not e.is_async and e not in self.batched]
        self.async_ = [e for e in evaluators if e.is_async]

    @property
    def has_async(self) -> bool:
        return bool(self.async_)

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
        the in-flight ceilings of the judges in use (plus one batch being filled), at least 2 and
        at most MAX_BATCHES_IN_FLIGHT. Resolves the judges, so an unknown judge name raises
        ConfigError here at the latest.

        >>> EvaluateStage([]).wanted_batches_in_flight(256)
        1
        """
        if not self.async_:
            return 1
        slots = 0
        seen: set[int] = set()
        for ev in self.async_:
            resolve = getattr(ev, "resolve_judge", None)
            if resolve is None:
                slots += OTHER_ASYNC_IN_FLIGHT
                continue
            judge = resolve()
            if id(judge) in seen:
                continue
            seen.add(id(judge))
            limits = getattr(judge, "limits", None)
            cap = getattr(limits, "cap", None)
            slots += int(getattr(cap, "ceiling", OTHER_ASYNC_IN_FLIGHT))
        wanted = math.ceil(TRACES_PER_SLOT * slots / max(batch_size, 1)) + 1
        return max(2, min(wanted, MAX_BATCHES_IN_FLIGHT))

    def score_one(self, trace: Trace) -> dict[str, Result]:
        """Run the inline evaluators on one trace."""
        results: dict[str, Result] = {}
        for ev in self.inline:
            try:
                for r in ev.score_trace(trace):
                    results[r.key] = r
            except Exception as exc:  # an evaluator bug must not stop the run: it's an error result
                results[ev.key] = Result.from_error(ev.key, exc)
        return results

    async def process(self, traces: Sequence[Trace]) -> tuple[list[dict[str, Result]], list[bool]]:
        """Results per trace, and per trace whether it completed (False: abandoned for the budget)."""
        results = [self.score_one(trace) for trace in traces]
        for ev in self.batched:  # one call per batch (e.g. one encode), off the event loop when it can be
            try:
                if hasattr(ev, "ascore_traces"):
                    per_trace = await ev.ascore_traces(list(traces))
                else:
                    per_trace = ev.score_traces(list(traces))
            except Exception as exc:
                per_trace = [[Result.from_error(ev.key, exc)] for _ in traces]
            for res, rs in zip(results, per_trace, strict=True):
                for r in rs:
                    res[r.key] = r
        done = [True] * len(traces)
        if not self.async_ or not traces:
            return results, done
        budget_hit = False

        async def one(i: int, trace: Trace) -> None:
            nonlocal budget_hit
            for ev in self.async_:
                try:
                    for r in await ev.ascore_trace(trace):
                        results[i][r.key] = r
                except BudgetExceeded:
                    budget_hit = True
                    done[i] = False
                    return
                except (ConfigError, ConnectorError):
                    raise  # a bad key, an unknown judge, an unreachable endpoint: the run stops
                except Exception as exc:
                    results[i][ev.key] = Result.from_error(ev.key, exc)

        async with anyio.create_task_group() as tg:
            for i, trace in enumerate(traces):
                tg.start_soon(one, i, trace)
        if budget_hit:
            raise _PartialBatch(results, done)
        return results, done


class _PartialBatch(Exception):
    """Some traces of the batch were abandoned because the budget was reached."""

    def __init__(self, results: list[dict[str, Result]], done: list[bool]) -> None:
        super().__init__("budget reached")
        self.results = results
        self.done = done


PartialBatch = _PartialBatch
