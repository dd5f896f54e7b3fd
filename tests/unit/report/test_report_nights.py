"""The morning report read by a person: it leads with the last whole night, marks failed nights
(gaps, never zeros), shows the gates with threshold and value, and slices by a trace field."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from assay.report.command import choose_runs, report_command
from assay.report.load import read_run_info
from assay.report.slices import UNKNOWN, slice_by
from assay.report.store import expand_locations
from assay.report.trend import build_trend, short_labels
from tests.unit.report.synth import write_run, write_source


def failed_night(path: Path, started_at: str, message: str = "source: no such file or directory") -> None:
    """What a run over a partition that never landed leaves: a failed summary, no rows, no _SUCCESS."""
    path.mkdir(parents=True)
    summary = {
        "run_id": "x",
        "status": "failed",
        "exit_code": 2,
        "started_at": started_at,
        "counts": {"read": 0, "scored": 0, "dead_letters": 0},
        "evaluators": {},
        "error": {"type": "ConfigError", "message": message},
    }
    (path / "_SUMMARY.json").write_bytes(orjson.dumps(summary))


def gate_failed(path: Path) -> None:
    summary = json.loads((path / "_SUMMARY.json").read_text())
    summary.update(
        status="gate_failed",
        exit_code=3,
        gates=[
            {
                "key": "correctness",
                "check": "min_pass_rate",
                "threshold": 0.9,
                "actual": 0.52,
                "passed": False,
                "message": "gate correctness: pass rate 0.52 >= min_pass_rate 0.9: FAILED",
                "on": "point",
            },
            {
                "key": "tool_call_accuracy",
                "check": "min_mean",
                "threshold": 0.5,
                "actual": 0.8,
                "passed": True,
                "message": "ok",
                "on": "point",
            },
        ],
        messages=["gate correctness: pass rate 0.52 >= min_pass_rate 0.9: FAILED"],
    )
    (path / "_SUMMARY.json").write_text(json.dumps(summary))


@pytest.fixture
def nights(tmp_path: Path) -> Path:
    """Four nights: ok, gate_failed, ok, then a failed one (the partition never landed)."""
    for day in ("2026-11-20", "2026-11-21", "2026-11-22"):
        write_run(tmp_path / f"dt={day}", 60, salt=day, started_at=f"{day}T02:00:00+00:00")
    gate_failed(tmp_path / "dt=2026-11-21")
    failed_night(tmp_path / "dt=2026-11-23", "2026-11-23T02:00:00+00:00")
    return tmp_path


def test_the_report_leads_with_the_last_whole_night(nights: Path, capsys: pytest.CaptureFixture[str]) -> None:
    infos = sorted((read_run_info(x) for x in expand_locations([str(nights / "dt=*")])), key=lambda i: i.sort_key)
    current, previous, later = choose_runs(infos)
    assert current.label == "2026-11-22" and previous is not None and previous.label == "2026-11-21"
    assert [i.label for i in later] == ["2026-11-23"]
    report_command([str(nights / "dt=*")])
    out = capsys.readouterr().out
    assert out.startswith("! not whole, after the last whole night 2026-11-22: 2026-11-23: failed (exit 2)")
    assert "dt=2026-11-22  run" in out  # the headline is the last whole night, not the empty one


def test_failed_nights_are_gaps_with_their_status(nights: Path) -> None:
    trend = build_trend(expand_locations([str(nights / "dt=*")]))
    assert trend.statuses == ["ok", "gate_failed", "ok", "failed"]
    series = trend.series("correctness", "pass_rate")
    assert series[3] is None and all(v is not None for v in series[:3])  # a gap, not a zero
    assert short_labels(trend.labels) == ["11-20", "11-21", "11-22", "11-23"]
    assert short_labels(["2025-12-31", "2026-01-01"]) == ["2025-12-31", "2026-01-01"]


def test_gates_show_which_failed_with_threshold_and_value(nights: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("plotly")
    page = nights / "r.html"
    report_command([str(nights / "dt=2026-11-21")], html=page)
    out = capsys.readouterr().out
    gates_table = out[out.index("gates") :]
    assert "correctness" in gates_table and "min_pass_rate" in gates_table and "0.900" in gates_table
    assert "0.520" in gates_table and "FAILED" in gates_table
    html = page.read_text()
    assert 'id="gates"' in html and "Verdict and gates" in html and "gate_failed" in html
    section = html[html.index('id="gates"') : html.index("</section>", html.index('id="gates"'))]
    assert "0.900" in section and "0.520" in section and "badge fail" in section


def test_the_html_trend_shades_failed_nights_and_counts_start_at_zero(nights: Path) -> None:
    pytest.importorskip("plotly")
    from assay.report.charts import trend_chart, trend_counts_chart

    trend = build_trend(expand_locations([str(nights / "dt=*")]))
    fig = trend_chart(trend, "mean", "mean")
    assert list(fig.layout.yaxis.range) == [0, 1.02]
    assert len(fig.layout.shapes) == 2  # the gate_failed night and the failed one
    counts = trend_counts_chart(trend)
    assert counts.layout.yaxis.range[0] == 0 and counts.layout.yaxis2.rangemode == "tozero"
    page = nights / "t.html"
    report_command([str(nights / "dt=*")], html=page, quiet=True)
    html = page.read_text()
    assert 'id="notices"' in html and "2026-11-23: failed (exit 2)" in html
    assert html.index('id="notices"') < html.index('class="kpis"') < html.index('id="evaluators"')
    assert '<div class="scroll"><table>' in html  # wide tables scroll inside their box


def test_slice_by_a_metadata_field_read_back_from_the_sources(tmp_path: Path) -> None:
    source = write_source(tmp_path / "corpus.jsonl", 40)
    records = [json.loads(line) for line in source.read_text().splitlines()]
    for i, r in enumerate(records):
        r["metadata"] = {"model": "gpt-a" if i % 4 else "gpt-b"}
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    write_run(tmp_path / "out", 40, source=source)
    with (tmp_path / "out" / "part-00000-00000.jsonl").open("ab") as f:  # a row whose source is gone
        row = {
            "trace_id": "lost",
            "position": {"file": str(tmp_path / "gone.jsonl"), "line": 1},
            "results": {"correctness": {"key": "correctness", "score": 1.0, "error": None}},
        }
        f.write(orjson.dumps(row) + b"\n")
    slices = slice_by(str(tmp_path / "out"), "metadata.model")
    assert slices.rows == {"gpt-a": 30, "gpt-b": 10, UNKNOWN: 1}
    assert slices.ordered() == ["gpt-a", "gpt-b", UNKNOWN]
    assert slices.groups["gpt-b"]["correctness"].count == 10
