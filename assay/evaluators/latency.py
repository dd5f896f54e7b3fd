"""Latency from span timings, where the trace format has them (OTel, LangSmith, Langfuse).

The normalizers put ``trace.metadata["duration_s"]`` (the whole trace) and
``trace.metadata["spans"]`` (``[{"name", "type": llm|tool|chain|agent|other, "duration_s"}]``).

* ``per: trace`` — the trace's duration (else the sum of its top-level spans is not guessed:
  no duration, no score);
* ``per: llm`` / ``per: tool`` — the slowest span of that type (``aggregate: max``), or their
  total (``sum``) or mean (``mean``).

Score: with ``scoring: pass_fail`` 1.0 when the duration is at most ``max_s``, else 0.0; with
``normalized`` ``min(1, max_s / duration)`` (1.0 within budget, decaying beyond it). ``value`` is
the duration in seconds. A trace without timings gives an error result.

>>> from assay.traces.model import Trace
>>> Latency(max_s=2.0).score(Trace(metadata={"duration_s": 1.5})).score
1.0
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from assay.evaluators.base import Evaluator, EvaluatorParams
from assay.records import Result
from assay.traces.model import Trace

NO_TIMINGS = "no span timings in this format"


class LatencyParams(EvaluatorParams):
    max_s: float = Field(gt=0)
    """The latency budget in seconds."""
    per: Literal["trace", "llm", "tool"] = "trace"
    """What is timed: the whole trace, or its llm / tool spans."""
    aggregate: Literal["max", "sum", "mean"] = "max"
    """How llm/tool spans combine: the slowest, their total, or their mean."""
    scoring: Literal["pass_fail", "normalized"] = "pass_fail"
    """pass_fail: 1.0 within budget else 0.0; normalized: min(1, max_s / duration)."""


class Latency(Evaluator[LatencyParams]):
    """Latency within a budget, from the trace's span timings."""

    name: ClassVar[str] = "latency"
    reads_scenario: ClassVar[bool] = False
    description: ClassVar[str] = "Latency (whole trace, or llm/tool spans) within max_s, from span timings."
    Params = LatencyParams
    example: ClassVar[dict[str, Any]] = {"max_s": 30, "per": "trace"}

    def default_key(self) -> str:
        return "latency" if self.params.per == "trace" else f"latency:{self.params.per}"

    def duration(self, trace: Trace) -> tuple[float | None, int]:
        """The measured duration and how many spans it came from (None: no timings)."""
        md = trace.metadata or {}
        p = self.params
        if p.per == "trace":
            d = md.get("duration_s")
            return (float(d), 1) if isinstance(d, int | float) and not isinstance(d, bool) else (None, 0)
        spans = md.get("spans")
        if not isinstance(spans, list):
            return None, 0
        values = [
            float(s["duration_s"])
            for s in spans
            if isinstance(s, dict)
            and s.get("type") == p.per
            and isinstance(s.get("duration_s"), int | float)
            and not isinstance(s.get("duration_s"), bool)
        ]
        if not values:
            return None, 0
        if p.aggregate == "max":
            return max(values), len(values)
        total = sum(values)
        return (total if p.aggregate == "sum" else total / len(values)), len(values)

    def score(self, trace: Trace) -> Result:
        p = self.params
        d, n = self.duration(trace)
        if d is None:
            md = trace.metadata or {}
            if p.per != "trace" and isinstance(md.get("spans"), list):
                return Result(self.key, None, None, f"no {p.per} spans with timings")
            return Result.from_error(self.key, NO_TIMINGS)
        ok = d <= p.max_s
        score = (1.0 if ok else 0.0) if p.scoring == "pass_fail" else (1.0 if d <= 0 else min(1.0, p.max_s / d))
        what = "trace" if p.per == "trace" else f"{p.aggregate} of {n} {p.per} span(s)"
        return Result(self.key, score, d, f"{what}: {d:.3f}s, budget {p.max_s:g}s", {"spans": n, "max_s": p.max_s})


__all__ = ["NO_TIMINGS", "Latency", "LatencyParams"]
