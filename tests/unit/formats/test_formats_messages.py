"""Edge cases of the message-list formats: openai (variants), openai_responses, anthropic, langchain."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from assay.exceptions import NormalizationError
from assay.traces import detect_format, to_trace
from assay.traces.anthropic import normalize as anthropic_normalize
from assay.traces.langchain import normalize as langchain_normalize
from assay.traces.openai_responses import normalize as responses_normalize

# ---- openai: Azure / vLLM variations ----------------------------------------------------------


def test_openai_azure_vllm_variations() -> None:
    msgs = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": {"q": 1}}},
                {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": "{not json"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "lookup", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "name": "lookup", "content": "two"},
        {"role": "assistant", "content": "", "refusal": "I can't help with that."},
    ]
    trace = to_trace(msgs)
    assert trace.format == "openai"
    calls = trace.tool_calls()
    assert calls[0].args == {"q": 1}
    assert calls[1].args == {"_raw": "{not json"} and calls[1].args_error is not None
    assert trace.messages[2].name == "lookup"
    assert trace.tool_results() == {"c1": "one", "c2": "two"}


# ---- openai_responses --------------------------------------------------------------------------


def test_responses_parallel_calls_form_one_message_and_bad_args_are_kept() -> None:
    items = [
        {"role": "user", "content": "compare"},
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": '{"x": 1}'},
        {"type": "function_call", "call_id": "b", "name": "f", "arguments": "x=2"},
        {"type": "function_call_output", "call_id": "a", "output": "1"},
        {"type": "function_call_output", "call_id": "b", "output": [{"type": "input_text", "text": "2"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
    ]
    trace = to_trace(items)
    assert trace.format == "openai_responses"
    assert [m.role for m in trace.messages] == ["user", "assistant", "tool", "tool", "assistant"]
    a, b = trace.tool_calls()
    assert a.args == {"x": 1} and b.args == {"_raw": "x=2"} and b.args_error
    assert trace.tool_results() == {"a": "1", "b": "2"}
    assert trace.final_output == "no"


def test_responses_custom_and_mcp_and_builtin_calls() -> None:
    response = {
        "object": "response",
        "output": [
            {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"query": "paris"}},
            {"type": "custom_tool_call", "call_id": "cc", "name": "grammar", "input": "SELECT 1"},
            {"type": "custom_tool_call_output", "call_id": "cc", "output": "ok"},
            {
                "type": "mcp_call",
                "id": "mcp_1",
                "name": "search",
                "arguments": '{"q": "x"}',
                "server_label": "s",
                "error": "boom",
            },
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        ],
    }
    trace = to_trace(response)
    names = [(c.name, c.args) for c in trace.tool_calls()]
    assert names == [
        ("web_search", {"query": "paris"}),
        ("grammar", {"input": "SELECT 1"}),
        ("search", {"q": "x"}),
    ]
    assert trace.metadata["tool_errors"] == ["mcp_1"]
    assert trace.final_output == "done"


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"object": "response", "output": "text"}, "must be a list of items"),
        ([{"type": "function_call", "call_id": "a", "arguments": "{}"}], "has no name"),
        ([{"type": "function_call_output", "output": "x"}], "has no call_id"),
        ([{"type": "message", "role": "wizard", "content": []}], "unknown message role"),
        ("just text", "expected a list of items"),
    ],
)
def test_responses_bad_shapes(value: Any, match: str) -> None:
    with pytest.raises(NormalizationError, match=match):
        responses_normalize(value)


# ---- anthropic ---------------------------------------------------------------------------------


def test_anthropic_tool_errors_thinking_and_text_after_results() -> None:
    value = {
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {"type": "redacted_thinking", "data": "xx"},
                    {"type": "tool_use", "id": "t1", "name": "run", "input": {"cmd": "ls"}},
                    {"type": "tool_use", "id": "t2", "name": "run", "input": {"cmd": "pwd"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "denied", "is_error": True},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "/home"},
                    {"type": "text", "text": "also, hurry"},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        ],
    }
    trace = to_trace(value)
    assert trace.format == "anthropic"
    assert [m.role for m in trace.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
    ]
    assert trace.messages[0].content == "Be brief."
    assert trace.messages[2].content == ""  # thinking is not answer text
    assert trace.messages[5].content == "also, hurry"
    assert trace.metadata["tool_errors"] == ["t1"]
    assert trace.final_output == "Done."


def test_anthropic_single_response_object() -> None:
    response = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 3, "output_tokens": 4},
    }
    trace = to_trace(response)
    assert trace.format == "anthropic"
    assert [c.name for c in trace.tool_calls()] == ["f"]
    assert trace.usage == {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}


def test_anthropic_text_only_messages_stay_openai_compatible() -> None:
    """Text-block-only messages are valid OpenAI content too; both readings give the same text."""
    value = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    assert detect_format(value).name == "openai"
    assert anthropic_normalize(value).messages[0].content == "hi"


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"system": "s", "messages": "nope"}, "no 'messages' list"),
        ({"messages": [{"role": "system", "content": "x"}]}, "unknown role 'system'"),
        (
            {"messages": [{"role": "assistant", "content": [{"type": "tool_use", "input": {}}]}]},
            "has no name",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]},
            "tool_use_id",
        ),
        ({"messages": [{"role": "user", "content": 5}]}, "string or a list of blocks"),
        (42, "expected an object or a list"),
    ],
)
def test_anthropic_bad_shapes(value: Any, match: str) -> None:
    with pytest.raises(NormalizationError, match=match):
        anthropic_normalize(value)


# ---- langchain ---------------------------------------------------------------------------------


def test_langchain_additional_kwargs_and_invalid_calls() -> None:
    msgs = [
        {"type": "human", "content": "q"},
        {
            "type": "ai",
            "content": [
                {"type": "text", "text": "let me look"},
                {"type": "tool_use", "id": "x", "name": "f"},
            ],
            "additional_kwargs": {
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]
            },
            "invalid_tool_calls": [{"name": "g", "args": "{oops", "id": "c2", "error": "bad json"}],
        },
        {"type": "tool", "content": "r1", "tool_call_id": "c1", "status": "error"},
        {"type": "chat", "role": "assistant", "content": "final"},
    ]
    trace = to_trace(msgs)
    assert trace.format == "langchain"
    f, g = trace.tool_calls()
    assert (f.name, f.args, f.args_error) == ("f", {"a": 1}, None)
    assert (g.name, g.args, g.args_error) == ("g", {"_raw": "{oops"}, "bad json")
    assert trace.messages[1].content == "let me look"
    assert trace.metadata["tool_errors"] == ["c1"]
    assert trace.final_output == "final"


class FakeAIMessage:
    """A duck-typed message object (no model_dump): read through its attributes."""

    type = "ai"

    def __init__(self, content: str, tool_calls: list[dict[str, Any]]):
        self.content = content
        self.tool_calls = tool_calls
        self.additional_kwargs: dict[str, Any] = {}


class FakeHumanMessage:
    type = "human"

    def __init__(self, content: str):
        self.content = content


def test_langchain_objects_read_by_attributes() -> None:
    msgs = [FakeHumanMessage("q"), FakeAIMessage("", [{"name": "f", "args": {"k": "v"}, "id": "1"}])]
    trace = to_trace(msgs)
    assert trace.format == "langchain"
    assert [(c.name, c.args) for c in trace.tool_calls()] == [("f", {"k": "v"})]
    assert trace.input == "q"


@pytest.mark.skipif(importlib.util.find_spec("langchain_core") is None, reason="langchain_core not installed")
def test_langchain_core_objects() -> None:  # pragma: no cover - runs only where langchain_core exists
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    msgs = [
        HumanMessage("q"),
        AIMessage("", tool_calls=[{"name": "f", "args": {"k": 1}, "id": "c"}]),
        ToolMessage("r", tool_call_id="c"),
        AIMessage("done"),
    ]
    trace = to_trace(msgs)
    assert trace.format == "langchain"
    assert [(c.name, c.args) for c in trace.tool_calls()] == [("f", {"k": 1})]
    assert trace.tool_results() == {"c": "r"}
    assert trace.final_output == "done"


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ([{"type": "robot", "content": "x"}], "unknown LangChain message type"),
        (
            [{"lc": 1, "type": "constructor", "id": ["langchain", "Foo"], "kwargs": {}}],
            "unsupported LangChain constructor",
        ),
        ([{"type": "ai", "content": "", "tool_calls": {"name": "f"}}], "'tool_calls' is not a list"),
        ([{"type": "ai", "content": "", "tool_calls": [{"args": {}}]}], "has no name"),
        ("text", "expected a list of messages"),
    ],
)
def test_langchain_bad_shapes(value: Any, match: str) -> None:
    with pytest.raises(NormalizationError, match=match):
        langchain_normalize(value)


# ---- bare values as outputs --------------------------------------------------------------------


@pytest.mark.parametrize(("outputs", "kind"), [(5, "number"), (0.5, "number"), (True, "boolean")])
def test_a_bare_number_or_boolean_as_outputs_is_not_a_trace(outputs: Any, kind: str) -> None:
    """``outputs: 5`` was scored 0.0 with no word: it is a normalization error (a dead letter)."""
    from assay.traces.normalize import NormalizeOptions, normalize_record

    with pytest.raises(NormalizationError, match=f"outputs is a JSON {kind}"):
        normalize_record({"id": "x", "outputs": outputs, "reference_outputs": "r"})
    with pytest.raises(NormalizationError, match=f"trajectory is a JSON {kind}"):
        normalize_record({"trajectory": outputs})
    trace = normalize_record({"outputs": outputs}, NormalizeOptions(format="value"))  # asked for: scored
    assert trace.final_output == outputs
    assert normalize_record({"outputs": "5"}).final_output == "5"


def test_a_langsmith_child_run_read_alone_says_so() -> None:
    """A run-per-line LangSmith dump without parent links is read one run per trace: each child
    run's trace carries a warning; runs of several traces read as one trace are said too."""
    from assay.traces.langsmith import normalize as langsmith_normalize

    root = {"id": "t1", "trace_id": "t1", "run_type": "chain", "inputs": {"q": "x"}, "outputs": {"output": "a"}}
    child = {"id": "c1", "trace_id": "t1", "run_type": "tool", "name": "search", "inputs": {"q": "x"}, "outputs": {}}
    assert langsmith_normalize(root).warnings in (None, [])
    warned = langsmith_normalize(child).warnings or []
    assert len(warned) == 1 and "run-per-line dump" in warned[0] and "trace t1" in warned[0]
    other = {**root, "id": "t2", "trace_id": "t2"}
    mixed = langsmith_normalize([root, other]).warnings or []
    assert any("runs of 2 different traces" in w for w in mixed)
    assert not langsmith_normalize([root, {**child, "parent_run_id": "t1"}]).warnings
