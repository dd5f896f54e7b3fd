"""The contract openevals' and agentevals' own test suites check, through assay.compat (no model:
the judge-backed behaviours are in tests/integration/compat/test_compat_verdicts.py)."""

from __future__ import annotations

import importlib
import json
import string
from typing import Any

import anyio
import pytest

from assay.exceptions import ConfigError

PROMPT_MODULES = {
    "quality": {
        "correctness": ["CORRECTNESS_PROMPT"],
        "conciseness": ["CONCISENESS_PROMPT"],
        "hallucination": ["HALLUCINATION_PROMPT"],
        "answer_relevance": ["ANSWER_RELEVANCE_PROMPT"],
        "code_correctness": ["CODE_CORRECTNESS_PROMPT", "CODE_CORRECTNESS_PROMPT_WITH_REFERENCE_OUTPUTS"],
        "plan_adherence": ["PLAN_ADHERENCE_PROMPT"],
        "laziness": ["LAZINESS_PROMPT"],
    },
    "rag": {
        "groundedness": ["RAG_GROUNDEDNESS_PROMPT"],
        "helpfulness": ["RAG_HELPFULNESS_PROMPT"],
        "retrieval_relevance": ["RAG_RETRIEVAL_RELEVANCE_PROMPT"],
    },
    "safety": {"toxicity": ["TOXICITY_PROMPT"], "fairness": ["FAIRNESS_PROMPT"]},
    "security": {
        "pii_leakage": ["PII_LEAKAGE_PROMPT"],
        "prompt_injection": ["PROMPT_INJECTION_PROMPT"],
        "code_injection": ["CODE_INJECTION_PROMPT"],
    },
    "trajectory": {
        "accuracy": ["TRAJECTORY_ACCURACY_PROMPT", "TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE"],
        "tool_selection": ["TOOL_SELECTION_PROMPT"],
    },
    "conversation": {
        name: [f"{name.upper()}_PROMPT"]
        for name in (
            "perceived_error",
            "wins",
            "task_completion",
            "knowledge_retention",
            "user_satisfaction",
            "agent_tone",
            "language_detection",
            "support_intent",
        )
    },
    "image": {"explicit_content": ["EXPLICIT_CONTENT_PROMPT"], "sensitive_imagery": ["SENSITIVE_IMAGERY_PROMPT"]},
    "voice": {
        name: [f"{name.upper()}_PROMPT"]
        for name in ("audio_quality", "transcription_accuracy", "user_interrupts", "vocal_affect")
    },
}

#: The variables of openevals 0.2.2's prompts (a call must give every one of them).
VARIABLES = {
    "CORRECTNESS_PROMPT": {"inputs", "outputs", "reference_outputs"},
    "HALLUCINATION_PROMPT": {"context", "inputs", "outputs", "reference_outputs"},
    "PLAN_ADHERENCE_PROMPT": {"inputs", "outputs", "plan"},
    "RAG_RETRIEVAL_RELEVANCE_PROMPT": {"context", "inputs"},
    "TASK_COMPLETION_PROMPT": {"outputs"},
    "AUDIO_QUALITY_PROMPT": {"attachments", "inputs", "outputs"},
}


@pytest.mark.parametrize(
    ("group", "module", "names"), [(g, m, n) for g, ms in PROMPT_MODULES.items() for m, n in ms.items()]
)
def test_every_prompt_sub_module_of_openevals_is_served(group: str, module: str, names: list[str]) -> None:
    top = importlib.import_module("assay.compat.openevals.prompts")
    sub = importlib.import_module(f"assay.compat.openevals.prompts.{group}.{module}")
    pkg = importlib.import_module(f"assay.compat.openevals.prompts.{group}")
    for name in names:
        assert getattr(sub, name) == getattr(pkg, name) == getattr(top, name)
        assert "{" in getattr(top, name)


def test_all_prompt_constants_and_their_variables() -> None:
    from assay.compat.openevals import prompts
    from assay.compat.openevals.code.llm import CODE_CORRECTNESS_PROMPT

    expected = {n for ms in PROMPT_MODULES.values() for names in ms.values() for n in names}
    assert set(prompts.__all__) == expected and len(expected) == 33
    assert CODE_CORRECTNESS_PROMPT == prompts.CODE_CORRECTNESS_PROMPT
    for name, variables in VARIABLES.items():
        found = {f for _, f, _, _ in string.Formatter().parse(getattr(prompts, name)) if f}
        assert found == variables, name


