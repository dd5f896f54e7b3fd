"""A judge evaluator that names no judge needs the run's only judge: refused at build time (so
``assay validate`` says it, not the run after reading its input), with the fix in the message."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.config import load_run_file
from assay.exceptions import ConfigError
from assay.pipeline.assembly import build_evaluators

DAG = """
source: {path: traces.jsonl}
sink: {path: out/}
%s
evaluators:
  - name: rubric_dag
    params:
      %s
      dag:
        root: answers
        nodes:
          answers:
            question: "Does the response directly answer the question?"
            choices: [yes, no]
            branches: {yes: {score: 1.0}, no: {score: 0.0}}
"""
ONE_JUDGE = "judges: {gpt: {provider: openai, model: gpt-4.1-mini}}"
TWO_JUDGES = "judges: {a: {provider: openai, model: m1}, b: {provider: anthropic, model: m2}}"


def _build(tmp_path: Path, judges: str, params: str = "") -> list[object]:
    f = tmp_path / "run.yaml"
    f.write_text(DAG % (judges, params or "use_reasoning: true"))
    return list(build_evaluators(load_run_file(f), str(f)))


def test_no_judge_anywhere_is_a_config_error_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"evaluators\[0\] \(rubric_dag\): names no judge.*params\.model"):
        _build(tmp_path, "")
    with pytest.raises(ConfigError, match="declares 2 judges"):
        _build(tmp_path, TWO_JUDGES)


@pytest.mark.parametrize(
    ("judges", "params"),
    [(ONE_JUDGE, ""), ("", 'model: "openai:gpt-4.1-mini"'), (TWO_JUDGES, "judge: b")],
)
def test_the_runs_only_judge_or_the_model_shorthand_or_a_name(tmp_path: Path, judges: str, params: str) -> None:
    (ev,) = _build(tmp_path, judges, params)
    assert ev.key == "rubric_dag"


def test_a_potato_ai_support_section_is_the_runs_judge(tmp_path: Path) -> None:
    """potato's evaluators YAML comes with its task config's ai_support: pasted into a run file,
    it declares the judge the rubric uses (no judges: section to add)."""
    ai_support = "ai_support: {enabled: true, endpoint_type: openai, ai_config: {model: gpt-4o-mini}}"
    f = tmp_path / "run.yaml"
    f.write_text(DAG % (ai_support, "use_reasoning: true"))
    config = load_run_file(f)
    assert config.judges == {"ai_support": {"provider": "openai", "model": "gpt-4o-mini"}}
    (ev,) = build_evaluators(config, str(f))
    assert ev.key == "rubric_dag"
