"""Inputs as users have them: proxy logs, LangGraph state, LangSmith root runs, warnings, timings."""

from __future__ import annotations

import copy
import json
from typing import Any

import orjson
import pytest
from format_samples import EXPECTED_CALLS, FINAL, QUESTION, load_fixture

from assay.evaluators.tool_use import ToolUse
from assay.records import Envelope, Position
from assay.stages.normalize import RecordParser, tool_argument_warnings, trace_warnings, warning_failure
from assay.traces import NormalizeOptions, detect_format, normalize_record, to_trace
from assay.traces.model import Trace
from assay.traces.normalize import hidden_trajectory


def calls(trace: Trace) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.args) for c in trace.tool_calls()]


# ---- proxy and gateway logs ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "trace_id"),
    [
        ("litellm_standard_logging_payload.json", "chatcmpl-AaBbCcDdEeFf0123456789"),
        ("helicone.json", "0b9e8d7c-6f5a-4b3c-2d1e-0f9a8b7c6d5e"),
        ("portkey.json", "weather-trace-7"),
        ("proxy_log.json", None),
    ],
)
def test_proxy_logs_are_request_messages_plus_response(name: str, trace_id: str | None) -> None:
    trace = normalize_record(load_fixture(name))
    assert trace.format == "gateway"
    assert calls(trace) == EXPECTED_CALLS
    assert trace.final_output == FINAL and trace.input == QUESTION
    assert trace.messages[-1].role == "assistant" and trace.messages[-1].content == FINAL
    assert trace.metadata["duration_s"] == pytest.approx(1.619)
    assert trace.metadata["spans"][0]["type"] == "llm"
    if trace_id is not None:
        assert trace.id == trace_id


def test_litellm_payload_is_not_read_as_plain_openai_messages() -> None:
    """``{messages, response}`` also looks like OpenAI messages: the response must not be lost, on
    the general and on the typed fast path alike."""
    payload = load_fixture("litellm_standard_logging_payload.json")
    env = Envelope(orjson.dumps(payload), Position("logs.jsonl", 1))
    for projected in (True, False):
        trace = RecordParser(projected=projected)(env)
        assert isinstance(trace, Trace) and trace.format == "gateway" and trace.final_output == FINAL


def test_bodies_as_json_text_and_anthropic_bodies() -> None:
    oa = load_fixture("openai.json")["messages"]
    log = {"request_body": json.dumps({"messages": oa[:-1]}), "response_body": json.dumps(_completion(FINAL))}
    assert calls(to_trace(log)) == EXPECTED_CALLS and to_trace(log).final_output == FINAL
    anthropic = load_fixture("anthropic.json")
    proxied = {
        "request": {k: v for k, v in anthropic.items() if k != "response"},
        "response": anthropic["response"],
    }
    assert to_trace(proxied).format == "anthropic"  # the anthropic format reads its own pairs
    portkey = {"request": {"body": proxied["request"]}, "response": {"body": proxied["response"], "status": 200}}
    for log in (portkey, {"request_body": proxied["request"], "response_body": proxied["response"]}):
        trace = to_trace(log)
        assert trace.format == "gateway" and calls(trace) == EXPECTED_CALLS and trace.final_output == FINAL
        assert trace.messages[0].role == "system"