def test_types_modules_have_openevals_and_agentevals_names_and_shapes() -> None:
    from assay.compat.agentevals import types as at
    from assay.compat.openevals import types as ot

    for name in (
        "EvaluatorResult",
        "SimpleEvaluator",
        "SimpleAsyncEvaluator",
        "ChatCompletionMessage",
        "FewShotExample",
    ):
        assert getattr(at, name) is getattr(ot, name)
    for name in ("ChatCompletion", "ModelClient", "RunnableLike", "MultiturnSimulationResult", "ToolArgsMatchMode"):
        assert hasattr(ot, name)
    assert hasattr(at, "GraphTrajectory") and hasattr(at, "ExtractedLangGraphThreadTrajectory")
    r = ot.EvaluatorResult(key="k", score=True, comment=None, metadata=None)
    assert r == {"key": "k", "score": True, "comment": None, "metadata": None} and type(r) is dict
    msg = ot.ChatCompletionMessage(role="user", content="hi")
    assert msg == {"role": "user", "content": "hi"}


def call(name: str, args: str = "{}") -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": name, "arguments": args}}]}


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


@pytest.mark.parametrize("is_async", [False, True])
def test_deterministic_results_are_exactly_the_reference_dicts(is_async: bool) -> None:
    from assay.compat.agentevals.trajectory.match import create_async_trajectory_match_evaluator as ae_async
    from assay.compat.agentevals.trajectory.match import create_trajectory_match_evaluator as ae_sync
    from assay.compat.openevals.exact import exact_match
    from assay.compat.openevals.string.levenshtein import levenshtein_distance
    from assay.compat.openevals.trajectory.match import create_async_trajectory_match_evaluator as oe_async
    from assay.compat.openevals.trajectory.match import create_trajectory_match_evaluator as oe_sync
    from assay.compat.openevals.types import EvaluatorResult

    traj = [{"role": "user", "content": "hi"}, call("get_weather", json.dumps({"city": "SF"}))]
    for factory in (oe_async, ae_async) if is_async else (oe_sync, ae_sync):
        for mode in ("strict", "unordered", "subset", "superset"):
            ev = factory(trajectory_match_mode=mode)
            got = ev(outputs=traj, reference_outputs=traj)
            if is_async:
                got = anyio.run(_awaited, got)
            expected = EvaluatorResult(key=f"trajectory_{mode}_match", score=True, comment=None, metadata=None)
            assert got == expected
    assert exact_match(outputs={"a": 1}, reference_outputs={"a": 1}) == EvaluatorResult(
        key="exact_match", score=True, comment=None, metadata=None
    )
    assert levenshtein_distance(outputs="a", reference_outputs="a")["comment"] is None


def test_a_field_list_override_missing_on_both_sides_fails_in_openevals_and_matches_in_agentevals() -> None:
    from assay.compat.agentevals.trajectory.match import create_trajectory_match_evaluator as ae
    from assay.compat.openevals.trajectory.match import create_trajectory_match_evaluator as oe

    traj = [call("lookup_policy", json.dumps({"time": {"end": "2025-03-22T20:34:40Z"}}))]
    overrides = {"lookup_policy": ["time.start"]}
    assert oe(tool_args_match_overrides=overrides)(outputs=traj, reference_outputs=traj)["score"] is False
    assert ae(tool_args_match_overrides=overrides)(outputs=traj, reference_outputs=traj)["score"] is True
    both = {"lookup_policy": ["time.end"]}
    assert oe(tool_args_match_overrides=both)(outputs=traj, reference_outputs=traj)["score"] is True


def test_bad_arguments_are_value_errors_and_config_errors() -> None:
    from assay.compat._core import CompatConfigError
    from assay.compat.openevals.json import create_async_json_match_evaluator, create_json_match_evaluator
    from assay.compat.openevals.llm import create_llm_as_judge

    for factory in (create_json_match_evaluator, create_async_json_match_evaluator):
        with pytest.raises(ValueError, match="rubric") as info:
            factory(rubric={"a": "is it right?"})  # a rubric needs a judge
        assert isinstance(info.value, ConfigError) and isinstance(info.value, CompatConfigError)
        with pytest.raises(ValueError, match="judge"):
            factory(model="openai:gpt-4o-mini")  # a judge without a rubric
    with pytest.raises(ValueError, match="judge is required"):
        create_llm_as_judge(prompt="{outputs}")


