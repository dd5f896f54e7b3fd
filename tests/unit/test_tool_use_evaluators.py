"""ToolUse and ToolCallAccuracy (potato semantics, REFERENCE_SEMANTICS.md §2)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assay import ConfigError, ToolCallAccuracy, ToolUse
from assay.registry import build_evaluator


def call(name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": f"id_{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args or {})},
    }


def ai(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


TRAJ = [
    {"role": "user", "content": "refund order 7"},
    ai(call("get_order", {"order_id": 7, "include": ["items"]})),
    {"role": "tool", "tool_call_id": "id_get_order", "content": "{}"},
    ai(call("issue_refund", {"order_id": 7, "amount": 12.5})),
    {"role": "tool", "tool_call_id": "id_issue_refund", "content": "{}"},
    {"role": "assistant", "content": "Refunded."},
]


class TestToolUse:
    def test_called(self) -> None:
        r = ToolUse(expected_tool="issue_refund").evaluate(outputs=TRAJ)
        assert (r.key, r.score, r.value) == ("tool_use:issue_refund", 1.0, True)
        assert r.comment == "tool 'issue_refund' called"
        assert r.metadata == {"called_tools": ["get_order", "issue_refund"]}

    def test_not_called(self) -> None:
        r = ToolUse(expected_tool="send_email").evaluate(outputs=TRAJ)
        assert (r.score, r.value, r.comment) == (0.0, False, "tool 'send_email' not called")

    def test_no_calls_at_all(self) -> None:
        r = ToolUse(expected_tool="f").evaluate(outputs=[{"role": "assistant", "content": "hi"}])
        assert r.score == 0.0 and r.metadata == {"called_tools": []}

    def test_expected_args_default_subset_means_expected_within_actual(self) -> None:
        # potato rewrites subset to superset: the call may carry extra keys
        ev = ToolUse(expected_tool="issue_refund", expected_args={"order_id": 7})
        r = ev.evaluate(outputs=TRAJ)
        assert r.score == 1.0 and r.comment == "tool 'issue_refund' called with expected args"
        assert ToolUse(expected_tool="issue_refund", expected_args={"order_id": 8}).evaluate(outputs=TRAJ).score == 0.0
        more = {"order_id": 7, "amount": 12.5, "reason": "late"}
        r = ToolUse(expected_tool="issue_refund", expected_args=more).evaluate(outputs=TRAJ)
        assert r.score == 0.0 and r.comment == "tool 'issue_refund' not called with expected args"

    def test_superset_is_the_same_as_subset(self) -> None:
        for mode in ("subset", "superset"):
            ev = ToolUse(expected_tool="issue_refund", expected_args={"amount": 12.5}, args_match_mode=mode)
            assert ev.evaluate(outputs=TRAJ).score == 1.0

    def test_exact_and_ignore(self) -> None:
        exact = ToolUse(expected_tool="issue_refund", expected_args={"order_id": 7}, args_match_mode="exact")
        assert exact.evaluate(outputs=TRAJ).score == 0.0
        full = {"order_id": 7, "amount": 12.5}
        assert (
            ToolUse(expected_tool="issue_refund", expected_args=full, args_match_mode="exact")
            .evaluate(outputs=TRAJ)
            .score
            == 1.0
        )
        ignore = ToolUse(expected_tool="issue_refund", expected_args={"order_id": 99}, args_match_mode="ignore")
        assert ignore.evaluate(outputs=TRAJ).score == 1.0

    def test_any_matching_call_is_enough(self) -> None:
        traj = [ai(call("f", {"x": 1}), call("f", {"x": 2}))]
        assert ToolUse(expected_tool="f", expected_args={"x": 2}).evaluate(outputs=traj).score == 1.0

    def test_empty_expected_args_checks_the_name_only(self) -> None:
        assert ToolUse(expected_tool="get_order", expected_args={}).evaluate(outputs=TRAJ).score == 1.0

    def test_reference_is_not_used(self) -> None:
        r = ToolUse(expected_tool="get_order").evaluate(outputs=TRAJ, reference_outputs=[ai(call("zzz"))])
        assert r.score == 1.0

    def test_params_are_validated(self) -> None:
        with pytest.raises(ConfigError, match=r"tool_use.*params\.expected_tool"):
            ToolUse()
        with pytest.raises(ConfigError, match=r"params\.args_match_mode"):
            ToolUse(expected_tool="f", args_match_mode="fuzzy")

    def test_custom_key_and_registry(self) -> None:
        ev = build_evaluator("tool_use", {"expected_tool": "get_order", "key": "looked_up"})
        assert ev.evaluate(outputs=TRAJ).key == "looked_up"


class TestToolCallAccuracy:
    def test_full_credit(self) -> None:
        r = ToolCallAccuracy().evaluate(outputs=TRAJ, reference_outputs=TRAJ)
        assert (r.key, r.score, r.value) == ("tool_call_accuracy", 1.0, "2/2")
        assert r.comment == "reproduced 2 of 2 reference tool calls"
        assert r.metadata == {"matched": 2, "reference_count": 2, "agent_count": 2}

    def test_partial_credit(self) -> None:
        ref = [
            ai(
                call("get_order", {"order_id": 7, "include": ["items"]}),
                call("send_email", {"to": "x"}),
                call("h"),
            )
        ]
        r = ToolCallAccuracy().evaluate(outputs=TRAJ, reference_outputs=ref)
        assert r.score == pytest.approx(1 / 3) and r.value == "1/3"
        assert r.metadata == {"matched": 1, "reference_count": 3, "agent_count": 2}

    def test_extra_agent_calls_are_not_penalised(self) -> None:
        ref = [ai(call("issue_refund", {"order_id": 7, "amount": 12.5}))]
        assert ToolCallAccuracy().evaluate(outputs=TRAJ, reference_outputs=ref).score == 1.0

    def test_each_agent_call_counts_once(self) -> None:
        ref = [ai(call("f"), call("f"), call("f"))]
        r = ToolCallAccuracy().evaluate(outputs=[ai(call("f"))], reference_outputs=ref)
        assert r.value == "1/3"
        r = ToolCallAccuracy().evaluate(outputs=[ai(call("f"), call("f"))], reference_outputs=ref)
        assert r.value == "2/3"

    def test_order_does_not_matter(self) -> None:
        out = [ai(call("g", {"b": 2})), ai(call("f", {"a": 1}))]
        ref = [ai(call("f", {"a": 1})), ai(call("g", {"b": 2}))]
        assert ToolCallAccuracy().evaluate(outputs=out, reference_outputs=ref).score == 1.0

    @pytest.mark.parametrize(
        ("mode", "expected"),
        [("exact", "0/1"), ("ignore", "1/1"), ("subset", "1/1"), ("superset", "0/1")],
    )
    def test_args_modes_are_oriented_agent_vs_reference(self, mode: str, expected: str) -> None:
        out = [ai(call("search", {"q": "cats"}))]
        ref = [ai(call("search", {"q": "cats", "limit": 5}))]
        assert ToolCallAccuracy(args_match_mode=mode).evaluate(outputs=out, reference_outputs=ref).value == expected

    def test_overrides(self) -> None:
        out = [ai(call("search", {"q": "cats", "ts": 1}))]
        ref = [ai(call("search", {"q": "cats", "ts": 2}))]
        assert ToolCallAccuracy().evaluate(outputs=out, reference_outputs=ref).score == 0.0
        ev = ToolCallAccuracy(tool_args_match_overrides={"search": ["q"]})
        assert ev.evaluate(outputs=out, reference_outputs=ref).score == 1.0
        with pytest.raises(ConfigError, match=r"evaluator 'tool_call_accuracy': params\.tool_args_match_overrides"):
            ToolCallAccuracy(tool_args_match_overrides={"search": "fuzzy"})

    def test_no_reference_calls_is_not_a_score(self) -> None:
        for ref in (None, [], [{"role": "assistant", "content": "no tools"}]):
            r = ToolCallAccuracy().evaluate(outputs=TRAJ, reference_outputs=ref)
            assert (r.score, r.value) == (None, None)
            assert r.comment == "no reference tool calls to score against"

    def test_agent_without_calls_scores_zero(self) -> None:
        r = ToolCallAccuracy().evaluate(outputs=[{"role": "assistant", "content": "x"}], reference_outputs=TRAJ)
        assert (r.score, r.value) == (0.0, "0/2")
