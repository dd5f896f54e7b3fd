"""The run's summary table says why results were not scored (exports without references showed
"scored 0, errors 0" and nothing else): a "not scored (why)" column with the count and the most
common reason, kept in ``_SUMMARY.json`` as ``unscored_reasons`` and merged across parts."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from assay.cli import app
from assay.pipeline.summary import MAX_UNSCORED_REASONS, KeyStats
from assay.records import Result

MESSAGES = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def test_the_summary_table_says_why_results_were_not_scored(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"t{i}", "messages": MESSAGES}) + "\n" for i in range(7)))
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app, ["score", str(data), "-e", "exact_match", "-e", "max_turns:max_turns=3", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "not scored (why)" in res.output
    line = next(line for line in res.output.splitlines() if "exact_match" in line)
    assert "7: no reference output to compare with" in line, res.output
    summary = json.loads((out / "_SUMMARY.json").read_text())
    assert summary["evaluators"]["exact_match"]["unscored_reasons"] == {"no reference output to compare with": 7}
    assert "unscored_reasons" not in summary["evaluators"]["max_turns"]


def test_a_table_where_everything_was_scored_has_no_such_column(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "a", "messages": MESSAGES}) + "\n")
    res = CliRunner().invoke(app, ["score", str(data), "-e", "max_turns:max_turns=3", "-o", str(tmp_path / "o")])
    assert res.exit_code == 0 and "not scored" not in res.output, res.output


def test_reasons_are_bounded_and_merge() -> None:
    a, b = KeyStats(), KeyStats()
    for i in range(10):
        a.add(Result("k", None, comment=f"reason {i % 7}"))
        b.add(Result("k", None, comment="reason 0"))
    assert len(a.unscored_reasons) == MAX_UNSCORED_REASONS + 1  # and "(other reasons)"
    merged = KeyStats.from_dict(json.loads(json.dumps(a.to_dict())))
    merged.merge(b)
    assert merged.unscored == 20 and sum(merged.unscored_reasons.values()) == 20
    assert merged.top_unscored_reason() == "reason 0"
