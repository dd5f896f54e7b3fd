"""The agent-evaluation catalog's examples: its helpers with the import changed to
``assay.evaluators``, and its custom code evaluators, verbatim, run as ``python`` evaluators on
the catalog's own run-result shape (``messages`` + ``all_tool_calls`` with results + ``metrics``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from assay.evaluators import (
    TRAJECTORY_ACCURACY_PROMPT,
    ErrorSuggestions,
    Escalation,
    PendingConfirmation,
    PythonEvaluator,
    TaskCompleteSignal,
    TokenBudget,
    ToolGraph,
    ToolUse,
    TrajectoryMatch,
    check_trajectory,
    create_trajectory_llm_as_judge,
)
from assay.testing.judge_server import JudgeServerThread

# -- check_trajectory -----------------------------------------------------------------------------

actual_tool_calls = ["lookup_order", "check_refund_policy", "process_refund"]


def test_check_trajectory_modes() -> None:
    result = check_trajectory(
        expected=["lookup_order", "check_refund_policy", "process_refund"],
        actual=actual_tool_calls,
        mode="strict",
    )
    assert result.passed, f"Expected exact sequence, got: {actual_tool_calls}"
    result = check_trajectory(
        expected=["search_products", "check_inventory", "get_pricing"],
        actual=["get_pricing", "search_products", "check_inventory"],
        mode="unordered",
    )
    assert result.passed
    result = check_trajectory(
        expected=["lookup_order", "process_refund"],
        actual=["lookup_order", "check_refund_policy", "process_refund", "send_email"],
        mode="subsequence",
    )
    assert result.passed  # Passes — lookup_order and process_refund appear in order within actual
    assert not check_trajectory(expected=["a", "b"], actual=["b", "a"], mode="strict").passed


def test_plain_name_lists_in_the_evaluators() -> None:
    """A record with plain tool-name lists scores right instead of being refused."""
    ev = TrajectoryMatch(mode="superset", tool_args_match_mode="ignore")
    r = ev.evaluate(outputs=["lookup_order", "process_refund", "send_email"], reference_outputs=["process_refund"])
    assert r.score == 1.0
    assert TrajectoryMatch(mode="strict").evaluate(outputs=["a", "b"], reference_outputs=["a", "b"]).score == 1.0
    assert ToolUse(expected_tool="send_email").evaluate(outputs=["lookup_order", "send_email"]).score == 1.0
    bad = TrajectoryMatch(mode="strict").evaluate(outputs=[{"x": 1}], reference_outputs=["a"])
    assert bad.error is not None


# -- LLM-as-judge ---------------------------------------------------------------------------------

SUPPORT_EVAL_PROMPT = """
You are evaluating a customer support agent. Score the trajectory on:
1. Did the agent resolve the customer's issue?
2. Did the agent ask for approval before sensitive operations?
3. Was the response empathetic and professional?
4. Did the agent avoid unnecessary tool calls?

