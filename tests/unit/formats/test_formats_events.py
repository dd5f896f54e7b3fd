"""Edge cases of the event-style formats: potato, otel, langsmith, langfuse, claude_code."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assay.exceptions import NormalizationError
from assay.traces import to_trace
from assay.traces.claude_code import group_session_rows
from assay.traces.claude_code import normalize as claude_normalize
from assay.traces.langfuse import normalize as langfuse_normalize
from assay.traces.langsmith import normalize as langsmith_normalize
from assay.traces.otel import normalize as otel_normalize
from assay.traces.potato import normalize as potato_normalize

# ---- potato ------------------------------------------------------------------------------------


def test_potato_action_parsing() -> None:
    conv = [
        {"speaker": "User", "text": "find it"},
        {"speaker": "Agent (Thought)", "text": "searching"},
        {"speaker": "Researcher (Action)", "text": "search(query='paris', k=3)"},
        {"speaker": "Environment (Error)", "text": "timeout"},
        {"speaker": "Agent (Action)", "text": "search(query=some_variable)"},
        {"speaker": "Tool Observation", "text": "3 hits"},
        {"speaker": "Agent (Action)", "text": "```python\nprint(1)\n```"},
        {"speaker": "Agent (Read)", "text": "Read(file.py)"},
        {"speaker": "Agent", "text": "found"},
    ]
    trace = to_trace({"id": "p1", "task_description": "", "conversation": conv})
    assert trace.format == "potato"
    calls = trace.tool_calls()
    assert (calls[0].name, calls[0].args, calls[0].args_error) == ("search", {"query": "paris", "k": 3}, None)
    # not literal kwargs: kept raw and flagged, like potato
    assert calls[1].args == {"_raw": "query=some_variable"} and calls[1].args_error
    # no parentheses: potato's reading (whole text = name), with a warning
    assert calls[2].name == "```python\nprint(1)\n```" and calls[2].args == {}
    assert trace.warnings and "not of the form name(args)" in trace.warnings[0]
    assert len(calls) == 3  # "Agent (Read)" is not an action, as in potato
    assert trace.metadata["tool_errors"] == [calls[0].id]
    assert trace.tool_results()[calls[1].id] == "3 hits"
    assert trace.messages[1].content == "searching"  # thought + action form one message
    assert trace.final_output.endswith("found")
    assert trace.id == "p1" and trace.input == "find it"


def test_potato_kwargs_converter_output() -> None:
    """potato's LangSmith converter writes ``name(input="...")``: the kwargs are parsed."""
    from format_samples import load_fixture

    trace = to_trace(load_fixture("potato_from_langsmith.json"))
    assert [(c.name, c.args) for c in trace.tool_calls()] == [
        ("get_weather", {"input": "{'city': 'Paris'}"}),
        ("get_forecast", {"input": "{'city': 'Paris', 'days': 1}"}),
    ]


class FakeCanonicalTrace:
    def __init__(self) -> None:
        self.id = "obj-1"
        self.task_description = "task"
        self.conversation = [
            {"speaker": "Agent (Action)", "text": 'f({"a": 1})'},
            {"speaker": "Agent", "text": "ok"},
        ]


def test_potato_object_and_task_fallback() -> None:
    trace = to_trace(FakeCanonicalTrace())
    assert trace.format == "potato" and trace.id == "obj-1"
    assert trace.input == "task"  # no User turn: task_description is the task
    assert [(c.name, c.args) for c in trace.tool_calls()] == [("f", {"a": 1})]


def test_potato_tool_turn_without_action_adds_no_call() -> None:
    trace = to_trace({"conversation": [{"speaker": "Environment", "text": "boot"}, {"speaker": "Agent", "text": "hi"}]})
    assert trace.tool_calls() == []
    assert trace.messages[0].role == "tool" and trace.messages[0].tool_call_id is None


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"conversation": "x"}, "'conversation' must be a list"),
        ({"conversation": [{"text": "no speaker"}]}, "turn 0 is not a"),
        (3, "expected a trace object or dict"),
    ],
)
def test_potato_bad_shapes(value: Any, match: str) -> None:
    with pytest.raises(NormalizationError, match=match):
        potato_normalize(value)


# ---- otel --------------------------------------------------------------------------------------


def _kv(key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "value": value}


