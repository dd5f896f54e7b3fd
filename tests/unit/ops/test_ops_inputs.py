"""What a scheduler sees for a bad ``--ds`` and for an input that is not there (yet)."""

from __future__ import annotations

import json
from pathlib import Path

from assay.exceptions import EXIT_INFRA, ConnectorError, InputMissingError


def run_file(tmp_path: Path, source: str) -> Path:
    f = tmp_path / "run.yaml"
    f.write_text(json.dumps({"source": {"path": source}, "evaluators": ["exact_match"], "sink": {"path": "out/"}}))
    return f


def test_an_impossible_ds_is_rejected_before_anything_runs(tmp_path: Path, run_cli) -> None:
    f = run_file(tmp_path, "traces/{{ ds }}/*.jsonl")
    for command in (["run", str(f)], ["validate", str(f)]):
        result = run_cli(*command, "--ds", "2026-13-01")
        assert result.returncode == 2, result.stderr
        assert "--ds: no such day (month must be in 1..12) (got '2026-13-01')" in result.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / ".assay").exists()
    assert run_cli("validate", str(f), "--ds", "2026-02-29").returncode == 2  # not a leap year
    assert run_cli("validate", str(f), "--ds", "2028-02-29").returncode == 0


def test_a_missing_input_is_retryable_like_a_missing_s3_prefix(tmp_path: Path, run_cli) -> None:
    """A partition that has not landed yet: exit 1 (a scheduler retries), local or S3 alike (the
    S3 source raises the same error for a prefix with no objects)."""
    for source in ("traces/2026-11-21/part-0.jsonl", "traces/2026-11-21/*.jsonl", "traces/"):
        (tmp_path / "traces").mkdir(exist_ok=True)
        result = run_cli("run", str(run_file(tmp_path, source)), "-q")
        assert result.returncode == EXIT_INFRA, result.stderr
        assert "not landed yet?" in result.stderr and "Traceback" not in result.stderr
    assert issubclass(InputMissingError, ConnectorError) and InputMissingError("x").exit_code == EXIT_INFRA
