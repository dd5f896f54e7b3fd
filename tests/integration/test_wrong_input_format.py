"""An input whose records match no trace format the run reads (no ``messages``, or ``messages``
of the wrong type), in JSON lines or Parquet, fails the run (exit 4, status ``dead_letters``)
with one line saying what the records lacked, by the default ``limits.max_dead_letter_ratio``;
an input with a few bad records still passes; ``max_dead_letter_ratio: null`` turns it off."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from assay.config import DEFAULT_MAX_DEAD_LETTER_RATIO, LimitsConfig
from assay.pipeline.summary import RunStats
from assay.records import Failure, Position

GOOD = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    if path.suffix == ".parquet":
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(records), path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _run(
    tmp_path: Path, data: Path, limits: dict[str, Any] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    run = tmp_path / "run.yaml"
    cfg: dict[str, Any] = {
        "source": {"path": str(data)},
        "evaluators": ["max_turns:max_turns=3"],
        "sink": {"path": str(tmp_path / "out")},
        "state_dir": str(tmp_path / "state"),
    }
    if limits is not None:
        cfg["limits"] = limits
    run.write_text(json.dumps(cfg))
    proc = subprocess.run(
        [sys.executable, "-m", "assay.cli", "run", str(run), "--ds", "2026-11-27", "-q"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc, json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())


@pytest.mark.parametrize(
    ("records", "lacked"),
    [
        ([{"id": f"t{i}", "prompt": "hi", "completion": "x"} for i in range(60)], "has no outputs or trajectory"),
        ([{"id": f"t{i}", "messages": f"hello {i}"} for i in range(60)], "messages is a JSON string, expected a list"),
    ],
    ids=["no-messages", "messages-a-string"],
)
@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_records_that_match_no_format_fail_the_run_saying_what_they_lacked(
    tmp_path: Path, records: list[dict[str, Any]], lacked: str, suffix: str
) -> None:
    proc, summary = _run(tmp_path, _write(tmp_path / f"in{suffix}", records))
    assert proc.returncode == 4, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("assay:")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "every record read (60) is a dead letter" in lines[0]
    assert "most common reason (60 of 60): " in lines[0] and lacked in lines[0], lines[0]
    assert summary["status"] == "dead_letters" and summary["counts"]["scored"] == 0
    assert summary["limits"]["max_dead_letter_ratio"] == DEFAULT_MAX_DEAD_LETTER_RATIO
    assert list(summary["dead_letter_reasons"].values()) == [60]


def test_a_few_bad_records_pass_and_the_limit_can_be_turned_off(tmp_path: Path) -> None:
    records = [{"id": f"t{i}", **GOOD} for i in range(40)] + [{"id": "bad", "messages": 5}] * 3
    proc, summary = _run(tmp_path, _write(tmp_path / "in.jsonl", records))
    assert proc.returncode == 0, proc.stderr
    assert summary["counts"]["dead_letters"] == 3 and summary["dead_letter_reasons"] == {
        "record's messages is a JSON number, expected a list of messages (keys: id, messages)": 3
    }
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    proc, summary = _run(wrong, _write(wrong / "in.jsonl", [{"x": 1}] * 5), {"max_dead_letter_ratio": None})
    assert proc.returncode == 0 and summary["status"] == "ok", proc.stderr


def test_reasons_are_bounded_and_merge_across_parts() -> None:
    assert LimitsConfig().max_dead_letter_ratio == DEFAULT_MAX_DEAD_LETTER_RATIO == 0.5
    parts = []
    for part in range(3):
        s = RunStats()
        for i in range(30):
            reason = "common" if i % 2 else f"rare {part}-{i}"
            s.add_dead_letter(Failure(b"", Position("f", i), "normalize", "NormalizationError", f"f:{i}: {reason}"))
        assert len(s.dead_letter_reasons) <= 20
        parts.append(RunStats.from_dict(json.loads(json.dumps(s.to_dict()))))
    total = RunStats()
    for p in parts:
        total.merge(p)
    assert total.top_dead_letter_reason() == ("common", 45)
    assert len(total.dead_letter_reasons) <= 20 and sum(total.dead_letter_reasons.values()) == 90
    assert total.counts["dead_letters"] == 90 and total.counts["normalize_errors"] == 90


def test_input_that_cannot_be_split_into_records_counts_as_read() -> None:
    s = RunStats()
    s.add_dead_letter(Failure(b"", Position("a.json", 2), "read", "ReadError", "a.json:2: invalid JSON array element"))
    s.add_dead_letter(Failure(b"", Position("t", None, 3, 40), "parse", "JSONDecodeError", "t[3]@40: invalid JSON"))
    s.counts["read"] = 1
    assert s.dead_letter_ratio() == 1.0 and s.records_seen() == 2
    assert set(s.dead_letter_reasons) == {"invalid JSON array element", "invalid JSON"}
