"""potato's ``ai_support`` section pasted into a run file: a pre-pass over the raw run file (before
validation) declares the judge ``ai_support``; the run file's models import no evaluator."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.config import RunConfig, load_run_file
from assay.exceptions import ConfigError

RUN = """\
source: {path: in.jsonl}
sink: {path: out/}
evaluators:
  - {name: rubric_dag, params: {preset: answer_quality}}
%s
"""
AI = "ai_support: {enabled: true, endpoint_type: openai, ai_config: {model: gpt-4o-mini}}"


def _load(tmp_path: Path, extra: str) -> RunConfig:
    f = tmp_path / "run.yaml"
    f.write_text(RUN % extra)
    return load_run_file(f)


def test_the_section_is_the_judge_and_shares_the_runs_rate_store(tmp_path: Path) -> None:
    config = _load(tmp_path, AI + "\nrate_store: redis://127.0.0.1:6379/0")
    assert config.judges == {
        "ai_support": {"provider": "openai", "model": "gpt-4o-mini", "shared_limit": "redis://127.0.0.1:6379/0"}
    }


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (AI + "\njudges: {ai_support: {provider: openai, model: x}}", "a judge named 'ai_support' is declared"),
        ("ai_support: {enabled: false}", "ai_support.enabled is not true"),
        ("ai_support: x", "no ai_support section"),
    ],
)
def test_a_wrong_section_is_one_line_naming_the_file(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, extra)
    text = str(info.value)
    assert text.startswith(f"{tmp_path / 'run.yaml'}: ") and message in text and "\n" not in text