def test_otel_tool_spans_alone_and_value_decoding() -> None:
    """execute_tool spans with no chat span still give calls; OTLP values are decoded."""
    export = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "t",
                                "spanId": "2",
                                "name": "execute_tool lookup",
                                "startTimeUnixNano": "2000",
                                "status": {"code": 2, "message": "boom"},
                                "attributes": [
                                    _kv("gen_ai.operation.name", {"stringValue": "execute_tool"}),
                                    _kv("gen_ai.tool.name", {"stringValue": "lookup"}),
                                    _kv("error.type", {"stringValue": "TimeoutError"}),
                                ],
                            },
                            {
                                "traceId": "t",
                                "spanId": "1",
                                "name": "execute_tool search",
                                "startTimeUnixNano": "1000",
                                "attributes": [
                                    _kv("gen_ai.operation.name", {"stringValue": "execute_tool"}),
                                    _kv("gen_ai.tool.name", {"stringValue": "search"}),
                                    _kv("gen_ai.tool.call.id", {"intValue": "7"}),
                                    _kv(
                                        "gen_ai.tool.call.arguments",
                                        {
                                            "kvlistValue": {
                                                "values": [
                                                    _kv(
                                                        "tags",
                                                        {
                                                            "arrayValue": {
                                                                "values": [
                                                                    {"stringValue": "a"},
                                                                    {"boolValue": True},
                                                                ]
                                                            }
                                                        },
                                                    )
                                                ]
                                            }
                                        },
                                    ),
                                    _kv("gen_ai.tool.call.result", {"doubleValue": 1.5}),
                                ],
                            },
                        ]
                    }
                ]
            }
        ]
    }
    trace = to_trace(export)
    assert trace.format == "otel" and trace.id == "t"
    (search, lookup) = trace.tool_calls()
    assert (search.name, search.args, search.id) == ("search", {"tags": ["a", True]}, "7")
    assert trace.tool_results()["7"] == 1.5
    assert lookup.name == "lookup" and trace.metadata["tool_errors"] == [lookup.id]
    assert trace.tool_results()[lookup.id] == "TimeoutError"


def test_otel_rejects_spans_without_genai_attributes() -> None:
    spans = [{"name": "GET /", "spanId": "1", "traceId": "t", "attributes": {"http.method": "GET"}}]
    with pytest.raises(NormalizationError, match="none of the 1 spans carries GenAI"):
        to_trace(spans)


def test_otel_bad_message_json_names_the_span() -> None:
    spans = [
        {
            "name": "chat m",
            "spanId": "1",
            "attributes": {"gen_ai.operation.name": "chat", "gen_ai.input.messages": '{"role": "user"}'},
        }
    ]
    with pytest.raises(NormalizationError, match=r"span 'chat m'.*expected a JSON list"):
        otel_normalize(spans)


def test_otel_warns_on_several_traces() -> None:
    mk = {
        "gen_ai.operation.name": "chat",
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "x"}]}]),
    }
    spans = [{"name": "c", "traceId": t, "spanId": t, "attributes": mk} for t in ("a", "b")]
    trace = to_trace(spans)
    assert trace.id is None and trace.warnings == ["spans of 2 traces were read as one trace"]


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"resourceSpans": "x"}, "'resourceSpans' must be a list"),
        ({"nothing": 1}, "expected an OTLP export"),
        ([1], "span 0 is not an object"),
        ("x", "expected an OTLP export or spans"),
    ],
)
def test_otel_bad_shapes(value: Any, match: str) -> None:
    with pytest.raises(NormalizationError, match=match):
        otel_normalize(value)


# ---- langsmith ---------------------------------------------------------------------------------


def test_langsmith_tool_runs_without_llm_calls_and_subagents() -> None:
    root = {
        "id": "r",
        "name": "agent",
        "run_type": "chain",
        "inputs": {"question": "q?"},
        "outputs": {"output": "the answer"},
        "child_runs": [
            {
                "id": "t1",
                "name": "search",
                "run_type": "tool",
                "start_time": "2025-01-01T00:00:01",
                "inputs": {"input": "{'q': 'x', 'n': 2}"},
                "outputs": {"output": "hits"},
                "child_runs": [
                    {
                        "id": "inner",
                        "name": "llm",
                        "run_type": "llm",
                        "inputs": {},
                        "outputs": "nested answer",
                    }
                ],
            },
            {
                "id": "t2",
                "name": "fetch",
                "run_type": "tool",
                "start_time": "2025-01-01T00:00:02",
                "inputs": {"url": "u"},
                "outputs": None,
                "error": "404",
            },
        ],
    }
    trace = to_trace(root)
    assert trace.format == "langsmith"
    assert [(c.name, c.args) for c in trace.tool_calls()] == [
        ("search", {"q": "x", "n": 2}),
        ("fetch", {"url": "u"}),
    ]
    assert trace.metadata["tool_errors"] == [trace.tool_calls()[1].id]
    assert trace.input == "q?"
    assert trace.final_output == "the answer"  # no assistant text: the root's output


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"run_type": "chain", "inputs": {}, "child_runs": "x"}, "'child_runs' is not a list"),
        ([{"run_type": "llm", "inputs": {}}, 5], "run 1 is not an object"),
        ([], "no runs"),
        (
            {"run_type": "llm", "inputs": {}, "outputs": {"generations": [[{"message": {"type": "x"}}]]}},
            "unknown",
        ),
    ],
)
def test_langsmith_bad_shapes(value: Any, match: str) -> None:
    with pytest.raises(NormalizationError, match=match):
        langsmith_normalize(value)


# ---- langfuse ----------------------------------------------------------------------------------


