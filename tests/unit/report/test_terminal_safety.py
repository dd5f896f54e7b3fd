"""Trace content printed to a terminal (``assay normalize``, ``assay report --worst``, errors)
cannot act on it: control characters are shown as escapes, and never read as rich markup."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from assay.cli import app
from assay.report.terminal import safe

TITLE = "\x1b]0;PWNED\x07"  # sets the window title
CLEAR = "\x1b[2J\x1b[H"  # clears the screen
HOSTILE_ID = f"t[/bold]{TITLE}"
CONTROL = [chr(c) for c in (*range(0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))] + ["\u202e", "\u2066"]


def _records(tmp_path: Path) -> Path:
    rows = [
        {
            "id": HOSTILE_ID,
            "inputs": f"q{CLEAR}",
            "outputs": f"evil {CLEAR}{TITLE} answer\r\bX",
            "reference_outputs": "good",
        },
        {"id": "ok", "inputs": "q", "outputs": "good", "reference_outputs": "good"},
    ]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _assert_inert(text: str) -> None:
    assert not any(c in text for c in CONTROL), repr(text)


def test_safe_escapes_every_control_but_newline_and_tab() -> None:
    assert safe("".join(CONTROL)).isprintable()
    assert safe(TITLE) == "\\x1b]0;PWNED\\x07" and safe("a\u202eb") == "a\\u202eb"
    assert safe("line one\n\tline two é ✓") == "line one\n\tline two é ✓"
    assert safe(5) == "5"


def test_normalize_prints_trace_content_inert(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["normalize", str(_records(tmp_path))])
    assert res.exit_code == 0, res.output
    _assert_inert(res.output)
    assert "id=t[/bold]\\x1b]0;PWNED\\x07" in res.output  # shown as it is, markup included


def test_report_worst_prints_trace_content_inert(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["score", str(_records(tmp_path)), "-e", "exact_match", "-o", str(out), "-q"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["report", str(out), "--worst", "5"])
    assert res.exit_code == 0, res.output
    _assert_inert(res.output)
    assert "t[/bold]\\x1b]0;PWNED\\x07" in res.output and "worst traces" in res.output
