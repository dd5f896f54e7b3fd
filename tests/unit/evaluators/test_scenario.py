"""Scenario evaluators: reading the trajectory, tool results and the scenario fields."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assay.evaluators import (
    ErrorSuggestions,
    Escalation,
    InterruptRejection,
    MaxTurns,
    PendingConfirmation,
    ResponseContains,
    RoutingAccuracy,
    TaskCompleteSignal,
    TokenBudget,
    ToolGraph,
)
from assay.evaluators.scenario import calls_with_results, collect
from assay.traces.normalize import normalize_record, to_trace


def call(name: str, id_: str, **args: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}],
    }


def result(id_: str, content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": id_, "content": json.dumps(content)}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


# -- helpers -------------------------------------------------------------------------------------


def test_collect_walks_criteria_lists() -> None:
    scenario = {"success_criteria": [{"max_turns": 3}, {"response_contains": ["a"]}, {"max_turns": 5}]}
    assert collect(scenario, "success_criteria.max_turns") == [3, 5]
    assert collect({"success_criteria": {"max_turns": 2}}, "success_criteria.max_turns") == [2]
    assert collect({}, "success_criteria.max_turns") == []


def test_tool_results_pair_by_id_and_by_order() -> None:
    msgs = [
        call("a", "1"),
        call("b", "2"),
        result("2", {"status": "ok-b"}),
        result("1", {"status": "ok-a"}),
        call("c", "3"),
        {"role": "tool", "content": "plain text"},  # no id: the oldest waiting call
    ]
    pairs = calls_with_results(to_trace(msgs))
    assert [(c.name, r) for c, r in pairs] == [
        ("a", {"status": "ok-a"}),
        ("b", {"status": "ok-b"}),
        ("c", "plain text"),
    ]


# -- max_turns / token_budget --------------------------------------------------------------------


def test_max_turns_reads_the_seed_shapes() -> None:
    msgs = [user("q"), say("a"), user("q2"), say("b"), say("c")]
    ev = MaxTurns()
    assert ev.evaluate(outputs=msgs, scenario={"success_criteria": {"max_turns": 3}}).score == 1.0
    assert ev.evaluate(outputs=msgs, scenario={"success_criteria": [{"max_turns": 2}]}).score == 0.0
    r = ev.evaluate(outputs=msgs)  # absent: the seed's default of 10
    assert r.score == 1.0 and r.metadata == {"turns": 3, "max_turns": 10}
    assert MaxTurns(max_turns=2).evaluate(outputs=msgs).score == 0.0
    custom = MaxTurns(max_turns_field="limits.turns")
    assert custom.evaluate(outputs=msgs, scenario={"limits": {"turns": 2}}).score == 0.0


@pytest.mark.parametrize(
    ("usage", "tokens"),
    [
        ({"total_tokens": 1200}, 1200),
        ({"input_tokens": 1000, "output_tokens": 300}, 1300),
        ({"prompt_tokens": 4000, "completion_tokens": 2000}, 6000),
    ],
)
def test_token_budget_usage_shapes(usage: dict[str, int], tokens: int) -> None:
    rec = {"messages": [say("x")], "usage": usage, "scenario": {"max_tokens": 5000}}
    r = TokenBudget().score(normalize_record(rec))
    assert r.value == tokens
    assert r.score == (1.0 if tokens <= 5000 else 0.0)


def test_token_budget_without_usage_is_not_scored() -> None:
    r = TokenBudget().evaluate(outputs=[say("x")])
    assert r.score is None and "no token usage" in (r.comment or "")
    t = normalize_record({"messages": [say("x")], "metrics": {"total_tokens": 7000}})
    assert TokenBudget().score(t).score == 0.0  # default budget 5000, the seed's `metrics` field
    assert TokenBudget(max_tokens=8000).score(t).score == 1.0


# -- response_contains ---------------------------------------------------------------------------


def test_response_contains() -> None:
    scenario = {"success_criteria": [{"response_contains": ["refund", "3-5 days"]}, {"max_turns": 4}]}
    ok = [user("refund?"), say("Your REFUND will arrive in 3-5 days.")]
    bad = [user("refund?"), say("Your refund is on its way.")]
    assert ResponseContains().evaluate(outputs=ok, scenario=scenario).score == 1.0
    r = ResponseContains().evaluate(outputs=bad, scenario=scenario)
    assert r.score == 0.0 and r.metadata["missing"] == ["3-5 days"]
    # nothing expected: passes (the seed), or skipped on request
    assert ResponseContains().evaluate(outputs=bad).score == 1.0
    assert ResponseContains(not_applicable="skip").evaluate(outputs=bad).score is None
    assert ResponseContains(phrases=["on its way"]).evaluate(outputs=bad).score == 1.0


# -- escalation / task_complete_signal -----------------------------------------------------------


def test_escalation_both_directions() -> None:
    escalated = [user("angry"), call("escalate_to_human", "1", reason="x")]
    calm = [user("hi"), say("hello")]
    ev = Escalation()
    assert ev.evaluate(outputs=escalated, scenario={"should_escalate": True}).score == 1.0
    assert ev.evaluate(outputs=calm, scenario={"should_escalate": True}).score == 0.0
    assert ev.evaluate(outputs=escalated).score == 0.0  # should_escalate absent = False
    assert ev.evaluate(outputs=calm).score == 1.0
    custom = Escalation(escalation_tool=["handoff", "page_oncall"], should_escalate_field="case.escalate")
    assert custom.evaluate(outputs=[call("handoff", "1")], scenario={"case": {"escalate": True}}).score == 1.0


def test_task_complete_signal() -> None:
    assert TaskCompleteSignal().evaluate(outputs=[call("signal_task_complete", "1")]).score == 1.0
    assert TaskCompleteSignal().evaluate(outputs=[say("done!")]).score == 0.0
    gated = TaskCompleteSignal(required_field="should_signal_complete")
    assert gated.evaluate(outputs=[say("done")], scenario={"should_signal_complete": False}).score == 1.0
    assert gated.evaluate(outputs=[say("done")], scenario={"should_signal_complete": True}).score == 0.0


# -- pending_confirmation / interrupt_rejection --------------------------------------------------


SENSITIVE = {"sensitive_tool": "delete_account"}


def test_pending_confirmation_flow() -> None:
    good = [
        call("delete_account", "1", id=7),
        result("1", {"status": "pending_confirmation"}),
        user("yes"),
        call("confirm_delete_account", "2"),
        result("2", {"status": "completed"}),
    ]
    ev = PendingConfirmation()
    assert ev.evaluate(outputs=good, scenario=SENSITIVE).score == 1.0
    executed = [call("delete_account", "1"), result("1", {"status": "completed"})]
    r = ev.evaluate(outputs=executed, scenario=SENSITIVE)
    assert r.score == 0.0 and "completed" in (r.comment or "")
    never_confirmed = good[:3]
    assert ev.evaluate(outputs=never_confirmed, scenario=SENSITIVE).score == 0.0
    assert ev.evaluate(outputs=[say("hi")], scenario=SENSITIVE).score == 0.0  # never called
    assert ev.evaluate(outputs=executed).score == 1.0  # no sensitive tool: not applicable, passes


def test_interrupt_rejection() -> None:
    scenario = {**SENSITIVE, "approval": "reject"}
    respected = [
        call("delete_account", "1"),
        result("1", {"status": "rejected"}),
        say("Understood, I did not delete the account."),
    ]
    retried = [*respected, call("delete_account", "2")]
    confirmed_anyway = [*respected, call("confirm_delete_account", "2")]
    ev = InterruptRejection()
    assert ev.evaluate(outputs=respected, scenario=scenario).score == 1.0
    assert ev.evaluate(outputs=retried, scenario=scenario).score == 0.0
    assert ev.evaluate(outputs=confirmed_anyway, scenario=scenario).score == 0.0
    assert ev.evaluate(outputs=retried, scenario={**SENSITIVE, "approval": "approve"}).score == 1.0


# -- error_suggestions / tool_graph / routing_accuracy -------------------------------------------


def test_error_suggestions() -> None:
    err = {"error": "order not found", "suggestions": ["check the order number", "search by email"]}
    answer = say("I could not find it. Could you check the order number?")
    relayed = [call("lookup_order", "1"), result("1", err), answer]
    ignored = [call("lookup_order", "1"), result("1", err), say("Something went wrong.")]
    bare = [call("lookup_order", "1"), result("1", {"error": "boom"}), say("Something went wrong.")]
    ev = ErrorSuggestions()
    assert ev.evaluate(outputs=relayed).score == 1.0
    assert ev.evaluate(outputs=ignored).score == 0.0
    r = ev.evaluate(outputs=bare)
    assert r.score == 0.0 and "without suggestions" in (r.comment or "")
    assert ev.evaluate(outputs=[call("x", "1"), result("1", {"ok": True}), say("fine")]).score == 1.0


def test_tool_graph() -> None:
    graph = {"expected_tool_graph": {"lookup_order": ["process_refund", "cancel_order"]}}
    offered = {"available_actions": [{"tool": "process_refund"}, {"tool": "cancel_order"}]}
    partial = {"available_actions": [{"tool": "process_refund"}, "track_order"]}
    ev = ToolGraph()
    assert ev.evaluate(outputs=[call("lookup_order", "1"), result("1", offered)], scenario=graph).score == 1.0
    r = ev.evaluate(outputs=[call("lookup_order", "1"), result("1", partial)], scenario=graph)
    assert r.score == 0.0 and "cancel_order" in (r.comment or "")
    assert ev.evaluate(outputs=[call("lookup_order", "1")]).score == 1.0  # no graph: passes


def test_routing_accuracy() -> None:
    routed = [user("my bill"), call("delegate_to_billing_agent", "1", task="x")]
    ev = RoutingAccuracy()
    assert ev.evaluate(outputs=routed, scenario={"expected_subagent": "billing"}).score == 1.0
    assert ev.evaluate(outputs=routed, scenario={"expected_subagent": "shipping"}).score == 0.0
    assert ev.evaluate(outputs=routed).score is None  # left out of the accuracy, as in the seed
    exact = RoutingAccuracy(match="exact")
    assert exact.evaluate(outputs=routed, scenario={"expected_subagent": "billing"}).score == 0.0
    assert exact.evaluate(outputs=routed, scenario={"expected_subagent": "billing_agent"}).score == 1.0


def test_routing_accuracy_reads_a_records_top_level_tool_calls() -> None:
    # the seed reads result["tool_calls"]; a record that also lists all_tool_calls keeps that rule
    rec = {
        "outputs": "routed",
        "tool_calls": [{"name": "delegate_to_billing", "args": {}}],
        "all_tool_calls": [{"name": "lookup_account", "args": {}}],
        "expected_subagent": "billing",
    }
    assert RoutingAccuracy().score(normalize_record(rec)).score == 1.0
    rec["tool_calls"] = [{"name": "delegate_to_shipping", "args": {}}]
    assert RoutingAccuracy().score(normalize_record(rec)).score == 0.0


def test_scenario_from_the_record_itself() -> None:
    # without a `scenario` object the record's own fields are the scenario
    rec = {"messages": [user("q"), call("escalate_to_human", "1")], "should_escalate": True}
    assert Escalation().score(normalize_record(rec)).score == 1.0
    rec2 = {"messages": [user("q"), say("a")], "scenario": {"success_criteria": {"max_turns": 0}}}
    assert MaxTurns().score(normalize_record(rec2)).score == 0.0
