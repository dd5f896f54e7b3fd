"""``assay validate`` checks what the run needs from this machine: the judges' API keys and the
connectors' extras (exit 2 naming what is missing), not only the run file's schema."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.config import build_config
from assay.preflight import CONNECTOR_NEEDS, connector_problems


def _validate(tmp_path: Path, cfg: dict[str, Any]) -> Any:
    f = tmp_path / "run.yaml"
    f.write_text(json.dumps(cfg))
    return CliRunner().invoke(app, ["validate", str(f)])


BASE = {"source": {"path": "t.jsonl"}, "sink": {"path": "out/"}}
JUDGED = [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "grader"}}]


def test_a_judge_key_missing_from_the_environment_fails_validate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ASSAY_TEST_GRADER_KEY", raising=False)
    judges = {"grader": {"provider": "openai", "model": "gpt-4.1-mini"}}
    res = _validate(tmp_path, {**BASE, "judges": judges, "evaluators": JUDGED})
    assert res.exit_code == 2 and "judges.grader: environment variable OPENAI_API_KEY is not set" in res.output
    explicit = {"grader": {"model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "ASSAY_TEST_GRADER_KEY"}}
    res = _validate(tmp_path, {**BASE, "judges": explicit, "evaluators": JUDGED})
    assert res.exit_code == 2 and "judges.grader: api_key_env: environment variable ASSAY_TEST_GRADER_KEY" in res.output
    inline = [{"name": "llm_judge", "params": {"prompt": "correctness", "model": "anthropic:claude-sonnet-4-5"}}]
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    res = _validate(tmp_path, {**BASE, "evaluators": inline})
    assert (
        res.exit_code == 2 and "evaluators[0] (llm_judge) judge: environment variable ANTHROPIC_API_KEY" in res.output
    )
    monkeypatch.setenv("ASSAY_TEST_GRADER_KEY", "sk-test-present")
    assert _validate(tmp_path, {**BASE, "judges": explicit, "evaluators": JUDGED}).exit_code == 0
    local = {"grader": {"model": "m", "base_url": "http://127.0.0.1:9/v1"}}  # a proxy or local server: no key needed
    assert _validate(tmp_path, {**BASE, "judges": local, "evaluators": JUDGED}).exit_code == 0


def test_a_missing_extra_fails_validate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every module a connector needs is looked up; one that is absent names the extra (its absence
    is simulated: the test environment has every extra)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "aiobotocore" else real(name, *a))
    config = build_config({**BASE, "sink": {"path": "s3://lake/out/"}, "evaluators": ["exact_match"]})
    assert connector_problems(config) == ["sink: type s3 needs aiobotocore: pip install 'assay[s3]'"]
    monkeypatch.setattr(importlib.util, "find_spec", real)
    assert connector_problems(config) == []
    assert set(CONNECTOR_NEEDS) == {"s3", "kafka", "delta"}
