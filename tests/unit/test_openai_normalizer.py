"""The OpenAI chat-messages normalizer (assay/traces/openai.py) and its record-level wiring."""

from __future__ import annotations

from typing import Any

import pytest

from assay import NormalizationError, normalize_record, to_trace
from assay.traces.openai import is_openai_message, parse_args, parse_message, parse_messages, parse_tool_call


class TestParseArgs:
    @pytest.mark.parametrize(
        ("raw", "args"),
        [
            ('{"q": "cats", "n": [1, {"a": null}]}', {"q": "cats", "n": [1, {"a": None}]}),
            (b'{"q": 1}', {"q": 1}),
            ({"already": "dict"}, {"already": "dict"}),
            (None, {}),
            ("", {}),
            ("{}", {}),
        ],
    )
    def test_valid(self, raw: Any, args: dict[str, Any]) -> None:
        assert parse_args(raw) == (args, None)

    def test_dict_is_used_as_is(self) -> None:
        d = {"x": 1}
        assert parse_args(d)[0] is d

    def test_invalid_json_is_kept_raw_and_flagged(self) -> None:
        args, err = parse_args('{"q": "unterminated')
        assert args == {"_raw": '{"q": "unterminated'}
        assert err is not None and err.startswith("tool arguments are not valid JSON")

    def test_invalid_bytes_are_decoded_for_the_raw_copy(self) -> None:
        args, err = parse_args(b"\xff not json")
        assert args == {"_raw": "\ufffd not json"} and err is not None

    @pytest.mark.parametrize(("raw", "kind"), [("[1, 2]", "list"), ("5", "int"), ('"s"', "str"), ("null", "NoneType")])
    def test_json_that_is_not_an_object(self, raw: str, kind: str) -> None:
        args, err = parse_args(raw)
        assert "_value" in args and err == f"tool arguments are JSON but not an object ({kind})"

    @pytest.mark.parametrize("raw", [5, 1.5, True, [1, 2]])
    def test_non_string_non_dict(self, raw: Any) -> None:
        args, err = parse_args(raw)
        assert args == {"_value": raw} and err is not None and "not an object" in err


class TestToolCalls:
    def test_openai_style_json_string(self) -> None:
        tc = parse_tool_call(
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}, "here"
        )
        assert (tc.name, tc.args, tc.id, tc.args_error) == ("search", {"q": "x"}, "c1", None)

    def test_openai_style_dict_arguments(self) -> None:
        tc = parse_tool_call({"function": {"name": "f", "arguments": {"a": 1}}}, "here")
        assert (tc.name, tc.args, tc.id) == ("f", {"a": 1}, None)

    def test_langchain_style(self) -> None:
        tc = parse_tool_call({"name": "f", "args": {"a": 1}, "id": "c9", "type": "tool_call"}, "here")
        assert (tc.name, tc.args, tc.id) == ("f", {"a": 1}, "c9")

    def test_flat_arguments_and_input_keys(self) -> None:
        assert parse_tool_call({"name": "f", "arguments": '{"a": 1}'}, "w").args == {"a": 1}
        assert parse_tool_call({"name": "f", "input": {"b": 2}}, "w").args == {"b": 2}

    def test_invalid_arguments_are_flagged_not_raised(self) -> None:
        tc = parse_tool_call({"function": {"name": "f", "arguments": "not json"}}, "w")
        assert tc.args == {"_raw": "not json"} and tc.args_error is not None
        assert tc.to_dict()["args_error"] == tc.args_error

    @pytest.mark.parametrize(
        ("tc", "message"),
        [
            ("f", "tool call is not an object"),
            ({"function": "f"}, "'function' is not an object"),
            ({"function": {"arguments": "{}"}}, "tool call has no name"),
            ({"function": {"name": "", "arguments": "{}"}}, "tool call has no name"),
            ({"function": {"name": 3, "arguments": "{}"}}, "tool call has no name"),
        ],
    )
    def test_bad_shapes(self, tc: Any, message: str) -> None:
        with pytest.raises(NormalizationError, match=f"message 2 tool call 0: {message}"):
            parse_tool_call(tc, "message 2 tool call 0")


