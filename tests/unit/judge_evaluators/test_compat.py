"""assay.compat: openevals/agentevals factories with their signatures, results and import paths."""

from __future__ import annotations

import importlib
from typing import Any

import anyio
import pytest

from assay.compat._core import EvaluatorResult, judge_params, openevals_result, prompt_param
from assay.compat.openevals import prompts
from assay.compat.openevals.llm import create_async_llm_as_judge, create_llm_as_judge
from assay.evaluators.judge_base import shorthand_judge
from assay.exceptions import ConfigError, EvaluatorError
from assay.judges.base import JudgeRequest, JudgeResponse, JudgeUsage
from assay.records import Result

MODULES = [
    "assay.compat.openevals",
    "assay.compat.openevals.llm",
    "assay.compat.openevals.prompts",
    "assay.compat.openevals.trajectory",
    "assay.compat.openevals.trajectory.llm",
    "assay.compat.openevals.trajectory.match",
    "assay.compat.openevals.json",
    "assay.compat.openevals.code.pyright",
    "assay.compat.openevals.code.mypy",
    "assay.compat.openevals.code.llm",
    "assay.compat.openevals.code.e2b.execution",
    "assay.compat.openevals.code.e2b.pyright",
    "assay.compat.openevals.string.embedding_similarity",
    "assay.compat.agentevals.trajectory",
    "assay.compat.agentevals.trajectory.llm",
    "assay.compat.agentevals.trajectory.match",
]


@pytest.mark.parametrize("module", MODULES)
def test_every_public_name_exists(module: str) -> None:
    mod = importlib.import_module(module)
    assert mod.__all__ and all(hasattr(mod, name) for name in mod.__all__)


def test_no_package_shadows_the_real_libraries() -> None:
    assert importlib.util.find_spec("openevals") is None or "assay" not in str(importlib.util.find_spec("openevals"))


class FakeJudge:
    """A Judge object (assay's protocol) answering a fixed verdict, recording requests."""

    name = "fake"

    def __init__(self, verdict: dict[str, Any]) -> None:
        self.verdict = verdict
        self.requests: list[JudgeRequest] = []

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        import orjson

        self.requests.append(request)
        return JudgeResponse(orjson.dumps(self.verdict).decode(), dict(self.verdict), JudgeUsage(), model="fake")

    def estimate(self, request: JudgeRequest) -> int:
        return 1


def test_prompt_constants_are_the_template_texts_and_map_back_to_prebuilt_names() -> None:
    assert len(prompts.__all__) == 33  # openevals 0.2.2: every constant of openevals.prompts
    assert "{outputs}" in prompts.CORRECTNESS_PROMPT
    assert prompt_param(prompts.CORRECTNESS_PROMPT) == "correctness"
    assert prompt_param(prompts.TOXICITY_PROMPT) == "toxicity"
    assert prompt_param(prompts.CODE_CORRECTNESS_PROMPT_WITH_REFERENCE_OUTPUTS) == "code_correctness_with_reference"
    edited = prompts.CORRECTNESS_PROMPT + "\nBe strict."
    assert prompt_param(edited) == edited  # an edited text is a template of your own
    with pytest.raises(ConfigError, match="expected a template string"):
        prompt_param(lambda **kw: [])  # prompt functions go to PromptFunctionJudge, not to this param


def test_create_llm_as_judge_result_shape_and_defaults() -> None:
    judge = FakeJudge({"reasoning": "fine", "score": True})
    ev = create_llm_as_judge(prompt=prompts.CORRECTNESS_PROMPT, judge=judge)
    r = ev(inputs="capital of France?", outputs="Paris", reference_outputs="Paris")
    assert isinstance(r, dict) and r["key"] == "score" and r["score"] is True and r["comment"] == "fine"
    assert r.score == 1.0 and r["score"] is True and r.reasoning == "fine" and r.passed is True
    assert ev.evaluator.key == "score" and ev.evaluator.name == "llm_judge"


def test_defect_prompts_keep_the_judges_answer_as_the_score() -> None:
    """openevals: TOXICITY score True = toxic. The compat dict keeps that; the assay Result inverts."""
    judge = FakeJudge({"reasoning": "rude", "score": True})
    ev = create_llm_as_judge(prompt=prompts.TOXICITY_PROMPT, feedback_key="toxicity", judge=judge)
    assert ev(inputs="hi", outputs="you idiot")["score"] is True
    assert ev.evaluator.evaluate(inputs="hi", outputs="you idiot").score == 0.0


def test_continuous_choices_and_output_schema() -> None:
    ev = create_llm_as_judge(
        prompt="Rate {outputs}", continuous=True, judge=FakeJudge({"reasoning": "ok", "score": 0.7})
    )
    assert ev(outputs="x")["score"] == pytest.approx(0.7)
    ev = create_llm_as_judge(
        prompt="Rate {outputs}", choices=[0.0, 0.5, 1.0], judge=FakeJudge({"reasoning": "half", "score": 0.5})
    )
    assert ev(outputs="x")["score"] == 0.5
    schema = {
        "type": "object",
        "properties": {"why": {"type": "string"}, "equal": {"type": "boolean"}},
        "required": ["why", "equal"],
    }
    ev = create_llm_as_judge(
        prompt="Equal? {inputs} {outputs}", output_schema=schema, judge=FakeJudge({"why": "same", "equal": True})
    )
    assert ev(inputs="a", outputs="a") == {"why": "same", "equal": True}


