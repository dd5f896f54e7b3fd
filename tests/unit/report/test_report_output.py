"""The terminal tables and the HTML page show the same numbers; the page is self-contained."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from assay.report import build_run_report, build_trend, compare_runs, render_html, write_html
from assay.report.command import report_command
from tests.unit.report.synth import write_run, write_source


@pytest.fixture
def nights(tmp_path: Path) -> list[Path]:
    source = write_source(tmp_path / "corpus.jsonl", 300)
    out = []
    for day, salt in (("2026-11-20", "c"), ("2026-11-21", "a"), ("2026-11-22", "b")):
        write_run(tmp_path / f"dt={day}", 300, salt=salt, source=source, started_at=f"{day}T02:00:00+00:00")
        out.append(tmp_path / f"dt={day}")
    return out


def test_terminal_report_shows_every_section(nights: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    report_command([str(nights[0].parent / "dt=*")])
    out = capsys.readouterr().out
    report = build_run_report(str(nights[-1]))
    for title in ("evaluators", "judges", "dead letters by reason", "worst traces", "deltas (regressions first)"):
        assert title in out
    assert "trend: pass rate over 3 runs" in out and "11-20" in out  # dates of one year: MM-DD
    for k in report.keys.values():
        assert f"{k.pass_rate:.3f}" in out and f"{k.mean:.3f}" in out
    assert "normalize" in out and "NormalizationError" in out and "JSONDecodeError" in out
    assert "pass → fail" in out


def test_html_has_every_section_and_no_network(nights: list[Path]) -> None:
    cmp = compare_runs(str(nights[-1]), str(nights[-2]))
    text = render_html(cmp.current, comparison=cmp, trend=build_trend([str(n) for n in nights]))
    for anchor in ("compare", "evaluators", "trend", "worst", "dead-letters", "judges"):
        assert f'id="{anchor}"' in text
    # self-contained: no external script, stylesheet or image; plotly.js inlined exactly once
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", text)
    assert text.count("Plotly.newPlot(") == 1 and text.count("plotly.js v") >= 1
    figures = re.findall(r'data-fig="(fig-\d+)"', text)
    assert len(figures) == 1 + 3 + 1 + 3 + 1 + 1  # compare, overview+3 histograms, trend ×3, dead letters, judges
    for fig in figures:
        blob = re.search(rf'<script type="application/json" id="{fig}">(.*?)</script>', text, re.S)
        assert blob is not None and "data" in orjson.loads(blob.group(1))
    # user text is escaped: the comment's <script> never becomes markup
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    report = cmp.current
    for k in report.keys.values():
        assert f"{100 * k.pass_rate:.1f} %" in text
    assert "search" in text and "answer " in text  # a trajectory was shown


def test_write_html_replaces_the_file(tmp_path: Path, nights: list[Path]) -> None:
    out = tmp_path / "report.html"
    out.write_text("old")
    write_html(out, build_run_report(str(nights[0]), worst=2))
    assert out.read_text().startswith("<!DOCTYPE html>") and not list(tmp_path.glob("*.tmp"))


def test_report_command_writes_html_quietly(
    nights: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    report_command([str(nights[1])], compare=str(nights[0]), html=out, quiet=True)
    printed = capsys.readouterr().out
    assert "HTML report" in printed and "evaluators" not in printed
    assert 'id="compare"' in out.read_text()
