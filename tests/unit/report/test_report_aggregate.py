"""Streaming aggregates: per key, worst traces, dead letters."""

from __future__ import annotations

from typing import Any

from assay.report.aggregate import BINS, DeadLetterAggregate, KeyAggregate, WorstTraces, verdict_of


def result(score: float | None, error: str | None = None, **meta: Any) -> dict[str, Any]:
    return {"score": score, "error": error, "comment": f"score {score}", "metadata": meta or None}


def test_verdicts() -> None:
    assert verdict_of(result(0.5), 0.5) == "pass"
    assert verdict_of(result(0.49), 0.5) == "fail"
    assert verdict_of(result(None), 0.5) == "unscored"
    assert verdict_of(result(1.0, error="boom"), 0.5) == "error"


def test_key_aggregate_counts_mean_pass_rate_histogram_and_usage() -> None:
    agg = KeyAggregate("k", threshold=0.7)
    for s in (0.0, 0.25, 0.7, 1.0, 1.0):
        agg.add(result(s, usage={"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.5}))
    agg.add(result(None, error="timeout"))
    agg.add(result(None))
    assert (agg.count, agg.scored, agg.errors, agg.unscored, agg.passed) == (7, 5, 1, 1, 3)
    assert agg.mean == 2.95 / 5 and agg.pass_rate == 3 / 5 and agg.error_rate == 1 / 7
    assert sum(agg.bins) == 5 and agg.bins[0] == 1 and agg.bins[BINS - 1] == 2 and agg.bins[int(0.7 * BINS)] == 1
    assert (agg.input_tokens, agg.output_tokens, agg.cost_usd) == (50, 10, 2.5)
    assert agg.error_messages == {"timeout": 1}


def test_error_messages_stay_bounded() -> None:
    agg = KeyAggregate("k")
    for i in range(100):
        agg.add(result(None, error=f"error number {i}"))
    assert len(agg.error_messages) <= 9 and sum(agg.error_messages.values()) == 100


def test_from_summary_round_trips_the_numbers() -> None:
    agg = KeyAggregate.from_summary(
        "k", {"count": 10, "scored": 8, "errors": 2, "sum": 6.0, "passed": 5, "threshold": 0.6}
    )
    assert agg.mean == 0.75 and agg.pass_rate == 5 / 8 and agg.threshold == 0.6


def row(i: int, scores: list[float | None]) -> tuple[dict[str, Any], dict[str, str]]:
    results = {f"k{j}": result(s) if s is not None else result(None, error="x") for j, s in enumerate(scores)}
    return {"trace_id": f"t{i}", "results": results}, {k: verdict_of(r, 0.5) for k, r in results.items()}


def test_worst_traces_keep_the_most_failing_then_lowest_mean_bounded() -> None:
    worst = WorstTraces(limit=3)
    worst.add(*row(0, [1.0, 1.0]))  # passing: never kept
    worst.add(*row(1, [0.4, 1.0]))
    worst.add(*row(2, [0.0, 0.1]))
    worst.add(*row(3, [0.2, 0.3]))
    worst.add(*row(4, [None, 0.0]))  # an error counts as failing
    worst.add(*row(5, [0.45, 0.9]))
    got = worst.result()
    assert [t.trace_id for t in got] == ["t4", "t2", "t3"]
    assert got[0].results["k0"]["verdict"] == "error" and got[0].failed == 2


def test_dead_letters_group_by_stage_and_error_type() -> None:
    dead = DeadLetterAggregate(samples=2)
    for i in range(7):
        stage, kind = ("parse", "JSONDecodeError") if i % 3 == 0 else ("normalize", "NormalizationError")
        dead.add(
            {"stage": stage, "error_type": kind, "error": f"e{i}", "file": "f.jsonl", "line": i, "raw": "x" * 1000}
        )
    dead.add({"stage": "normalize", "error_type": "InvalidToolArguments", "severity": "warning", "error": "w"})
    groups = dead.by_reason()
    assert [(g.stage, g.error_type, g.count) for g in groups] == [
        ("normalize", "NormalizationError", 4),
        ("parse", "JSONDecodeError", 3),
        ("normalize", "InvalidToolArguments", 1),
    ]
    assert groups[1].example == "e0" and groups[1].where == "f.jsonl:0"
    assert dead.total == 8 and dead.severity == {"error": 7, "warning": 1}
    assert len(dead.samples) == 2 and len(dead.samples[0]["raw"]) <= 400
