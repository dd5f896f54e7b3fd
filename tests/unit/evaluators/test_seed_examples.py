"""The seed documents' examples, typed in as a new user would (assay names, the docs' arguments)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from typing import Any

import pytest

from assay import build_evaluator, normalize_record
from assay.evaluators import (
    Composite,
    Contains,
    EditDistance,
    ErrorSuggestions,
    Escalation,
    ExactMatch,
    InterruptRejection,
    JsonMatch,
    JsonSchemaMatch,
    MaxTurns,
    MypyCheck,
    PendingConfirmation,
    PyrightCheck,
    ResponseContains,
    RoutingAccuracy,
    TaskCompleteSignal,
    TokenBudget,
    ToolGraph,
)

# -- potato "Heuristic / code evaluators" --------------------------------------------------------


def test_potato_heuristics() -> None:
    assert ExactMatch(case_sensitive=False).evaluate(outputs="HI", reference_outputs="hi").score == 1.0
    text = "Traceback: error in step 3"
    assert Contains(substring="error").evaluate(outputs=text).score == 1.0
    r = EditDistance().evaluate(outputs="kitten", reference_outputs="sitting")  # 1 - dist/maxlen
    assert r.score == pytest.approx(1 - 3 / 7)
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    model_json = '{"answer": "42"}'
    assert JsonSchemaMatch(schema).evaluate(outputs=model_json).score == 1.0  # positional, like potato
    assert build_evaluator("json_schema_match", {"schema": schema}).evaluate(outputs="{}").score == 0.0


# -- openevals "Evaluating structured output with exact match" -----------------------------------


def test_openevals_json_match_readme() -> None:
    outputs = [{"a": "Mango, Bananas", "b": 2}, {"a": "Apples", "b": 2, "c": [1, 2, 3]}]
    reference_outputs = [{"a": "Mango, Bananas", "b": 2}, {"a": "Apples", "b": 2, "c": [1, 2, 4]}]
    evaluator = JsonMatch(aggregator="all", list_aggregator="average", exclude_keys=["a"])
    result = evaluator(outputs=outputs, reference_outputs=reference_outputs)
    assert [(r.key, r.score) for r in result] == [("json_match:all", 0.5)]


# -- openevals code evaluators -------------------------------------------------------------------

CODE = """
def sum_of_two_numbers(a, b): return a + b
"""


@pytest.mark.skipif(shutil.which("pyright") is None, reason="pyright not installed")
def test_openevals_pyright_readme() -> None:
    result = PyrightCheck().evaluate(outputs=CODE)
    assert (result.key, result.score) == ("pyright_succeeded", 1.0)


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy not installed")
def test_openevals_mypy_readme() -> None:
    result = MypyCheck().evaluate(outputs=CODE)
    assert (result.key, result.score) == ("mypy_succeeded", 1.0)


# -- the agent-evals catalog's custom code evaluators --------------------------------------------


def tc(name: str, id_: str, **args: Any) -> dict[str, Any]:
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def run_record(scenario: dict[str, Any]) -> dict[str, Any]:
    """A customer-support agent run, as a user would log it: messages, metrics and the scenario."""
    return {
        "messages": [
            {"role": "user", "content": "I want a refund for order 123"},
            {"role": "assistant", "content": None, "tool_calls": [tc("lookup_order", "c1", order_id=123)]},
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": json.dumps(
                    {
                        "status": "found",
                        "available_actions": [{"tool": "check_refund_policy"}, {"tool": "process_refund"}],
                    }
                ),
            },
            {"role": "assistant", "content": None, "tool_calls": [tc("check_refund_policy", "c2")]},
            {"role": "tool", "tool_call_id": "c2", "content": json.dumps({"eligible": True})},
            {"role": "assistant", "content": None, "tool_calls": [tc("process_refund", "c3", order_id=123)]},
            {"role": "tool", "tool_call_id": "c3", "content": json.dumps({"status": "pending_confirmation"})},
            {"role": "user", "content": "yes, go ahead"},
            {"role": "assistant", "content": None, "tool_calls": [tc("confirm_process_refund", "c4")]},
            {"role": "tool", "tool_call_id": "c4", "content": json.dumps({"status": "completed"})},
            {"role": "assistant", "content": None, "tool_calls": [tc("signal_task_complete", "c5")]},
            {"role": "assistant", "content": "Your refund has been processed and will arrive in 3-5 business days."},
        ],
        "metrics": {"total_tokens": 3200},
        "scenario": scenario,
    }


SCENARIO = {
    "input": "I want a refund for order 123",
    "success_criteria": [{"max_turns": 8}, {"response_contains": ["refund", "3-5 business days"]}],
    "should_escalate": False,
    "sensitive_tool": "process_refund",
    "expected_tool_graph": {"lookup_order": ["check_refund_policy", "process_refund"]},
    "expected_tools": ["lookup_order", "check_refund_policy", "process_refund"],
}


def test_seed_custom_code_evaluators_on_a_good_run() -> None:
    trace = normalize_record(run_record(SCENARIO))
    for ev in (
        MaxTurns(),
        TokenBudget(),
        ResponseContains(),
        Escalation(),
        TaskCompleteSignal(),
        PendingConfirmation(),
        InterruptRejection(),
        ErrorSuggestions(),
        ToolGraph(),
    ):
        r = ev.score(trace)
        assert r.score == 1.0, (ev.name, r.comment)
    assert RoutingAccuracy().score(trace).score is None  # no expected_subagent: not counted


def test_seed_custom_code_evaluators_catch_failures() -> None:
    strict = {**SCENARIO, "success_criteria": [{"max_turns": 5}, {"response_contains": ["store credit"]}]}
    trace = normalize_record(run_record({**strict, "should_escalate": True}))
    assert MaxTurns().score(trace).score == 0.0  # 7 assistant turns > 5
    assert ResponseContains().score(trace).score == 0.0
    assert Escalation().score(trace).score == 0.0
    assert TokenBudget(max_tokens=3000).score(trace).score == 0.0


def test_seed_composition_all_must_pass() -> None:
    ev = Composite(
        evaluators=[
            {"name": "trajectory_match", "params": {"mode": "subsequence", "tool_args_match_mode": "ignore"}},
            {"name": "response_contains"},
            {"name": "max_turns"},
        ],
        mode="all",
    )
    rec = run_record(SCENARIO)
    rec["reference_outputs"] = [
        {"role": "assistant", "content": None, "tool_calls": [tc("lookup_order", "r1"), tc("process_refund", "r2")]}
    ]
    trace = normalize_record(rec)
    assert ev.score(trace).score == 1.0