Score 1.0 if all criteria met, 0.5 for partial, 0.0 for failure.
Explain your reasoning.
"""

prompts: list[str] = []


def rule(body: dict[str, Any]) -> dict[str, Any]:
    prompts.append(body["messages"][-1]["content"])
    return {"reasoning": "resolved, polite", "score": 0.5}


@pytest.fixture(scope="module")
def judge() -> Iterator[dict[str, Any]]:
    with JudgeServerThread(rule=rule) as server:
        yield {"provider": "openai", "model": "o3-mini", "base_url": server.url + "/v1"}


def msgs(*names: str) -> list[dict[str, Any]]:
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": "{}"}} for i, n in enumerate(names)
    ]
    return [{"role": "user", "content": "refund order 7"}, {"role": "assistant", "content": None, "tool_calls": calls}]


def test_trajectory_judges(judge: dict[str, Any]) -> None:
    reference_trajectory, actual_trajectory = msgs("lookup_order"), msgs("lookup_order", "process_refund")
    evaluator = create_trajectory_llm_as_judge(prompt=TRAJECTORY_ACCURACY_PROMPT, judge=judge, continuous=True)
    score = evaluator(expected=reference_trajectory, actual=actual_trajectory)
    assert score.score == 0.5 and score.comment == "resolved, polite"
    assert "process_refund" in prompts[-1]
    evaluator = create_trajectory_llm_as_judge(prompt=SUPPORT_EVAL_PROMPT, judge=judge, continuous=True)
    assert evaluator(outputs=actual_trajectory).score == 0.5
    assert "customer support agent" in prompts[-1] and "<outputs>" in prompts[-1] and "process_refund" in prompts[-1]
    # openevals' model string (no call is made at build time)
    built = create_trajectory_llm_as_judge(prompt=SUPPORT_EVAL_PROMPT, model="openai:o3-mini")
    assert built.key == "trajectory_accuracy"


# -- custom code evaluators, verbatim ------------------------------------------------------------


def eval_max_turns(result, scenario):  # type: ignore[no-untyped-def]
    """Agent must complete within turn budget."""
    max_turns = scenario.get("success_criteria", {}).get("max_turns", 10)
    if isinstance(scenario.get("success_criteria"), list):
        for c in scenario["success_criteria"]:
            if isinstance(c, dict) and "max_turns" in c:
                max_turns = c["max_turns"]
    assistant_turns = len([m for m in result["messages"] if m["role"] == "assistant"])
    return assistant_turns <= max_turns


def eval_token_efficiency(result, max_tokens=5000):  # type: ignore[no-untyped-def]
    """Agent must stay within token budget."""
    total_tokens = result.get("metrics", {}).get("total_tokens", 0)
    return total_tokens <= max_tokens


def eval_response_contains(result, scenario):  # type: ignore[no-untyped-def]
    """Final response must contain expected phrases."""
    for criteria in scenario.get("success_criteria", []):
        if isinstance(criteria, dict) and "response_contains" in criteria:
            final_response = result["messages"][-1]["content"].lower()
            for phrase in criteria["response_contains"]:
                if phrase.lower() not in final_response:
                    return False
    return True


def eval_escalation(result, scenario):  # type: ignore[no-untyped-def]
    """Agent escalated when it should (and didn't when it shouldn't)."""
    tool_calls = [tc["name"] for tc in result.get("all_tool_calls", [])]
    should_escalate = scenario.get("should_escalate", False)

    if should_escalate:
        return "escalate_to_human" in tool_calls
    else:
        return "escalate_to_human" not in tool_calls


def eval_signal_task_complete(result):  # type: ignore[no-untyped-def]
    """Agent must explicitly signal completion."""
    tool_calls = [tc["name"] for tc in result.get("all_tool_calls", [])]
    return "signal_task_complete" in tool_calls


def eval_level_1_2(result, scenario):  # type: ignore[no-untyped-def]
    """Verify correct tool selection for read/create operations."""
    expected = scenario.get("expected_tools", [])
    actual = [tc["name"] for tc in result.get("tool_calls", [])]
    return all(e in actual for e in expected)


def eval_pending_confirmation_flow(result, scenario):  # type: ignore[no-untyped-def]
    """Test that Level 3-4 tools go through confirmation."""
    tool_calls = result.get("all_tool_calls", [])
    sensitive_tool = scenario.get("sensitive_tool")
    if not sensitive_tool:
        return True
    for tc in tool_calls:
        if tc["name"] == sensitive_tool:
            response = tc.get("result", {})
            if response.get("status") != "pending_confirmation":
                return False
    confirm_tool = f"confirm_{sensitive_tool}"
    tool_names = [tc["name"] for tc in tool_calls]
    if confirm_tool in tool_names:
        sensitive_idx = tool_names.index(sensitive_tool)
        confirm_idx = tool_names.index(confirm_tool)
        return confirm_idx > sensitive_idx
    return False


def eval_error_suggestions(result, scenario):  # type: ignore[no-untyped-def]
    """When a tool fails, response contains correct remediation suggestions."""
    tool_calls = result.get("all_tool_calls", [])
    for tc in tool_calls:
        response = tc.get("result", {})
        if response.get("error"):
            suggestions = response.get("suggestions", [])
            if not suggestions:
                return False
            final_response = result["messages"][-1]["content"].lower()
            mentioned = any(s.lower() in final_response for s in suggestions)
            if not mentioned:
                return False
    return True


def eval_tool_graph(result, scenario):  # type: ignore[no-untyped-def]
    """After each tool call, available_actions matches expected next tools."""
    expected_graph = scenario.get("expected_tool_graph", {})
    for tc in result.get("all_tool_calls", []):
        tool_name = tc["name"]
        response = tc.get("result", {})
        available = [a["tool"] for a in response.get("available_actions", [])]
        if tool_name in expected_graph:
            expected_next = expected_graph[tool_name]
            for expected in expected_next:
                if expected not in available:
                    return False
    return True


#: the catalog's run result: the tool calls (with results) in all_tool_calls, not in the messages
RESULT = {
    "messages": [
        {"role": "user", "content": "I want a refund for order 123"},
        {"role": "assistant", "content": "Your refund has been processed and will arrive in 3-5 business days."},
    ],
    "all_tool_calls": [
        {
            "name": "lookup_order",
            "args": {"order_id": 123},
            "result": {"available_actions": [{"tool": "check_refund_policy"}]},
        },
        {
            "name": "check_refund_policy",
            "args": {},
            "result": {"error": "timeout", "suggestions": ["3-5 business days"]},
        },
        {"name": "process_refund", "args": {}, "result": {"status": "pending_confirmation"}},
        {"name": "confirm_process_refund", "args": {}, "result": {"status": "completed"}},
        {"name": "signal_task_complete", "args": {}, "result": {}},
    ],
    "metrics": {"total_tokens": 3200},
}
SCENARIO = {
    "success_criteria": [{"max_turns": 3}, {"response_contains": ["refund", "3-5 business days"]}],
    "should_escalate": False,
    "sensitive_tool": "process_refund",
    "expected_tool_graph": {"lookup_order": ["check_refund_policy"]},
    "expected_tools": ["lookup_order", "process_refund"],
}

CUSTOM = [
    eval_max_turns,
    eval_token_efficiency,
    eval_response_contains,
    eval_escalation,
    eval_signal_task_complete,
    eval_level_1_2,
    eval_pending_confirmation_flow,
    eval_error_suggestions,
    eval_tool_graph,
]


@pytest.mark.parametrize("fn", CUSTOM, ids=lambda f: f.__name__)
def test_custom_code_evaluators_verbatim(fn: Any) -> None:
    # The seed's eval_max_turns calls .get on success_criteria before checking for a list, so it
    # crashes on the list form its siblings expect (a bug in the seed): it gets the dict form.
    scenario = {**SCENARIO, "success_criteria": {"max_turns": 3}} if fn is eval_max_turns else SCENARIO
    [r] = PythonEvaluator(function=fn).evaluate(outputs=RESULT, scenario=scenario)
    assert r.score == 1.0, (r.key, r.comment, r.error)


def test_custom_code_evaluators_catch_failures() -> None:
    worse = {**SCENARIO, "should_escalate": True, "expected_tools": ["refund_everything"]}
    for fn in (eval_escalation, eval_level_1_2):
        [r] = PythonEvaluator(function=fn).evaluate(outputs=RESULT, scenario=worse)
        assert r.score == 0.0, fn.__name__
    [r] = PythonEvaluator(function=eval_token_efficiency, kwargs={"max_tokens": 3000}).evaluate(outputs=RESULT)
    assert r.score == 0.0


def test_builtins_read_all_tool_calls_and_metrics() -> None:
    for ev in (Escalation(), PendingConfirmation(), ErrorSuggestions(), ToolGraph(), TaskCompleteSignal()):
        r = ev.evaluate(outputs=RESULT, scenario=SCENARIO)
        assert r.score == 1.0, (ev.name, r.comment)
    assert Escalation().evaluate(outputs=RESULT, scenario={**SCENARIO, "should_escalate": True}).score == 0.0
    # token_budget called directly honours the run result's metrics
    assert TokenBudget(max_tokens=3000).evaluate(outputs=RESULT).score == 0.0
    assert TokenBudget().evaluate(outputs=RESULT["messages"], metrics={"total_tokens": 9000}).score == 0.0


def test_agentevals_style_outputs_messages() -> None:
    def custom(outputs, reference_outputs):  # type: ignore[no-untyped-def]
        return outputs["messages"][-1]["content"] == reference_outputs["messages"][-1]["content"]

    m = RESULT["messages"]
    [r] = PythonEvaluator(function=custom).evaluate(outputs={"messages": m}, reference_outputs={"messages": m})
    assert r.score == 1.0
