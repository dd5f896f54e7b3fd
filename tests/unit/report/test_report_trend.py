"""Each evaluator over the nights."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.report import build_trend, expand_locations
from tests.unit.report.synth import write_run


def test_runs_ordered_by_partition_with_their_numbers(tmp_path: Path) -> None:
    summaries = {}
    for day, salt in (("2026-11-22", "b"), ("2026-11-20", "c"), ("2026-11-21", "a")):
        summaries[day] = write_run(tmp_path / f"dt={day}", 200, salt=salt, dead=3)
    trend = build_trend(expand_locations([str(tmp_path / "dt=*")]))
    assert trend.labels == ["2026-11-20", "2026-11-21", "2026-11-22"]
    assert trend.keys == ["correctness", "tool_call_accuracy", "trajectory_strict_match"]
    expected = [summaries[d]["evaluators"]["correctness"]["pass_rate"] for d in trend.labels]
    assert trend.series("correctness", "pass_rate") == pytest.approx(expected)
    assert trend.count_series("dead_letters") == [3, 3, 3]
    assert all(c > 0 for c in trend.cost_series())


def test_runs_without_partition_order_by_start_and_rows_fill_a_missing_summary(tmp_path: Path) -> None:
    write_run(tmp_path / "late", 50, started_at="2026-11-23T01:00:00+00:00")
    early = write_run(tmp_path / "early", 50, started_at="2026-11-21T01:00:00+00:00", summary=False)
    trend = build_trend([str(tmp_path / "late"), str(tmp_path / "early")])
    assert [p.info.location.rsplit("/", 1)[-1] for p in trend.points] == ["early", "late"]
    assert trend.series("correctness", "mean")[0] == pytest.approx(early["evaluators"]["correctness"]["mean"])
    assert trend.series("missing", "mean") == [None, None]
