"""The latency evaluator on hand-built traces with the normalizers' timing metadata."""

from __future__ import annotations

import pytest

from assay.evaluators import Latency
from assay.registry import build_evaluator
from assay.traces.model import Trace

SPANS = [
    {"name": "plan", "type": "llm", "duration_s": 1.0},
    {"name": "search", "type": "tool", "duration_s": 4.0},
    {"name": "answer", "type": "llm", "duration_s": 3.0},
]


def trace(**md: object) -> Trace:
    return Trace(metadata=dict(md))


def test_whole_trace() -> None:
    r = Latency(max_s=10).score(trace(duration_s=8.5, spans=SPANS))
    assert (r.key, r.score, r.value) == ("latency", 1.0, 8.5)
    assert Latency(max_s=5).score(trace(duration_s=8.5)).score == 0.0
    assert Latency(max_s=5, scoring="normalized").score(trace(duration_s=10.0)).score == pytest.approx(0.5)


def test_per_span_type() -> None:
    t = trace(duration_s=8.5, spans=SPANS)
    r = Latency(max_s=2.5, per="llm").score(t)
    assert (r.key, r.value, r.score) == ("latency:llm", 3.0, 0.0)
    assert Latency(max_s=2.5, per="llm", aggregate="mean").score(t).score == 1.0
    assert Latency(max_s=5, per="llm", aggregate="sum").score(t).value == 4.0
    assert build_evaluator("latency", {"max_s": 5, "per": "tool"}).score(t).score == 1.0
    assert Latency(max_s=5, per="tool").score(trace(spans=[])).score is None


def test_no_timings_is_an_error() -> None:
    r = Latency(max_s=5).score(Trace())
    assert r.score is None and r.error == "no span timings in this format"
    assert Latency(max_s=5, per="llm").score(Trace()).error
