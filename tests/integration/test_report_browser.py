"""The HTML report of 20,000-trace runs, opened in a real headless Chromium.

The page must load from a file with every host unresolvable (it is self-contained), draw every
chart (``data-charts-drawn`` equals ``data-charts-expected`` in the DOM Chromium dumps after the
scripts ran) with no script error or ``console.error`` (``data-js-errors="0"``), and screenshot.
Needs Debian's ``chromium`` (``apt-get install -y chromium``); skipped with that reason without it.
Set ``ASSAY_REPORT_SCREENSHOTS=DIR`` to keep the screenshots for a look.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.report.synth import write_run, write_source

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
N = 20_000

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="needs the chromium binary: apt-get install -y chromium"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.xdist_group("report_browser"),  # one worker: the three nights are written once
]


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three nights of 20,000 traces each under results/dt=…, over one source corpus."""
    root = tmp_path_factory.mktemp("report")
    source = write_source(root / "corpus.jsonl", N)
    for day, salt in (("2026-11-20", "c"), ("2026-11-21", "a"), ("2026-11-22", "b")):
        write_run(
            root / "results" / f"dt={day}", N, salt=salt, source=source, dead=120, started_at=f"{day}T02:00:00+00:00"
        )
    return root / "results"


def assay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "assay.cli", *args], capture_output=True, text=True, timeout=300)


def chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # nothing may come from the network
        f"--user-data-dir={profile}",
        "--virtual-time-budget=30000",
        "--enable-logging=stderr",
        "--v=0",
        *args,
        page.as_uri(),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240)


