"""Evaluate stage: run every evaluator on a batch of traces.

Deterministic evaluators run inline on the batch (the hot path); evaluators with a batched path
(``score_traces``, e.g. embeddings) get the whole batch at once; async evaluators (judges, code
checkers) run as concurrent tasks, one per trace, inside a task group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

from assay.evaluators.base import BaseEvaluator
from assay.exceptions import BudgetExceeded
from assay.records import Result
from assay.traces.model import Trace


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
