"""``assay.compat.potato``: potato's ``potato.evaluators`` module paths and behaviours (offline;
potato's own tests run in tests/reference/test_upstream_suites.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assay.compat.potato.evaluators import (
    AgentAsJudgeEvaluator,
    Contains,
    EditDistance,
    ExactMatch,
    LLMTrajectoryJudge,
    RegexMatch,
    TrajectoryMatchEvaluator,
    build_evaluator,
    extract_tool_calls,
    get_supported_evaluators,
    list_evaluators,
    normalize_trajectory,
    register_evaluator,
)
from assay.compat.potato.evaluators import agentevals_adapter as adapter
from assay.compat.potato.evaluators.agent_as_judge import AgentAsJudgeEvaluator as FromSubmodule


class Endpoint:
    def __init__(self, payload: Any) -> None:
        self.payload = payload
        self.prompts: list[str] = []

    def query(self, prompt: str, model: Any = None) -> Any:
        self.prompts.append(prompt)
        return self.payload


def test_sub_modules_are_potatos() -> None:
    assert FromSubmodule is AgentAsJudgeEvaluator
    assert get_supported_evaluators() == sorted(get_supported_evaluators())
    assert len(get_supported_evaluators()) == 16
    assert {e["name"] for e in list_evaluators()} == set(get_supported_evaluators())


def test_registry_is_potatos() -> None:
    with pytest.raises(KeyError):
        build_evaluator("nope")
    assert isinstance(build_evaluator("trajectory_match", {"mode": "subset"}), TrajectoryMatchEvaluator)
    register_evaluator("always", lambda **p: Contains(substring=p.get("s", "")), "test only")
    assert build_evaluator("always", {"s": "b"}).evaluate(outputs="abc").score == 1.0


@pytest.mark.parametrize("cls", [ExactMatch, Contains, EditDistance])
def test_text_fields_of_dict_outputs(cls: Any) -> None:
    for field in ("output", "text", "content", "answer", "final_answer"):
        assert cls().evaluate(outputs={field: "same"}, reference_outputs={"answer": "same"}).score == 1.0
    assert RegexMatch(r"^\d+$").evaluate(outputs={"output": "123"}).score == 1.0
    assert ExactMatch().evaluate(outputs={"output": "a"}, reference_outputs="b").score == 0.0


def test_bad_modes_raise_value_error() -> None:
    with pytest.raises(ValueError, match="mode"):
        TrajectoryMatchEvaluator(mode="bogus")
    with pytest.raises(ValueError, match="tool_args_match_mode"):
        build_evaluator("trajectory_match", {"tool_args_match_mode": "bogus"})


def test_normalize_trajectory_shapes() -> None:
    trace = {"conversation": [{"speaker": "User", "text": "hi"}, {"speaker": "Agent (Action)", "text": "search(x y)"}]}
    calls = extract_tool_calls(trace)
    assert [(c.name, c.args) for c in calls] == [("search", {"_raw": "x y"})]
    steps = normalize_trajectory([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
    assert [(s.role, s.content) for s in steps] == [("user", "q"), ("assistant", "a")]
    assert normalize_trajectory(None) == [] and [s.content for s in normalize_trajectory("x")] == ["x"]


def test_judges_without_ai_support_give_no_score() -> None:
    assert LLMTrajectoryJudge(config={}).evaluate(outputs="x").score is None
    r = AgentAsJudgeEvaluator({}, requirements=["r"]).evaluate(inputs="t", outputs="x")
    assert r.score is None and "ai_support" in (r.error or "")


def test_pass_verdicts_and_the_task_reach_the_judge() -> None:
    ep = Endpoint({"pass": False, "reasoning": "wrong tool"})
    r = LLMTrajectoryJudge(endpoint=ep).evaluate(outputs="trace text", inputs="book a flight")
    assert r.score == 0.0 and r.comment == "wrong tool"
    assert "book a flight" in ep.prompts[0] and "trace text" in ep.prompts[0]
    cont = LLMTrajectoryJudge(endpoint=Endpoint(json.dumps({"score": 0.25})), continuous=True)
    assert cont.evaluate(outputs="x").score == 0.25


def test_agent_as_judge_metadata_has_spot_check_units() -> None:
    payload = {"verdicts": [{"requirement": "a", "satisfied": True}, {"requirement": "b", "satisfied": False}]}
    r = AgentAsJudgeEvaluator(endpoint=Endpoint(payload), requirements=["a", "b"]).evaluate(inputs="t", outputs="x")
    assert r.score == 0.5 and r.metadata["spot_check_units"] == 2 == r.metadata["total"]


def test_agentevals_wrapper() -> None:
    wrapped = adapter._AgentEvalsWrapper(lambda **kw: [{"key": "k", "score": 0.5}], key="fallback")
    r = wrapped(outputs="x", reference_outputs="y")
    assert (r.key, r.score, r.value, r.metadata) == ("k", 0.5, 0.5, {"source": "agentevals"})
    assert adapter.is_available() and adapter.graph_trajectory_strict_match().key == "graph_trajectory_strict_match"