def _completion(text: str | None, tool_calls: list[Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini", "choices": [{"message": message}]}


def test_a_bare_chat_completion_is_a_trace() -> None:
    value = load_fixture("partial/chat_completion.json")
    assert detect_format(value).name == "gateway"
    trace = normalize_record(value)
    assert calls(trace) == EXPECTED_CALLS[:1] and trace.id == "chatcmpl-AaBbCcDdEeFf0123456789"


def test_a_saved_response_object_is_a_trace() -> None:
    value = load_fixture("partial/openai_response_object.json")
    trace = normalize_record(value)
    assert trace.format == "openai_responses" and calls(trace) == EXPECTED_CALLS[:1]
    proxied = {"request": {"input": QUESTION, "instructions": "be brief"}, "response": value}
    trace = to_trace(proxied)
    assert trace.format == "gateway" and trace.input == QUESTION and calls(trace) == EXPECTED_CALLS[:1]


def test_plain_records_with_a_response_key_stay_what_they_were() -> None:
    record = {"messages": [{"role": "user", "content": "hi"}], "response": "hello"}
    assert to_trace(record).format == "openai"
    assert normalize_record({"question": "q", "outputs": {"response": {"text": "x"}}}).format == "value"


# ---- LangGraph ------------------------------------------------------------------------------


def test_langgraph_history_takes_the_latest_snapshot() -> None:
    state = load_fixture("langgraph_thread_state.json")
    older = copy.deepcopy(state)
    older["values"]["messages"] = older["values"]["messages"][:3]
    trace = to_trace([state, older])
    assert trace.format == "langgraph" and calls(trace) == EXPECTED_CALLS
    assert trace.metadata["thread_id"] == "0f3c2b1a-9e8d-4c7b-a6f5-e4d3c2b1a098"


def test_langgraph_state_with_openai_role_messages_and_bare_checkpoint() -> None:
    msgs = load_fixture("openai.json")["messages"]
    trace = to_trace({"values": {"messages": msgs}, "next": [], "created_at": "2025-11-22T10:00:04Z"})
    assert trace.format == "langgraph" and calls(trace) == EXPECTED_CALLS
    checkpoint = load_fixture("langgraph_checkpoint.json")["checkpoint"]
    assert calls(to_trace(checkpoint)) == EXPECTED_CALLS
    assert to_trace({"values": {"messages": msgs}}).format != "langgraph"  # no snapshot keys


# ---- LangSmith root runs --------------------------------------------------------------------


def test_agent_executor_root_run_scores_tool_use() -> None:
    run = load_fixture("langsmith_agent_executor.json")
    trace = normalize_record(copy.deepcopy(run))
    assert trace.format == "langsmith" and calls(trace) == EXPECTED_CALLS and trace.input == QUESTION
    result = ToolUse(expected_tool="get_forecast").evaluate(outputs=run)
    assert result.score == 1.0
    forced = normalize_record(copy.deepcopy(run), NormalizeOptions(format="langsmith"))
    assert calls(forced) == EXPECTED_CALLS


def _tool_runs(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in run["child_runs"] if r["run_type"] == "tool"]


def test_tool_args_come_from_the_generations_when_the_input_is_a_repr() -> None:
    run = load_fixture("langsmith_agent_executor.json")
    for tool in _tool_runs(run):  # reprs that are not Python literals
        tool["inputs"] = {"input": "{'city': 'Paris', 'when': datetime.date(2025, 11, 22)}"}
    assert calls(normalize_record(run)) == EXPECTED_CALLS


def test_tool_args_from_a_literal_repr_when_no_generation_recorded_them() -> None:
    run = load_fixture("langsmith_agent_executor.json")
    run["child_runs"] = _tool_runs(run)
    trace = normalize_record(run)
    assert calls(trace) == EXPECTED_CALLS and all(c.args_error is None for c in trace.tool_calls())


# ---- never silently wrong -------------------------------------------------------------------


def test_a_record_read_as_a_plain_value_while_holding_runs_warns() -> None:
    record = {
        "id": "r1",
        "outputs": {"result": {"child_runs": [{"name": "x", "run_type": "tool", "inputs": {}}]}},
    }
    trace = normalize_record(record)
    assert trace.format == "value"
    (warning,) = trace_warnings(trace) or []
    assert "'child_runs' at outputs.result.child_runs" in warning
    assert tool_argument_warnings is trace_warnings  # the former name still works


def test_plain_values_and_full_traces_do_not_warn() -> None:
    assert trace_warnings(normalize_record({"outputs": {"answer": "x", "messages": []}})) is None
    assert trace_warnings(normalize_record({"outputs": "plain"})) is None
    assert trace_warnings(to_trace(load_fixture("openai.json"))) is None
    assert hidden_trajectory({"a": [{"b": {"spans": [1]}}]}) == "'spans' at a.0.b.spans"


def test_args_defects_and_normalizer_warnings_are_both_reported() -> None:
    bad = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}],
        },
    ]
    trace = normalize_record({"outputs": bad})
    trace.warnings = ["spans of 2 traces were read as one trace"]
    warnings = trace_warnings(trace) or []
    assert len(warnings) == 2 and "tool call 'f'" in warnings[1]
    env = Envelope(b"{}", Position("f.jsonl", 2))
    row = warning_failure(env, trace, warnings)
    assert row.severity == "warning" and row.error_type == "TraceWarning" and row.message.startswith("f.jsonl:2: ")
    trace.warnings = None
    assert warning_failure(env, trace, trace_warnings(trace) or []).error_type == "InvalidToolArguments"