def check_page(page: Path, tmp_path: Path, name: str) -> dict[str, int]:
    """Load ``page``, return its render markers; screenshot it."""
    dom = chromium(page, tmp_path / f"profile-{name}", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    root = re.search(r"<html[^>]*>", dom.stdout)
    assert root is not None, dom.stdout[:500]
    marks = {k: int(v) for k, v in re.findall(r'data-(charts-drawn|charts-expected|js-errors)="(\d+)"', root.group(0))}
    console_errors = [line for line in dom.stderr.splitlines() if "CONSOLE" in line and "Uncaught" in line]
    assert not console_errors, console_errors
    shot = tmp_path / f"{name}.png"
    proc = chromium(page, tmp_path / f"profile-{name}-shot", f"--screenshot={shot}", "--window-size=1400,4000")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    keep = os.environ.get("ASSAY_REPORT_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
        shutil.copy(page, Path(keep) / page.name)
    return marks


def test_compared_report_renders_in_chromium(nights: Path, tmp_path: Path) -> None:
    page = tmp_path / "compare.html"
    proc = assay(
        "report", str(nights / "dt=2026-11-22"), "--compare", str(nights / "dt=2026-11-21"), "--html", str(page)
    )
    assert proc.returncode == 0, proc.stderr
    assert "deltas (regressions first)" in proc.stdout and "flipped verdicts" in proc.stdout
    text = page.read_text()
    assert f"{N:,}" in text and 'id="compare"' in text and "Regressions: passed before, not now" in text
    marks = check_page(page, tmp_path, "compare")
    assert marks["js-errors"] == 0
    assert marks["charts-expected"] >= 7 and marks["charts-drawn"] == marks["charts-expected"]


def test_trend_report_of_three_nights_renders_in_chromium(nights: Path, tmp_path: Path) -> None:
    page = tmp_path / "trend.html"
    proc = assay("report", str(nights / "dt=*"), "--html", str(page), "-q")
    assert proc.returncode == 0, proc.stderr
    text = page.read_text()
    assert 'id="trend"' in text and "Trend over 3 runs" in text
    marks = check_page(page, tmp_path, "trend")
    assert marks["js-errors"] == 0
    assert marks["charts-expected"] >= 10 and marks["charts-drawn"] == marks["charts-expected"]


@pytest.fixture(scope="module")
def month(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Thirty small nights: two partitions that never landed (failed, no rows), one the newest."""
    from tests.unit.report.test_report_nights import failed_night, gate_failed

    root = tmp_path_factory.mktemp("month") / "results"
    for d in range(30):
        day = f"2026-11-{d + 1:02d}"
        if d in (6, 29):
            failed_night(root / f"dt={day}", f"{day}T02:00:00+00:00")
            continue
        write_run(root / f"dt={day}", 40, salt=day, dead=d % 3, started_at=f"{day}T02:00:00+00:00")
        if d == 17:
            gate_failed(root / f"dt={day}")
    return root


@pytest.mark.parametrize("width", [1400, 800])
@pytest.mark.parametrize("nights", [1, 30])
def test_a_month_of_nights_renders_at_desktop_and_narrow_widths(
    month: Path, tmp_path: Path, nights: int, width: int
) -> None:
    page = tmp_path / f"month-{nights}.html"
    target = str(month / "dt=*") if nights == 30 else str(month / "dt=2026-11-18")
    proc = assay("report", target, "--html", str(page), "-q")
    assert proc.returncode == 0, proc.stderr
    text = page.read_text()
    if nights == 30:  # led by the last whole night, the failed newest one called out first
        assert "assay report — 2026-11-29" in text and 'id="notices"' in text and "2026-11-30: failed" in text
        assert "Trend over 30 runs" in text
    else:  # the gate-failed night on its own: which gate, its threshold and value
        assert 'id="gates"' in text and "gate_failed" in text
    dom = chromium(page, tmp_path / f"profile-{nights}-{width}", "--dump-dom", f"--window-size={width},900")
    root = re.search(r"<html[^>]*>", dom.stdout)
    assert root is not None
    marks = {k: int(v) for k, v in re.findall(r'data-(charts-drawn|charts-expected|js-errors)="(\d+)"', root.group(0))}
    assert marks["js-errors"] == 0 and marks["charts-drawn"] == marks["charts-expected"] > 0
    shot = tmp_path / f"month-{nights}-{width}.png"
    proc = chromium(
        page, tmp_path / f"profile-{nights}-{width}-shot", f"--screenshot={shot}", f"--window-size={width},2400"
    )
    assert proc.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get("ASSAY_REPORT_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)


def test_no_night_at_all_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    proc = assay("report", str(tmp_path / "results" / "dt=*"), "--html", str(tmp_path / "r.html"))
    assert proc.returncode == 2 and "no results directory matches" in proc.stderr
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_langsmith_export_run_shows_its_trajectories_in_chromium(tmp_path: Path, fmt: str) -> None:
    """A trace of a multi-row export is shown assembled from its rows (spread over three files):
    every worst trace's messages are in the page Chromium draws, none says "not readable"."""
    import json
    import random

    from tests.support.exports import langsmith_export, write_jsonl, write_parquet

    rows, expected = langsmith_export(12, seed=21)
    random.Random(22).shuffle(rows)
    (tmp_path / "export").mkdir()
    for i in range(3):
        write = write_parquet if fmt == "parquet" else write_jsonl
        write(tmp_path / "export" / f"runs-{i}.{fmt}", rows[i::3])
    run_file = tmp_path / "run.yaml"
    cfg = {
        "source": {"path": str(tmp_path / "export")},
        "evaluators": ["max_turns:max_turns=1"],  # every trace has two turns at least: all among the worst
        "sink": {"path": str(tmp_path / "out") + "/", "format": "parquet"},
        "state_dir": str(tmp_path / ".assay"),
    }
    run_file.write_text(json.dumps(cfg))
    assert assay("run", str(run_file), "-q").returncode == 0  # no gate: failing traces are results
    page = tmp_path / f"export-{fmt}.html"
    proc = assay("report", str(tmp_path / "out"), "--html", str(page), "-q")
    assert proc.returncode == 0, proc.stderr
    marks = check_page(page, tmp_path, f"export-{fmt}")
    assert marks["js-errors"] == 0
    dom = chromium(page, tmp_path / f"profile-export-{fmt}-dom", "--dump-dom").stdout
    assert "not readable from here" not in dom
    assert dom.count(" export rows in ") == len(expected)
    for tid, want in expected.items():
        assert f"{tid}</b>" in dom and want["final"] in dom