def test_extra_keyword_arguments_fill_template_variables() -> None:
    judge = FakeJudge({"reasoning": "ok", "score": False})
    ev = create_llm_as_judge(prompt="Context: {context}\n{inputs}\n{outputs}", judge=judge)
    assert ev(inputs="sky?", outputs="red", context="It is early evening.")["score"] is False
    assert "It is early evening." in str(judge.requests[-1].messages)


def test_async_factories_are_awaited() -> None:
    ev = create_async_llm_as_judge(prompt="Is {outputs} polite?", judge=FakeJudge({"reasoning": "yes", "score": True}))

    async def main() -> Any:
        return await ev(outputs="thank you")

    assert anyio.run(main)["score"] is True


def test_judge_and_model_arguments() -> None:
    assert judge_params(None, "openai:o3-mini") == {"model": "openai:o3-mini"}
    assert judge_params(None, "gpt-4o") == {"model": "openai:gpt-4o"}
    assert judge_params(None, "claude-3-5-sonnet-latest") == {"model": "anthropic:claude-3-5-sonnet-latest"}

    class OpenAIClient:
        base_url = "http://127.0.0.1:9/v1/"
        chat = object()

    got = judge_params(OpenAIClient(), "gpt-5.4")
    assert got == {"judge": {"provider": "openai", "model": "gpt-5.4", "base_url": "http://127.0.0.1:9/v1"}}

    class ChatModel:
        def invoke(self, messages: Any) -> Any: ...
        async def ainvoke(self, messages: Any) -> Any: ...
        def with_structured_output(self, schema: Any, **kwargs: Any) -> Any: ...

    from assay.compat.langchain import LangChainJudge

    wrapped = judge_params(ChatModel(), None)["judge"]
    assert isinstance(wrapped, LangChainJudge)  # called through its own API
    with pytest.raises(ConfigError, match="a judge is required"):
        judge_params(None, None)


def test_model_shorthand_honours_the_base_url_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert shorthand_judge("openai:o3-mini") == {"provider": "openai", "model": "o3-mini"}
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8787/v1/")
    assert shorthand_judge("openai:o3-mini")["base_url"] == "http://127.0.0.1:8787/v1"
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:11434")
    assert shorthand_judge("ollama:llama3.1")["base_url"] == "http://127.0.0.1:11434"


def test_scores_keep_openevals_types() -> None:
    assert openevals_result(Result("toxicity", 0.0, True, "rude"))["score"] is True  # inverted by assay
    assert openevals_result(Result("json_match:all", 0.5, False))["score"] == 0.5  # a mean, not a verdict
    assert openevals_result(Result("score", 0.5, 0.5))["score"] == 0.5
    assert openevals_result(Result("label", 1.0, "good"))["score"] == 1.0


def test_e2b_execution_runs_locally_without_e2b() -> None:
    from tests.support.sandbox import require_sandbox

    require_sandbox()
    from assay.compat.openevals.code.e2b.execution import create_e2b_execution_evaluator

    ev = create_e2b_execution_evaluator(sandbox=object(), environment_variables={"X": "1"})
    r = ev(outputs="import os\nassert os.environ['X'] == '1'")
    assert (r["key"], r["score"]) == ("execution_succeeded", True)
    assert ev(outputs="raise SystemExit(2)")["score"] is False


def test_unscored_results_raise_like_openevals() -> None:
    with pytest.raises(EvaluatorError, match="judge down"):
        openevals_result(Result.from_error("score", "judge down"))
    r = openevals_result(Result("trajectory_strict_match", 1.0, True, None))
    assert isinstance(r, EvaluatorResult) and r["score"] is True


def test_trajectory_factories_both_import_paths() -> None:
    from assay.compat.agentevals.trajectory import check_trajectory, create_trajectory_match_evaluator

    # the two libraries differ on a field-list override's missing path (tests/unit/compat)
    call = {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}
    ev = create_trajectory_match_evaluator(trajectory_match_mode="superset", tool_args_match_mode="ignore")
    r = ev(outputs=[call], reference_outputs=[call])
    assert (r["key"], r["score"]) == ("trajectory_superset_match", True)
    assert check_trajectory(expected=["a", "b"], actual=["a", "x", "b"], mode="subsequence").passed


def test_trajectory_judge_catalog_spelling() -> None:
    from assay.compat.agentevals.trajectory import TRAJECTORY_ACCURACY_PROMPT, create_trajectory_llm_as_judge

    judge = FakeJudge({"reasoning": "efficient", "score": True})
    ev = create_trajectory_llm_as_judge(prompt=TRAJECTORY_ACCURACY_PROMPT, judge=judge)
    call = {"role": "assistant", "tool_calls": [{"function": {"name": "lookup", "arguments": "{}"}}]}
    score = ev(expected=[call], actual=[call])
    assert (
        score.score == 1.0
        and score["score"] is True
        and score.reasoning == "efficient"
        and score["key"] == "trajectory_accuracy"
    )
    assert "lookup" in str(judge.requests[-1].messages)
