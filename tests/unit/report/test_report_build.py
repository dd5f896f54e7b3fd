"""One run's report from a results location: numbers equal the summary's, trajectories read back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from assay.report import build_run_report
from tests.unit.report.synth import KEYS, write_run, write_source

ROOT = Path(__file__).resolve().parents[3]


def test_numbers_equal_the_summary(tmp_path: Path) -> None:
    summary = write_run(tmp_path / "out", 600, dead=7)
    report = build_run_report(str(tmp_path / "out"), trajectories=False)
    assert report.from_rows and report.rows == 600 and list(report.keys) == sorted(KEYS)
    for key, expected in summary["evaluators"].items():
        agg = report.keys[key]
        assert (agg.count, agg.scored, agg.errors, agg.passed) == (
            expected["count"],
            expected["scored"],
            expected["errors"],
            expected["passed"],
        )
        assert agg.mean == pytest.approx(expected["mean"], abs=1e-6)
        assert agg.pass_rate == pytest.approx(expected["pass_rate"], abs=1e-6)
        assert sum(agg.bins) == agg.scored
    assert report.dead.total == 7 and report.rows_with_warnings == 7  # rows 0, 97, …, 582
    assert report.judges["standin"]["http_429"] == 25
    assert report.counts["read"] == 607


def test_numbers_of_a_real_run_equal_its_summary(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "assay.cli",
            "run",
            str(ROOT / "examples/quickstart/run.yaml"),
            "-q",
            "--set",
            f"sink.path={out}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    summary = orjson.loads((out / "_SUMMARY.json").read_bytes())
    report = build_run_report(str(out))
    assert report.rows == summary["counts"]["scored"]
    for key, expected in summary["evaluators"].items():
        agg = report.keys[key]
        assert (agg.count, agg.scored, agg.errors, agg.passed) == (
            expected["count"],
            expected["scored"],
            expected["errors"],
            expected["passed"],
        )
    # the real dead-letter file: one parse error, one normalize error (and warnings), all by reason
    reasons = {(g.stage, g.error_type) for g in report.dead.by_reason()}
    assert {("parse", "JSONDecodeError"), ("normalize", "NormalizationError")} <= reasons
    # the worst traces came with their trajectories from examples/quickstart/traces.jsonl
    assert report.worst and all(t.trajectory and t.trajectory.get("messages") for t in report.worst)


def test_worst_traces_are_bounded_and_carry_their_trajectory(tmp_path: Path) -> None:
    source = write_source(tmp_path / "corpus.jsonl", 300)
    write_run(tmp_path / "out", 300, source=source)
    report = build_run_report(str(tmp_path / "out"), worst=5)
    assert len(report.worst) == 5
    for t in report.worst:
        assert t.failed >= 2
        traj = t.trajectory
        assert traj is not None and traj["where"].endswith(f":{int(t.trace_id[1:]) + 1}")
        calls = [tc["name"] for m in traj["messages"] for tc in m["tool_calls"]]
        assert calls == ["search", "fetch"] and traj["final_output"] == f"answer {int(t.trace_id[1:])}"


def test_an_unreadable_source_leaves_results_only(tmp_path: Path) -> None:
    write_run(tmp_path / "out", 50)  # positions name gone.jsonl
    report = build_run_report(str(tmp_path / "out"), worst=3)
    assert len(report.worst) == 3 and all(t.trajectory is None for t in report.worst)


def test_a_source_record_of_another_trace_is_not_shown(tmp_path: Path) -> None:
    source = write_source(tmp_path / "corpus.jsonl", 50)
    lines = source.read_bytes().splitlines()
    source.write_bytes(b"\n".join([lines[1], lines[0], *lines[2:]]) + b"\n")  # lines 1 and 2 swapped
    write_run(tmp_path / "out", 50, source=source)
    report = build_run_report(str(tmp_path / "out"), worst=50)
    by_id = {t.trace_id: t for t in report.worst}
    for tid in ("t00000", "t00001"):
        if tid in by_id:
            assert by_id[tid].trajectory is None


def test_summary_only_location(tmp_path: Path) -> None:
    summary = write_run(tmp_path / "out", 40)
    for part in (tmp_path / "out").glob("part-*"):
        part.unlink()
    report = build_run_report(str(tmp_path / "out"))
    assert not report.from_rows and report.rows == 0
    assert report.keys["correctness"].pass_rate == pytest.approx(summary["evaluators"]["correctness"]["pass_rate"])