# ---- timings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["langsmith.json", "langsmith_flat.json", "langsmith_agent_executor.json", "langfuse.json", "otel_semconv.json"],
)
def test_timings_of_runs_observations_and_spans(name: str) -> None:
    trace = to_trace(load_fixture(name))
    assert trace.metadata["duration_s"] == pytest.approx(4.1)
    spans = trace.metadata["spans"]
    assert all(set(s) == {"name", "type", "duration_s"} for s in spans)
    assert all(s["type"] in {"llm", "tool", "chain", "agent", "other"} for s in spans)
    kinds = [s["type"] for s in spans]
    assert kinds.count("llm") == 3 and kinds.count("tool") == 2
    tools = [s["name"] for s in spans if s["type"] == "tool"]
    assert [t.removeprefix("execute_tool ") for t in tools] == ["get_weather", "get_forecast"]


def test_otlp_nanosecond_timestamps() -> None:
    trace = to_trace(load_fixture("otel_openllmetry.json"))
    assert 3.0 < trace.metadata["duration_s"] < 5.0


def test_no_timings_on_the_openai_fast_path() -> None:
    env = Envelope(orjson.dumps(load_fixture("openai.json")), Position("f.jsonl", 1))
    trace = RecordParser(projected=True)(env)
    assert isinstance(trace, Trace) and "duration_s" not in trace.metadata


def test_openai_batch_output_line_and_message_graph_state() -> None:
    completion = load_fixture("partial/chat_completion.json")
    line = {
        "id": "batch_req_1",
        "custom_id": "task-7",
        "response": {"status_code": 200, "request_id": "req_1", "body": completion},
        "error": None,
    }
    trace = normalize_record(line)
    assert trace.format == "gateway" and calls(trace) == EXPECTED_CALLS[:1]
    msgs = load_fixture("openai.json")["messages"]
    state = {"values": msgs, "next": [], "config": {"configurable": {"thread_id": "t1"}}}
    trace = to_trace(state)
    assert trace.format == "langgraph" and calls(trace) == EXPECTED_CALLS and trace.metadata["thread_id"] == "t1"


def test_agent_executor_result_as_plain_dicts_inside_a_record() -> None:
    weather = {"tool": "get_weather", "tool_input": {"city": "Paris"}, "log": "", "type": "AgentAction"}
    forecast = {"tool": "get_forecast", "tool_input": "{'city': 'Paris', 'days': 1}", "log": "", "type": "AgentAction"}
    steps = [[weather, "sunny"], [forecast, "rain"]]
    record = {"id": "r1", "outputs": {"input": QUESTION, "output": FINAL, "intermediate_steps": steps}}
    trace = normalize_record(record)
    assert trace.format == "langchain_agent" and calls(trace) == EXPECTED_CALLS
    assert trace.final_output == FINAL and trace_warnings(trace) is None
