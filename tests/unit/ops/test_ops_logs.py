"""``--log-format json``: one parseable object per line on stderr, never a secret."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from assay.observability import log_event, redact, secret_env_names, secrets_of_run_file, setup_logging
from tests.unit.ops.conftest import cli_env

SECRET = "sk-test-6f1d2c9a8b7e"


@pytest.fixture(autouse=True)
def _restore_logging():
    yield
    logger = logging.getLogger("assay")
    for h in list(logger.handlers):
        logger.removeHandler(h)
    logger.propagate = True
    logger.setLevel(logging.NOTSET)


def test_redact_replaces_every_secret_and_ignores_short_values() -> None:
    text = f"Authorization: Bearer {SECRET}; again {SECRET}; id 42"
    assert redact(text, [SECRET, "42", ""]) == "Authorization: Bearer [REDACTED]; again [REDACTED]; id 42"


def test_secrets_are_the_values_of_env_vars_the_run_file_names(tmp_path: Path) -> None:
    data = {
        "judges": {"gpt": {"api_key_env": "OPENAI_API_KEY", "base_url": "${JUDGE_URL:-http://x}"}},
        "sink": {"path": "s3://b/${BUCKET_PREFIX}/"},
    }
    assert secret_env_names(data) == {"OPENAI_API_KEY", "JUDGE_URL", "BUCKET_PREFIX"}
    run_file = tmp_path / "run.yaml"
    run_file.write_text("judges:\n  gpt: {api_key_env: MY_KEY}\nsink: {path: '${OUT_DIR}/x'}\n")
    env = {"MY_KEY": SECRET, "OUT_DIR": "/data/out", "UNRELATED": "zzzzzzzzzz"}
    assert secrets_of_run_file(run_file, env) == [SECRET, "/data/out"]
    assert secrets_of_run_file(tmp_path / "missing.yaml", env) == []


def test_json_lines_carry_time_level_run_id_event_and_fields() -> None:
    out = io.StringIO()
    setup_logging("json", run_id="r1", secrets=[SECRET], stream=out)
    log_event("run_started", run_file="a.yaml", ds="2026-11-21")
    log_event("run_finished", logging.WARNING, counts={"read": 3}, exit_code=3, name="clash")
    logging.getLogger("assay.judges.endpoint").error("401 from judge with key %s", SECRET)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [x["event"] for x in lines] == ["run_started", "run_finished", "assay.judges.endpoint"]
    assert lines[0]["run_id"] == "r1" and lines[0]["level"] == "info" and lines[0]["ds"] == "2026-11-21"
    assert lines[0]["time"].endswith("+00:00") and "T" in lines[0]["time"]
    assert lines[1]["level"] == "warning" and lines[1]["counts"] == {"read": 3} and lines[1]["name_"] == "clash"
    assert lines[2]["message"] == "401 from judge with key [REDACTED]"
    assert SECRET not in out.getvalue()


def test_text_format_and_bad_format() -> None:
    out = io.StringIO()
    setup_logging("text", run_id="r1", stream=out)
    log_event("lock_wait", holder={"pid": 7})
    line = out.getvalue().strip()
    assert " INFO lock_wait " in line and 'holder={"pid":7}' in line
    with pytest.raises(Exception, match="--log-format"):
        setup_logging("xml")


def test_cli_json_logs_parse_line_by_line_and_hide_the_secret(quickstart: Path, run_cli) -> None:
    # the run id comes from an environment variable: it is a secret and must not appear anywhere
    text = quickstart.read_text().replace("source:", "run_id: ${RUN_TOKEN}\nsource:", 1)
    quickstart.write_text(text)
    result = run_cli(
        "run",
        str(quickstart),
        "--log-format",
        "json",
        "--set",
        "gates.tool_call_accuracy.min_mean=0.99",
        env=cli_env(RUN_TOKEN=SECRET),
    )
    assert result.returncode == 3
    assert SECRET not in result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    assert all({"time", "level", "run_id", "event"} <= set(x) for x in lines)
    events = [x["event"] for x in lines]
    assert events[0] == "run_started" and events[-1] == "run_finished"
    assert "run_message" in events  # the failed gate, as a warning
    summary = json.loads((quickstart.parent / "out" / "_SUMMARY.json").read_text())
    assert lines[-1]["counts"] == summary["counts"] and lines[-1]["exit_code"] == 3
    assert lines[-1]["run_id"] == "[REDACTED]"


def test_a_secret_expanded_into_the_source_path_is_never_shown(tmp_path: Path, run_cli) -> None:
    """A missing input whose path holds an ``${ENV}`` value: the error (stderr, text and JSON
    logs) and the summary show the path with the value blanked."""
    run_file = tmp_path / "run.yaml"
    run_file.write_text("source:\n  path: ${DATA_TOKEN}/traces.jsonl\nevaluators: [exact_match]\nsink:\n  path: out/\n")
    hidden = f"/tmp/{SECRET}"
    for log_format in ("text", "json"):
        result = run_cli("run", str(run_file), "-q", "--log-format", log_format, env=cli_env(DATA_TOKEN=hidden))
        assert result.returncode == 1, result.stderr  # a missing input is retryable (not landed yet)
        assert SECRET not in result.stderr and SECRET not in result.stdout
        assert "no such file or directory: '***/traces.jsonl'" in result.stderr
    finished = json.loads(result.stderr.splitlines()[-1])  # the JSON log's last line
    assert finished["event"] == "run_finished" and "'***/traces.jsonl'" in finished["error"]
    summary = (tmp_path / "out" / "_SUMMARY.json").read_text()
    assert SECRET not in summary
    assert "'***/traces.jsonl'" in json.loads(summary)["error"]["message"]


def test_quiet_prints_nothing_but_errors(quickstart: Path, run_cli: Any, tmp_path: Path) -> None:
    """``-q``: a good run prints nothing at all; a failed one only what went wrong. JSON events
    are written with ``-q`` too (they were asked for)."""
    ok = run_cli("run", str(quickstart), "--ds", "2026-11-21", "-q")
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr == "" and ok.stdout == ""
    missing = tmp_path / "missing.yaml"
    missing.write_text("source: {path: nothing-here.jsonl}\nevaluators: [exact_match]\nsink: {path: out/}\n")
    failed = run_cli("run", str(missing), "-q")
    assert failed.returncode == 1
    assert [line for line in failed.stderr.splitlines() if line] == [
        line for line in failed.stderr.splitlines() if line.startswith("assay: error:")
    ], failed.stderr
    # (--fresh: over the published output a rerun would keep every result and say so in a run_message)
    events = run_cli("run", str(quickstart), "--ds", "2026-11-22", "-q", "--fresh", "--log-format", "json")
    assert [json.loads(line)["event"] for line in events.stderr.splitlines()] == ["run_started", "run_finished"]
