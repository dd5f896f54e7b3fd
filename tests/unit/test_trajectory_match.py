"""TrajectoryMatch: the five modes, the four args modes, overrides, comments and errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assay import ConfigError, Message, ToolCall, Trace, TrajectoryMatch
from assay.registry import build_evaluator


def call(name: str, args: Any = None, cid: str | None = None) -> dict[str, Any]:
    raw = "{}" if args is None else args if isinstance(args, str) else json.dumps(args)
    return {"id": cid or f"id_{name}", "type": "function", "function": {"name": name, "arguments": raw}}


def ai(*calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        m["tool_calls"] = list(calls)
    return m


def tool(cid: str = "x") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": "ok"}


def score(outputs: Any, reference: Any, **params: Any) -> float | None:
    return TrajectoryMatch(**params).evaluate(outputs=outputs, reference_outputs=reference).score


F, G, H = call("f", {"x": 1}), call("g", {"y": 2}), call("h", {"z": 3})


# --- modes ---------------------------------------------------------------------------------


class TestStrict:
    def test_identical_trajectories_pass(self) -> None:
        msgs = [{"role": "user", "content": "q"}, ai(F), tool(), ai(content="done")]
        r = TrajectoryMatch(mode="strict").evaluate(outputs=msgs, reference_outputs=msgs)
        assert (r.key, r.score, r.value) == ("trajectory_strict_match", 1.0, True)
        assert r.comment == "strict match pass: 1 agent tool call(s) vs 1 reference"
        assert r.metadata == {
            "mode": "strict",
            "tool_args_match_mode": "exact",
            "agent_tools": ["f"],
            "reference_tools": ["f"],
        }

    def test_order_across_messages_matters(self) -> None:
        assert score([ai(F), tool(), ai(G), tool()], [ai(G), tool(), ai(F), tool()]) == 0.0

    def test_order_inside_one_message_does_not(self) -> None:
        assert score([ai(F, G)], [ai(G, F)]) == 1.0

    def test_message_boundaries_matter(self) -> None:
        r = TrajectoryMatch().evaluate(
            outputs=[ai(F, G), tool(), tool()], reference_outputs=[ai(F), tool(), ai(G), tool()]
        )
        assert r.score == 0.0
        assert "3 messages vs 4 in the reference" in (r.comment or "")
        r = TrajectoryMatch().evaluate(outputs=[ai(F, G), tool(), tool()], reference_outputs=[ai(F), tool(), ai(G)])
        assert "message 0: 2 tool calls vs 1 in the reference" in (r.comment or "")
        r = TrajectoryMatch().evaluate(outputs=[ai(F), tool(), tool()], reference_outputs=[ai(F), tool(), ai(G)])
        assert "message 2: role 'tool' vs 'assistant' in the reference" in (r.comment or "")

    def test_extra_final_message_fails_and_says_so(self) -> None:
        r = TrajectoryMatch().evaluate(outputs=[ai(F), tool(), ai(content="done")], reference_outputs=[ai(F), tool()])
        assert r.score == 0.0 and "3 messages vs 2 in the reference" in (r.comment or "")

    def test_content_is_not_compared(self) -> None:
        assert score([ai(F, content="thinking"), tool("a")], [ai(F, content="other"), tool("b")]) == 1.0

    def test_roles_are_compared(self) -> None:
        assert score([{"role": "system", "content": "s"}], [{"role": "user", "content": "s"}]) == 0.0

    def test_comment_names_the_failing_call(self) -> None:
        r = TrajectoryMatch().evaluate(outputs=[ai(call("f", {"x": 2}))], reference_outputs=[ai(F)])
        assert r.score == 0.0
        assert 'message 0: agent call f({"x":2}) has no match in the reference message' in (r.comment or "")

    def test_calls_vs_no_calls(self) -> None:
        r = TrajectoryMatch().evaluate(outputs=[ai(content="x")], reference_outputs=[ai(F)])
        assert r.score == 0.0 and "has no tool calls" in (r.comment or "")

    def test_same_message_count_but_fewer_calls(self) -> None:
        r = TrajectoryMatch().evaluate(outputs=[ai(F)], reference_outputs=[ai(F, G)])
        assert r.score == 0.0 and "1 tool calls vs 2" in (r.comment or "")

    def test_both_empty_pass(self) -> None:
        assert score([], []) == 1.0

    def test_tool_calls_scope_is_potatos_flat_reading(self) -> None:
        out = [ai(F, G), tool(), tool(), ai(content="done")]
        ref = [ai(F), tool(), ai(G), tool()]
        assert score(out, ref) == 0.0
        assert score(out, ref, strict_scope="tool_calls") == 1.0
        r = TrajectoryMatch(strict_scope="tool_calls").evaluate(outputs=[ai(G, F)], reference_outputs=[ai(F, G)])
        assert r.score == 0.0 and "tool call 0: agent g(" in (r.comment or "")
        assert r.comment is not None and r.comment.startswith("strict (tool calls) match fail")


class TestMultisetModes:
    def test_unordered_ignores_order_but_counts_duplicates(self) -> None:
        assert score([ai(G), ai(F)], [ai(F), ai(G)], mode="unordered") == 1.0
        assert score([ai(F, F)], [ai(F)], mode="unordered") == 0.0
        assert score([ai(F)], [ai(F, F)], mode="unordered") == 0.0

    def test_unordered_ignores_non_tool_messages(self) -> None:
        out = [{"role": "user", "content": "a"}, ai(F), tool(), ai(content="b")]
        assert score(out, [ai(F)], mode="unordered") == 1.0

    def test_superset_allows_extra_agent_calls(self) -> None:
        assert score([ai(F, G, H)], [ai(G)], mode="superset") == 1.0
        assert score([ai(F, F)], [ai(F)], mode="superset") == 1.0
        r = TrajectoryMatch(mode="superset").evaluate(outputs=[ai(F)], reference_outputs=[ai(F), ai(G)])
        assert r.score == 0.0
        assert 'reference call 1 g({"y":2}) not found among the agent\'s calls' in (r.comment or "")

    def test_subset_allows_missing_calls_but_not_extra(self) -> None:
        assert score([ai(G)], [ai(F, G, H)], mode="subset") == 1.0
        assert score([], [ai(F)], mode="subset") == 1.0  # no agent calls: vacuously a subset
        r = TrajectoryMatch(mode="subset").evaluate(outputs=[ai(F, H)], reference_outputs=[ai(F)])
        assert r.score == 0.0 and 'agent call 1 h({"z":3}) is not in the reference' in (r.comment or "")
        assert score([ai(F, F)], [ai(F)], mode="subset") == 0.0

    def test_greedy_first_fit_like_the_references(self) -> None:
        fx, fxy = call("f", {"x": 1}), call("f", {"x": 1, "y": 2})
        # a perfect matching exists, but first-fit pairs ref f{x} with agent f{x,y} first
        assert score([ai(fxy), ai(fx)], [ai(fx), ai(fxy)], mode="superset", tool_args_match_mode="superset") == 0.0

    def test_no_calls_anywhere_pass(self) -> None:
        for mode in ("unordered", "subset", "superset", "subsequence"):
            assert score([{"role": "user", "content": "a"}], [ai(content="b")], mode=mode) == 1.0


class TestSubsequence:
    def test_reference_in_order_within_agent_calls(self) -> None:
        assert score([ai(H), ai(F), ai(H), ai(G)], [ai(F), ai(G)], mode="subsequence") == 1.0

    def test_order_matters(self) -> None:
        r = TrajectoryMatch(mode="subsequence").evaluate(outputs=[ai(G), ai(F)], reference_outputs=[ai(F), ai(G)])
        assert (r.key, r.score) == ("trajectory_subsequence_match", 0.0)
        assert 'reference call 1 g({"y":2}) does not appear in order' in (r.comment or "")

    def test_each_agent_call_used_once(self) -> None:
        assert score([ai(F)], [ai(F), ai(F)], mode="subsequence") == 0.0
        assert score([ai(F), ai(G), ai(F)], [ai(F), ai(F)], mode="subsequence") == 1.0

    def test_args_modes_apply(self) -> None:
        out = [ai(call("f", {"x": 1, "extra": True}))]
        assert score(out, [ai(F)], mode="subsequence") == 0.0
        assert score(out, [ai(F)], mode="subsequence", tool_args_match_mode="superset") == 1.0

    def test_registry_alias(self) -> None:
        ev = build_evaluator("trajectory_subsequence_match", {})
        assert ev.evaluate(outputs=[ai(H), ai(F)], reference_outputs=[ai(F)]).score == 1.0


# --- args modes ----------------------------------------------------------------------------

Q = call("search", {"q": "cats"})
QL = call("search", {"q": "cats", "limit": 5})


@pytest.mark.parametrize(
    ("args_mode", "out", "ref", "expected"),
    [
        ("exact", Q, Q, 1.0),
        ("exact", Q, QL, 0.0),
        ("ignore", Q, call("search", {"q": "dogs"}), 1.0),
        ("subset", Q, QL, 1.0),  # agent args ⊆ reference args
        ("subset", QL, Q, 0.0),
        ("superset", QL, Q, 1.0),  # agent args ⊇ reference args
        ("superset", Q, QL, 0.0),
        ("subset", call("search", {"q": "dogs"}), QL, 0.0),  # values must be equal too
    ],
)
def test_args_modes(args_mode: str, out: dict[str, Any], ref: dict[str, Any], expected: float) -> None:
    for mode in ("strict", "unordered", "superset", "subset", "subsequence"):
        got = score([ai(out)], [ai(ref)], mode=mode, tool_args_match_mode=args_mode)
        assert got == expected, (mode, args_mode)


def test_subset_and_superset_compare_top_level_keys_only() -> None:
    out = call("f", {"o": {"a": 1, "b": 2}})
    ref = call("f", {"o": {"a": 1}})
    assert score([ai(out)], [ai(ref)], tool_args_match_mode="superset") == 0.0


def test_arguments_are_compared_parsed() -> None:
    out = call("f", '{ "b": 2,  "a": 1.0 }')
    ref = {"id": "1", "type": "function", "function": {"name": "f", "arguments": {"a": 1, "b": 2}}}
    assert score([ai(out)], [ai(ref)]) == 1.0
    assert score([ai(call("f", {"l": [1, 2]}))], [ai(call("f", {"l": [2, 1]}))]) == 0.0


def test_names_are_case_sensitive() -> None:
    assert score([ai(call("F", {"x": 1}))], [ai(F)], tool_args_match_mode="ignore") == 0.0


def test_invalid_json_arguments_are_compared_raw_not_raised() -> None:
    same = [ai(call("f", "not json"))]
    assert score(same, same) == 1.0
    assert score(same, [ai(call("f", "other"))]) == 0.0


# --- overrides -----------------------------------------------------------------------------


class TestOverrides:
    def test_mode_string_per_tool(self) -> None:
        out = [ai(call("f", {"x": 9}), call("g", {"y": 2}))]
        ref = [ai(F, G)]
        assert score(out, ref) == 0.0
        assert score(out, ref, tool_args_match_overrides={"f": "ignore"}) == 1.0
        assert score(out, ref, tool_args_match_overrides={"g": "ignore"}) == 0.0

    def test_override_can_be_stricter_than_the_default(self) -> None:
        out, ref = [ai(call("f", {"x": 1, "y": 0}))], [ai(F)]
        assert score(out, ref, tool_args_match_mode="ignore") == 1.0
        assert score(out, ref, tool_args_match_mode="ignore", tool_args_match_overrides={"f": "exact"}) == 0.0

    def test_field_paths(self) -> None:
        out = [ai(call("f", {"a": {"b": 1, "c": 1}, "d": 1}))]
        ref = [ai(call("f", {"a": {"b": 1, "c": 2}, "d": 2}))]
        assert score(out, ref) == 0.0
        assert score(out, ref, tool_args_match_overrides={"f": ["a.b"]}) == 1.0
        assert score(out, ref, tool_args_match_overrides={"f": ["a.b", "a.c"]}) == 0.0

    def test_field_path_missing_on_both_sides_matches(self) -> None:
        assert (
            score([ai(call("f", {"x": 1}))], [ai(call("f", {"x": 2}))], tool_args_match_overrides={"f": ["a.b"]}) == 1.0
        )

    def test_field_path_null_vs_missing_does_not_match(self) -> None:
        out, ref = [ai(call("f", {"a": {"b": None}}))], [ai(call("f", {"a": {}}))]
        assert score(out, ref, tool_args_match_overrides={"f": ["a.b"]}) == 0.0
        assert score(out, out, tool_args_match_overrides={"f": ["a.b"]}) == 1.0

    def test_field_path_list_index(self) -> None:
        out = [ai(call("f", {"items": [{"id": 1}, {"id": 2}]}))]
        ref = [ai(call("f", {"items": [{"id": 1}, {"id": 3}]}))]
        assert score(out, ref, tool_args_match_overrides={"f": ["items.0.id"]}) == 1.0
        assert score(out, ref, tool_args_match_overrides={"f": ["items.1.id"]}) == 0.0
        assert score(out, ref, tool_args_match_overrides={"f": ["items.-1.id"]}) == 0.0
        assert score(out, ref, tool_args_match_overrides={"f": ["items.5.id"]}) == 1.0  # missing on both

    def test_empty_path_list_means_default_mode(self) -> None:
        assert score([ai(call("f", {"x": 1}))], [ai(F)], tool_args_match_overrides={"f": []}) == 1.0
        assert score([ai(call("f", {"x": 2}))], [ai(F)], tool_args_match_overrides={"f": []}) == 0.0

    def test_callable_receives_agent_args_then_reference_args_in_every_mode(self) -> None:
        seen: list[tuple[dict[str, Any], dict[str, Any]]] = []

        def record(out: dict[str, Any], ref: dict[str, Any]) -> bool:
            seen.append((out, ref))
            return True

        for mode in ("strict", "unordered", "subset", "superset", "subsequence"):
            seen.clear()
            assert score([ai(call("f", {"who": "agent"}))], [ai(call("f", {"who": "ref"}))], mode=mode,
                         tool_args_match_overrides={"f": record}) == 1.0  # fmt: skip
            assert seen and all(o == {"who": "agent"} and r == {"who": "ref"} for o, r in seen), mode

    def test_callable_result_decides(self) -> None:
        def more_keys(out: dict[str, Any], ref: dict[str, Any]) -> bool:
            return len(out) >= len(ref)

        out, ref = [ai(call("f", {"a": 1, "b": 2}))], [ai(call("f", {"z": 0}))]
        assert score(out, ref, tool_args_match_overrides={"f": more_keys}) == 1.0
        assert score(ref, out, tool_args_match_overrides={"f": more_keys}) == 0.0

    def test_callable_by_import_path(self) -> None:
        # the run-file spelling: {"callable": "module:function"}; operator.eq is an exact match
        overrides = {"f": {"callable": "operator:eq"}}
        assert score([ai(F)], [ai(F)], tool_args_match_mode="ignore", tool_args_match_overrides=overrides) == 1.0
        out = [ai(call("f", {"x": 2}))]
        assert score(out, [ai(F)], tool_args_match_mode="ignore", tool_args_match_overrides=overrides) == 0.0

    @pytest.mark.parametrize(
        ("spec", "message"),
        [
            ("fuzzy", "unknown mode 'fuzzy'"),
            (5, "invalid override 5"),
            (["a", ""], "field paths must be non-empty strings"),
            ({"callable": "no_such_module_xyz:fn"}, "cannot load 'no_such_module_xyz:fn'"),
            ({"callable": "operator"}, "expected 'module:function'"),
            ({"callable": "operator:__name__"}, "is not callable"),
        ],
    )
    def test_bad_override_is_a_config_error_at_build_time(self, spec: Any, message: str) -> None:
        with pytest.raises(ConfigError) as exc:
            TrajectoryMatch(tool_args_match_overrides={"f": spec})
        assert str(exc.value).startswith("evaluator 'trajectory_match': params.tool_args_match_overrides['f']: ")
        assert message in str(exc.value)

    def test_none_overrides_is_empty(self) -> None:
        assert TrajectoryMatch(tool_args_match_overrides=None).params.tool_args_match_overrides == {}


# --- params, keys, inputs ------------------------------------------------------------------


def test_unknown_mode_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"trajectory_match.*params\.mode"):
        TrajectoryMatch(mode="fuzzy")
    with pytest.raises(ConfigError, match=r"params\.tool_args_match_mode"):
        TrajectoryMatch(tool_args_match_mode="loose")
    with pytest.raises(ConfigError, match=r"params\.colour"):
        TrajectoryMatch(colour="red")


def test_openevals_spelling_of_the_mode() -> None:
    assert TrajectoryMatch(trajectory_match_mode="superset").key == "trajectory_superset_match"
    assert TrajectoryMatch({"trajectory_match_mode": "subset"}).params.mode == "subset"


@pytest.mark.parametrize("mode", ["strict", "unordered", "subset", "superset", "subsequence"])
def test_result_keys_follow_the_references(mode: str) -> None:
    assert TrajectoryMatch(mode=mode).key == f"trajectory_{mode}_match"
    assert TrajectoryMatch(mode=mode, key="custom").key == "custom"


def test_no_reference_is_not_a_score() -> None:
    r = TrajectoryMatch().evaluate(outputs=[ai(F)])
    assert r.score is None and r.error is None and "no reference" in (r.comment or "")


def test_a_list_that_is_not_messages_is_an_error_result() -> None:
    r = TrajectoryMatch().evaluate(outputs=[{"content": "x"}], reference_outputs=[ai(F)])
    assert r.score is None and r.error is not None and "outputs" in r.error


def test_accepts_every_record_shape() -> None:
    msgs = [ai(F), tool()]
    ev = TrajectoryMatch(mode="unordered")
    assert ev.evaluate(outputs={"messages": msgs}, reference_outputs={"messages": msgs}).score == 1.0
    lc = {"role": "ai", "content": "", "tool_calls": [{"name": "f", "args": {"x": 1}, "id": "1"}]}
    assert ev.evaluate(outputs=[lc], reference_outputs=msgs).score == 1.0


def test_scores_canonical_traces_directly() -> None:
    trace = Trace(
        messages=[Message("assistant", "", [ToolCall("f", {"x": 1})])],
        reference=Trace(messages=[Message("assistant", "", [ToolCall("f", {"x": 1})])]),
    )
    assert TrajectoryMatch().score_trace(trace)[0].score == 1.0


def test_inputs_are_not_mutated() -> None:
    out = [ai(call("f", {"x": 1}))]
    ref = [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}]
    before = json.dumps([out, ref], sort_keys=True)
    TrajectoryMatch(mode="unordered").evaluate(outputs=out, reference_outputs=ref)
    assert json.dumps([out, ref], sort_keys=True) == before
