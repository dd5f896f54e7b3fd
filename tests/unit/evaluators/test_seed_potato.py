"""potato's documented examples with only the import changed to ``assay.evaluators``.

The judge examples run against the stand-in judge server on loopback, configured the way potato
users configure it (``ai_support`` with an OpenAI-compatible ``base_url``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from assay import Result
from assay.evaluators import (
    RUBRIC_PRESETS,
    AgentAsJudgeEvaluator,
    Contains,
    EditDistance,
    EmbeddingDistance,
    ExactMatch,
    JSONSchemaMatch,
    JSONValid,
    LLMTrajectoryJudge,
    RegexMatch,
    ToolCallAccuracyEvaluator,
    ToolUseEvaluator,
    TrajectoryMatchEvaluator,
    make_rubric_dag,
    rag_triad,
)
from assay.registry import build_evaluator, list_evaluators
from assay.testing.judge_server import JudgeServerThread


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


agent_trace = [
    {"role": "user", "content": "refund order 7"},
    {"role": "assistant", "content": "", "tool_calls": [call("search", q="order 7"), call("submit", id=1, note="x")]},
    {"role": "tool", "content": "ok"},
    {"role": "assistant", "content": "done"},
]
gold_trace = [
    {"role": "user", "content": "refund order 7"},
    {"role": "assistant", "content": "", "tool_calls": [call("submit", id=1)]},
    {"role": "assistant", "content": "", "tool_calls": [call("search", q="something else")]},
]
trace = agent_trace
gold = gold_trace


def test_trajectory_match_evaluator() -> None:
    ev = TrajectoryMatchEvaluator(
        mode="unordered",  # strict | unordered | subset | superset
        tool_args_match_mode="superset",  # exact | ignore | subset | superset
        tool_args_match_overrides={"search": "ignore"},
    )
    result = ev.evaluate(outputs=agent_trace, reference_outputs=gold_trace)
    assert (result.key, result.score) == ("trajectory_match", 1.0)
    # potato's strict compares the flat tool-call sequence: message boundaries do not count
    strict = TrajectoryMatchEvaluator(mode="strict", tool_args_match_mode="ignore")
    assert strict.evaluate(outputs=agent_trace, reference_outputs=agent_trace[:2]).score == 1.0
    assert build_evaluator("trajectory_match", {"mode": "unordered"}).evaluate(outputs=trace, reference_outputs=gold)


def test_tool_use_examples() -> None:
    r = ToolUseEvaluator(expected_tool="submit", expected_args={"id": 1}).evaluate(outputs=trace)
    assert (r.key, r.score) == ("tool_use:submit", 1.0)
    r = ToolCallAccuracyEvaluator(args_match_mode="exact").evaluate(outputs=trace, reference_outputs=gold)
    assert (r.score, r.value) == (0.0, "0/2")
    r = ToolCallAccuracyEvaluator(args_match_mode="ignore").evaluate(outputs=trace, reference_outputs=gold)
    assert r["score"] == 1.0  # openevals-style subscripting


def test_heuristics_with_potato_names() -> None:
    a, b, text = "kitten", "sitting", "an error occurred"
    assert ExactMatch(case_sensitive=False).evaluate(outputs="HI", reference_outputs="hi").score == 1.0
    assert Contains(substring="error").evaluate(outputs=text).score == 1.0
    assert EditDistance().evaluate(outputs=a, reference_outputs=b).score == pytest.approx(1 - 3 / 7)
    schema = {"type": "object", "required": ["answer"]}
    assert JSONSchemaMatch(schema).evaluate(outputs='{"answer": 1}').score == 1.0
    assert JSONValid().evaluate(outputs="{'a': 1}").score == 0.0
    assert RegexMatch(r"\d+").evaluate(outputs="order 42").score == 1.0
    ev = EmbeddingDistance(embed_fn=lambda t: [1.0, float(len(t))])
    assert ev.evaluate(outputs=a, reference_outputs=a).score == pytest.approx(1.0)
    assert EmbeddingDistance(model_name="all-MiniLM-L6-v2").params.model == "all-MiniLM-L6-v2"


def test_levenshtein_distance_key_and_registry_names() -> None:
    r = build_evaluator("levenshtein_distance").evaluate(outputs="abc", reference_outputs="abd")
    assert r.key == "levenshtein_distance"
    names = {e["name"] for e in list_evaluators()}
    assert {"llm_trajectory_judge", "trajectory_match", "agent_as_judge", "rubric_dag"} <= names


def test_result_is_a_read_only_mapping_and_honours_threshold() -> None:
    r = EditDistance(threshold=0.9).evaluate(outputs="kitten", reference_outputs="sitting")
    assert r["score"] == r.score and r["key"] == "edit_distance"
    assert set(r) == {"key", "score", "value", "comment", "metadata"}
    assert r.passed is False  # 0.57 < 0.9
    assert EditDistance().evaluate(outputs="kitten", reference_outputs="sitting").passed is True
    with pytest.raises(TypeError):
        r["score"] = 1.0  # type: ignore[index]
    with pytest.raises(KeyError):
        r["nope"]
    assert Result("k", 0.7, threshold=0.8).passed is False


def test_multi_result_evaluators_have_aevaluate() -> None:
    ev = build_evaluator("json_match", {"aggregator": "all"})

    async def main() -> list[Result]:
        return await ev.aevaluate(outputs={"a": 1}, reference_outputs={"a": 1})  # type: ignore[no-any-return]

    assert [r.score for r in anyio.run(main)] == [1.0]


# -- judges, configured with potato's ai_support against the stand-in server -----------------------


def rule(body: dict[str, Any]) -> dict[str, Any]:
    prompt = json.dumps(body["messages"])
    props = set(((body.get("response_format") or {}).get("json_schema") or {}).get("schema", {}).get("properties", {}))
    if "verdicts" in props:
        reqs = ["The flight is under $400", "The flight is refundable", "The itinerary was emailed to the user"]
        return {
            "verdicts": [{"requirement": r, "satisfied": "emailed" not in r, "evidence": "step 2"} for r in reqs],
            "reasoning": "two of three",
        }
    if "choice" in props:
        return {"reasoning": "fine", "choice": "yes"}
    if "claims" in props:
        return {"claims": [{"claim": "Paris is the capital", "supported": True}], "reasoning": "ok"}
    assert "search" in prompt or "Paris" in prompt or "capital" in prompt
    return {"reasoning": "ok", "score": 0.8}


@pytest.fixture(scope="module")
def task_config() -> Iterator[dict[str, Any]]:
    with JudgeServerThread(rule=rule) as server:
        yield {
            "ai_support": {
                "enabled": True,
                "endpoint_type": "openai",
                "ai_config": {"model": "gpt-4o-mini", "base_url": server.url + "/v1", "api_key": "sk-test"},
            }
        }


def test_llm_trajectory_judge(task_config: dict[str, Any]) -> None:
    task_prompt = "refund order 7"
    judge = LLMTrajectoryJudge(config=task_config, continuous=True)  # 0.0–1.0 score
    result = judge.evaluate(outputs=agent_trace, inputs=task_prompt)
    assert (result.key, result.score) == ("trajectory_accuracy", 0.8)
    assert build_evaluator("llm_trajectory_judge", {"config": task_config}).key == "trajectory_accuracy"


def test_make_rubric_dag(task_config: dict[str, Any]) -> None:
    config = task_config
    ev = make_rubric_dag(config, preset="answer_quality")
    result = ev.evaluate(inputs="Capital of France?", outputs="Paris [gouvernement.fr].")
    assert result.score == 1.0
    assert [step["node"] for step in result.metadata["path"]] == ["answers", "grounded"]
    assert "answer_quality" in RUBRIC_PRESETS
    with pytest.raises(KeyError):
        make_rubric_dag(config, preset="nope")


def test_rag_triad(task_config: dict[str, Any]) -> None:
    config = task_config
    q, answer, retrieved_docs = "Capital of France?", "Paris is the capital.", ["Paris is France's capital."]
    triad = rag_triad(config)  # {context_relevance, groundedness, answer_relevance}
    g = triad["groundedness"].evaluate(inputs={"question": q, "context": retrieved_docs}, outputs=answer)
    assert g.score == 1.0
    assert g.metadata["claims"][0]["supported"] is True


def test_agent_as_judge_evaluator(task_config: dict[str, Any]) -> None:
    config, task, trajectory = task_config, "book a flight", agent_trace
    ev = AgentAsJudgeEvaluator(
        config,
        requirements=[
            "The flight is under $400",
            "The flight is refundable",
            "The itinerary was emailed to the user",
        ],
    )
    r = ev.evaluate(inputs={"question": task}, outputs=trajectory)
    assert r.score == pytest.approx(2 / 3)
    assert [v["satisfied"] for v in r.metadata["verdicts"]] == [True, True, False]


def test_injected_potato_endpoint() -> None:
    class Endpoint:
        def query(self, prompt: str, model: Any) -> str:
            assert "score" in model.model_fields
            return json.dumps({"score": 0.25, "reasoning": "meh"})

    judge = LLMTrajectoryJudge(endpoint=Endpoint(), continuous=True)
    assert judge.evaluate(outputs=agent_trace, inputs="x").score == 0.25


def test_rag_triad_question_and_context_keys(task_config: dict[str, Any]) -> None:
    """potato's ``question_key``/``context_key``: the fields of the inputs holding them."""
    triad = rag_triad(task_config, question_key="query", context_key="retrieved")
    inputs = {"query": "Capital of France?", "retrieved": ["Paris is France's capital."]}
    results = {k: ev.evaluate(inputs=inputs, outputs="Paris is the capital.") for k, ev in triad.items()}
    assert {k: r.score for k, r in results.items()} == {
        "context_relevance": 0.8,
        "groundedness": 1.0,
        "answer_relevance": 0.8,
    }
