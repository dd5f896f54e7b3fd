"""Timestamps and span timings read from trace formats (for the latency evaluator).

Where a format records timings (OTel spans, LangSmith runs, Langfuse observations, proxy logs),
its normalizer sets ``trace.metadata["duration_s"]`` (the whole trace, float seconds) and
``trace.metadata["spans"]``: a list of ``{"name": str, "type": "llm"|"tool"|"chain"|"agent"|"other",
"duration_s": float}`` in execution order.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from assay.traces.assemble import as_int
from assay.traces.model import Trace

SPAN_TYPES = frozenset({"llm", "tool", "chain", "agent", "other"})


def time_key(t: Any) -> float | None:
    """A sortable timestamp from epoch seconds/ms/ns or an ISO-8601 string (None if unknown)."""
    if isinstance(t, int | float) and not isinstance(t, bool):
        return float(t)
    if isinstance(t, str) and t:
        n = as_int(t)
        if n is not None:
            return float(n)
        try:
            return datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def seconds(t: Any) -> float | None:
    """A timestamp in epoch seconds: ISO-8601 text, or a number in s, ms, µs or ns (by magnitude)."""
    k = time_key(t)
    if k is None or (isinstance(t, str) and as_int(t) is None):
        return k
    for scale in (1.0, 1e3, 1e6, 1e9):
        if abs(k) < 1e11 * scale:
            return k / scale
    return k / 1e9


def seconds_between(start: Any, end: Any) -> float | None:
    """``end - start`` in seconds (None when either is unknown or the interval is negative)."""
    a, b = seconds(start), seconds(end)
    if a is None or b is None or b < a:
        return None
    return round(b - a, 6)


class Timings:
    """Collects spans; :meth:`apply` writes ``duration_s`` and ``spans`` into a trace's metadata."""

    __slots__ = ("first", "last", "spans")

    def __init__(self) -> None:
        self.spans: list[tuple[float, str, str, float]] = []
        self.first: float | None = None
        self.last: float | None = None

    def add(self, name: Any, kind: str, start: Any, end: Any) -> None:
        """One span (skipped when its start or end is unknown)."""
        a, b = seconds(start), seconds(end)
        if a is None or b is None or b < a:
            return
        self.first = a if self.first is None or a < self.first else self.first
        self.last = b if self.last is None or b > self.last else self.last
        self.spans.append((a, str(name) if name is not None else "", kind, round(b - a, 6)))

    def apply(self, trace: Trace) -> Trace:
        """Set ``duration_s`` (first start to last end) and ``spans`` (by start time)."""
        if self.first is not None and self.last is not None:
            self.spans.sort(key=lambda s: s[0])
            trace.metadata["duration_s"] = round(self.last - self.first, 6)
            trace.metadata["spans"] = [{"name": n, "type": k, "duration_s": d} for _, n, k, d in self.spans]
        return trace