def test_langfuse_container_spans_are_not_tools() -> None:
    obs = [
        {
            "id": "s",
            "type": "SPAN",
            "name": "retrieve",
            "startTime": "2025-01-01T00:00:00Z",
            "input": {},
            "output": [],
        },
        {
            "id": "g",
            "type": "GENERATION",
            "name": "llm",
            "startTime": "2025-01-01T00:00:01Z",
            "input": "hi",
            "output": {"role": "assistant", "content": "hello"},
            "usage": {"promptTokens": 5, "completionTokens": 2, "totalTokens": 7},
        },
        {
            "id": "e",
            "type": "TOOL",
            "name": "ping",
            "startTime": "2025-01-01T00:00:02Z",
            "level": "ERROR",
            "statusMessage": "unreachable",
            "input": {"host": "h"},
        },
    ]
    trace = to_trace(obs)
    assert trace.format == "langfuse"
    assert [(c.name, c.args) for c in trace.tool_calls()] == [("ping", {"host": "h"})]
    assert trace.tool_results()[trace.tool_calls()[0].id] == "unreachable"
    assert trace.usage == {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}
    assert trace.input == "hi" and trace.final_output == "hello"


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"observations": "x"}, "'observations' must be a list"),
        ({"observations": [{"name": "no type"}]}, "observation 0 is not an object with a 'type'"),
        ("x", "expected a trace or a list of observations"),
    ],
)
def test_langfuse_bad_shapes(value: Any, match: str) -> None:
    with pytest.raises(NormalizationError, match=match):
        langfuse_normalize(value)


# ---- claude_code -------------------------------------------------------------------------------


def _row(uuid: str, parent: str | None, typ: str, content: Any, sid: str = "s1", **extra: Any) -> dict[str, Any]:
    return {
        "type": typ,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": sid,
        "message": {"role": typ, "content": content},
        **extra,
    }


def test_group_session_rows() -> None:
    rows = [
        {"type": "summary", "summary": "x", "leafUuid": "a2"},
        _row("a1", None, "user", "one"),
        _row("a2", "a1", "assistant", "ok"),
        _row("b1", None, "user", "two", sid="s2"),
        {"type": "file-history-snapshot", "messageId": "b1", "snapshot": {}},
        # a resumed session continues s2's chain under a new session id: same trace
        _row("c1", "b1", "user", "more", sid="s3"),
        _row("d1", None, "user", "three", sid="s1"),
    ]
    groups = list(group_session_rows(iter(rows)))
    assert [[r.get("uuid") for r in g] for g in groups] == [
        [None, "a1", "a2"],
        ["b1", None, "c1"],
        ["d1"],
    ]


def test_claude_code_follows_the_leaf_chain() -> None:
    rows = [
        _row("u1", None, "user", "q"),
        _row("a1", "u1", "assistant", [{"type": "text", "text": "abandoned branch"}]),
        _row("a2", "u1", "assistant", [{"type": "tool_use", "id": "t", "name": "Bash", "input": {"cmd": "ls"}}]),
        _row(
            "x1",
            "a2",
            "assistant",
            [{"type": "tool_use", "id": "s", "name": "Task", "input": {}}],
            isSidechain=True,
        ),
        _row("m1", "a2", "user", "<meta>", isMeta=True),
        _row(
            "u2",
            "m1",
            "user",
            [{"type": "tool_result", "tool_use_id": "t", "content": "err", "is_error": True}],
        ),
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "c",
            "parentUuid": None,
            "logicalParentUuid": "u2",
            "sessionId": "s1",
            "content": "Conversation compacted",
        },
        _row("a3", "c", "assistant", [{"type": "text", "text": "final"}]),
    ]
    trace = claude_normalize({"session": rows})
    assert [m.role for m in trace.messages] == ["user", "assistant", "tool", "assistant"]
    assert [c.name for c in trace.tool_calls()] == ["Bash"]
    assert trace.metadata["tool_errors"] == ["t"]
    assert trace.final_output == "final" and trace.id == "s1"


def test_claude_code_single_row_warns_and_bare_blocks() -> None:
    trace = to_trace(_row("u1", None, "user", "q"))
    assert trace.format == "claude_code"
    assert trace.warnings and "session mode" in trace.warnings[0]
    blocks = [
        {"type": "text", "text": "checking"},
        {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}},
        {"type": "tool_result", "tool_use_id": "t", "content": "r"},
        {"type": "text", "text": "done"},
    ]
    bare = claude_normalize(blocks)
    assert [(m.role, m.text) for m in bare.messages] == [
        ("assistant", "checking"),
        ("tool", "r"),
        ("assistant", "done"),
    ]


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("x", "expected a list of session rows"),
        ([_row("u1", None, "user", "q"), 7], "row 1 is not an object"),
        (
            [{**_row("u1", None, "user", "q"), "message": {"role": "robot", "content": "q"}}],
            "unknown role 'robot'",
        ),
        ([_row("u1", None, "user", "q", isMeta=True)], "no user or assistant messages in 1 row"),
    ],
)
def test_claude_code_bad_shapes(value: Any, match: str) -> None:
    with pytest.raises(NormalizationError, match=match):
        claude_normalize(value)
