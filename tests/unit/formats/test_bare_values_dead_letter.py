"""A record whose outputs is a bare number is a dead letter naming its line, not a silent 0.0."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from assay.cli import app


def test_a_bare_number_as_outputs_is_a_dead_letter_with_its_position(tmp_path: Path) -> None:
    records = tmp_path / "in.jsonl"
    records.write_text('{"id": "a", "outputs": "x", "reference_outputs": "x"}\n{"id": "b", "outputs": 5}\n')
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["score", str(records), "-e", "exact_match", "-o", str(out), "-q"])
    assert res.exit_code == 0, res.output
    dead = [json.loads(line) for f in (out / "_dead_letter").iterdir() for line in f.read_text().splitlines()]
    assert [(d["line"], d["stage"], d["error_type"]) for d in dead] == [(2, "normalize", "NormalizationError")]
    assert "outputs is a JSON number (5)" in dead[0]["error"]
    rows = [json.loads(line) for f in out.glob("part-*") for line in f.read_text().splitlines()]
    assert [r["trace_id"] for r in rows] == ["a"]