def test_a_template_variable_not_given_is_a_key_error_before_any_judge_call() -> None:
    from assay.compat.openevals.llm import create_async_llm_as_judge, create_llm_as_judge
    from assay.compat.openevals.prompts import CORRECTNESS_PROMPT, PLAN_ADHERENCE_PROMPT

    # an unreachable endpoint: a KeyError must come before any request
    judge = {"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    with pytest.raises(KeyError, match="reference_outputs"):
        create_llm_as_judge(prompt=CORRECTNESS_PROMPT, judge=judge)(inputs="q", outputs="a")
    with pytest.raises(KeyError, match="plan"):
        create_llm_as_judge(prompt=PLAN_ADHERENCE_PROMPT, judge=judge)(inputs="q", outputs="a")
    with pytest.raises(KeyError, match="context"):
        create_llm_as_judge(prompt="{outputs} in {context}", judge=judge)(outputs="a")

    async def main() -> None:
        await create_async_llm_as_judge(prompt=CORRECTNESS_PROMPT, judge=judge)(inputs="q", outputs="a")

    with pytest.raises(KeyError, match="reference_outputs"):
        anyio.run(main)


@pytest.mark.parametrize("strategy", ["all", "bogus", "none"])
def test_an_unknown_code_extraction_strategy_is_none(strategy: str) -> None:
    from assay.compat.openevals.code.base import extraction_strategy

    assert extraction_strategy(strategy, None) == "none"
    assert extraction_strategy("markdown_code_blocks", None) == "markdown_code_blocks"
    with pytest.raises(ValueError, match="code_extractor"):
        extraction_strategy("llm", lambda out: out)


def test_code_helpers_users_import() -> None:
    from assay.compat.openevals.code.base import _extract_code_from_markdown_code_blocks as extract

    text = "Setup:\n```bash\npip install x\n```\nCode:\n```python\nimport x\n```\n```\nprint(x)\n```\n"
    assert extract(text) == "import x\n\nprint(x)\n" or extract(text) == "import x\nprint(x)"
    assert extract("no code here") is None


def test_is_internal_message() -> None:
    from assay.compat.openevals.simulators.prebuilts import _is_internal_message

    assert not _is_internal_message({"role": "user", "content": "hi"})
    assert not _is_internal_message({"role": "assistant", "content": "hello"})
    assert _is_internal_message({"role": "assistant", "content": "", "tool_calls": [{"id": "1"}]})
    assert _is_internal_message({"role": "tool", "content": "42"})


PNG = "data:image/png;base64,iVBORw0KGgo="


@pytest.mark.parametrize(
    ("item", "block"),
    [
        ({"mime_type": "image/png", "data": PNG}, {"type": "image_url", "image_url": {"url": PNG}}),
        ("https://x/y.jpg", {"type": "image_url", "image_url": {"url": "https://x/y.jpg"}}),
        (
            {"mime_type": "application/pdf", "data": "data:application/pdf;base64,JVB", "name": "a.pdf"},
            {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVB"}},
        ),
        (
            {"mime_type": "application/pdf", "data": "data:application/pdf;base64,JVB"},
            {"type": "file", "file": {"filename": "attachment.pdf", "file_data": "data:application/pdf;base64,JVB"}},
        ),
        (
            {"mime_type": "audio/mpeg", "data": "data:audio/mpeg;base64,SUQz"},
            {"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}},
        ),
        (
            {"mime_type": "audio/wav", "data": "UklG"},
            {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
        ),
        ({"type": "text", "text": "as is"}, {"type": "text", "text": "as is"}),
    ],
)
def test_attachment_to_content_block(item: Any, block: dict[str, Any]) -> None:
    from assay.compat.openevals.utils import _attachment_to_content_block

    assert _attachment_to_content_block(item) == block


def test_attachment_errors_are_value_errors() -> None:
    from assay.compat.openevals.utils import _attachment_to_content_block

    with pytest.raises(ValueError, match="Unsupported attachment MIME type"):
        _attachment_to_content_block({"mime_type": "video/mp4", "data": "x"})
    with pytest.raises(ValueError, match="Unsupported attachment type"):
        _attachment_to_content_block(12345)