class TestMessages:
    def test_assistant_with_tool_calls(self) -> None:
        m = parse_message(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
                    {"id": "b", "type": "function", "function": {"name": "g", "arguments": {"y": 2}}},
                ],
            },
            0,
        )
        assert m.role == "assistant" and m.content == ""
        assert [(c.name, c.args, c.id) for c in m.tool_calls or []] == [("f", {"x": 1}, "a"), ("g", {"y": 2}, "b")]

    def test_empty_tool_calls_mean_none(self) -> None:
        assert parse_message({"role": "assistant", "content": "x", "tool_calls": []}, 0).tool_calls is None
        assert parse_message({"role": "assistant", "content": "x", "tool_calls": None}, 0).tool_calls is None

    def test_legacy_function_call(self) -> None:
        m = parse_message(
            {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": '{"a": 1}'}}, 0
        )
        assert [(c.name, c.args) for c in m.tool_calls or []] == [("f", {"a": 1})]

    def test_legacy_function_call_after_tool_calls(self) -> None:
        m = parse_message(
            {
                "role": "assistant",
                "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}],
                "function_call": {"name": "g", "arguments": "{}"},
            },
            0,
        )
        assert [c.name for c in m.tool_calls or []] == ["f", "g"]

    def test_function_call_on_a_user_message_is_ignored(self) -> None:
        assert parse_message({"role": "user", "content": "x", "function_call": {"name": "f"}}, 0).tool_calls is None

    def test_tool_role(self) -> None:
        m = parse_message({"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'}, 3)
        assert (m.role, m.tool_call_id, m.content) == ("tool", "c1", '{"ok": true}')

    def test_legacy_function_role_is_a_tool_result(self) -> None:
        m = parse_message({"role": "function", "name": "lookup", "content": "42"}, 3)
        assert (m.role, m.name, m.tool_call_id, m.content) == ("tool", "lookup", "lookup", "42")

    @pytest.mark.parametrize(
        ("raw", "role"),
        [("system", "system"), ("developer", "developer"), ("user", "user"), ("human", "user"), ("ai", "assistant")],
    )
    def test_roles(self, raw: str, role: str) -> None:
        assert parse_message({"role": raw, "content": "x"}, 0).role == role

    def test_langchain_type_key(self) -> None:
        m = parse_message({"type": "ai", "content": "", "tool_calls": [{"name": "f", "args": {}, "id": "1"}]}, 0)
        assert m.role == "assistant" and m.tool_calls is not None and m.tool_calls[0].name == "f"

    @pytest.mark.parametrize("role", ["robot", "Assistant ", "", 3, None])
    def test_unknown_role_is_an_error(self, role: Any) -> None:
        with pytest.raises(NormalizationError, match=r"message 4: unknown role"):
            parse_message({"role": role, "content": "x"}, 4)

    def test_not_an_object(self) -> None:
        with pytest.raises(NormalizationError, match="message 1: expected an object, got str"):
            parse_message("hello", 1)

    def test_tool_calls_not_a_list(self) -> None:
        with pytest.raises(NormalizationError, match="'tool_calls' is not a list"):
            parse_message({"role": "assistant", "tool_calls": {"function": {}}}, 0)

    def test_content_none_and_blocks(self) -> None:
        assert parse_message({"role": "assistant", "content": None}, 0).content == ""
        assert parse_message({"role": "assistant"}, 0).content == ""
        blocks = [{"type": "text", "text": "Hello"}, {"type": "image_url", "image_url": {"url": "u"}}]
        m = parse_message({"role": "user", "content": blocks}, 0)
        assert m.content == blocks and m.text == "Hello"

    def test_parse_messages_requires_a_list(self) -> None:
        with pytest.raises(NormalizationError, match="'messages' must be a list, got dict"):
            parse_messages({"role": "user"})
        assert [m.role for m in parse_messages([{"role": "user", "content": "a"}, {"role": "ai", "content": "b"}])] == [
            "user",
            "assistant",
        ]

    def test_parse_messages_names_the_failing_index(self) -> None:
        with pytest.raises(NormalizationError, match="message 1: unknown role 'robot'"):
            parse_messages([{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}])

    def test_is_openai_message(self) -> None:
        assert is_openai_message({"role": "user"}) and is_openai_message({"type": "human"})
        assert not is_openai_message({"role": "robot"}) and not is_openai_message(["role"])


class TestRecords:
    MSGS: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": "r"},
        {"role": "assistant", "content": "final answer"},
    ]

    def test_flat_record(self) -> None:
        t = normalize_record({"id": 7, "messages": self.MSGS, "reference_outputs": self.MSGS[2:3]})
        assert t.id == "7" and t.format == "openai" and len(t.messages) == 5
        assert t.final_output == "final answer"
        assert t.reference is not None and [c.name for c in t.reference.tool_calls()] == ["f"]
        assert t.tool_results() == {"c": "r"}

    def test_nested_record(self) -> None:
        rec = {"inputs": {"q": "x"}, "outputs": {"messages": self.MSGS}, "reference_outputs": {"messages": self.MSGS}}
        t = normalize_record(rec)
        assert t.input == {"q": "x"} and [c.name for c in t.tool_calls()] == ["f"]
        assert t.reference is not None and len(t.reference.messages) == 5

    def test_bad_tool_arguments_do_not_fail_the_record(self) -> None:
        msgs = [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}]
        t = normalize_record({"messages": msgs})
        (tc,) = t.tool_calls()
        assert tc.args == {"_raw": "{oops"} and tc.args_error is not None

    @pytest.mark.parametrize(
        "record",
        [
            {"messages": [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]},
            {"outputs": {"messages": [{"role": "user", "content": "a"}, {"role": "robot"}]}},
            {"messages": [{"role": "user", "content": "a"}], "reference_outputs": [{"role": "user"}, {"role": "x"}]},
            {"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]},
            {"foo": "bar"},
            "just a string",
        ],
    )
    def test_unnormalizable_records_raise(self, record: Any) -> None:
        with pytest.raises(NormalizationError):
            normalize_record(record)

    def test_to_trace_of_a_message_list(self) -> None:
        t = to_trace(self.MSGS)
        assert [m.role for m in t.messages] == ["system", "user", "assistant", "tool", "assistant"]
