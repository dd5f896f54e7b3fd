"""Every format's fixture records the same agent run; all must normalize to the same trace."""

from __future__ import annotations

import copy

import pytest
from format_samples import (
    EXPECTED_CALLS,
    EXPECTED_RESULTS,
    FINAL,
    FORMAT_OF,
    QUESTION,
    load_fixture,
)

from assay.evaluators.trajectory import TrajectoryMatch
from assay.traces import detect_format, detection_order, load_format, normalize_record, to_trace
from assay.traces.claude_code import group_session_rows

MY_FORMATS = (
    "openai_responses",
    "anthropic",
    "langchain",
    "potato",
    "otel",
    "langsmith",
    "langfuse",
    "claude_code",
    "gateway",
    "langgraph",
    "langchain_agent",
)


def session_value(name: str) -> object:
    value = load_fixture(name)
    if name.endswith(".jsonl"):
        groups = list(group_session_rows(value))
        assert len(groups) == 1
        return groups[0]
    return value


def test_every_fixture_is_listed() -> None:
    from format_samples import FIXTURES

    on_disk = {p.name for p in FIXTURES.iterdir() if p.is_file()} - {"potato_from_langsmith.json"}
    assert on_disk == set(FORMAT_OF)


def test_auto_detection_picks_the_format(fixture_name: str) -> None:
    assert detect_format(session_value(fixture_name)).name == FORMAT_OF[fixture_name]


def test_same_tool_calls_results_and_answer(fixture_name: str) -> None:
    trace = to_trace(session_value(fixture_name))
    assert trace.format == FORMAT_OF[fixture_name]
    assert [(c.name, c.args) for c in trace.tool_calls()] == EXPECTED_CALLS
    assert all(c.args_error is None and c.id for c in trace.tool_calls())
    assert trace.final_output == FINAL
    # every tool call is answered by the result recorded for it, in order
    results = trace.tool_results()
    assert [results[c.id] for c in trace.tool_calls() if c.id is not None] == EXPECTED_RESULTS


def test_same_message_structure(fixture_name: str) -> None:
    trace = to_trace(session_value(fixture_name))
    shape = [(m.role, bool(m.tool_calls)) for m in trace.messages if m.role not in ("system", "user")]
    assert shape == [
        ("assistant", True),
        ("tool", False),
        ("assistant", True),
        ("tool", False),
        ("assistant", False),
    ]


def test_input_is_the_question(fixture_name: str) -> None:
    trace = to_trace(session_value(fixture_name))
    if fixture_name == "claude_agent_sdk_stream.jsonl":
        assert trace.input is None  # stream-json does not echo the prompt
    elif fixture_name == "openai.json":
        assert trace.input is None  # the openai normalizer leaves input to the record's fields
    else:
        assert trace.input == QUESTION


def test_strict_trajectory_match_across_formats(fixture_name: str) -> None:
    """A reference in OpenAI form strictly matches the trajectory read from any format."""
    outputs = session_value(fixture_name)
    # Claude Code stores no system prompt, stream-json not even the user prompt, potato keeps
    # the system prompt as task_description: compare against the roles the format records
    roles = {m.role for m in to_trace(copy.deepcopy(outputs)).messages}
    reference = [m for m in load_fixture("openai.json")["messages"] if m["role"] in roles]
    assert len(reference) >= 5
    result = TrajectoryMatch(mode="strict").evaluate(outputs=outputs, reference_outputs=reference)
    assert result.score == 1.0, result.comment


def test_explicit_format_override(fixture_name: str) -> None:
    name = FORMAT_OF[fixture_name]
    trace = to_trace(session_value(fixture_name), format=name)
    assert trace.format == name
    assert [c.name for c in trace.tool_calls()] == [n for n, _ in EXPECTED_CALLS]


def test_detectors_reject_each_others_samples(fixture_name: str) -> None:
    value = session_value(fixture_name)
    expected = FORMAT_OF[fixture_name]
    accepted = {name for name in MY_FORMATS if load_format(name).detect(value)}
    assert accepted == ({expected} if expected in MY_FORMATS else set())


def test_whole_record_without_outputs_key(fixture_name: str) -> None:
    value = session_value(fixture_name)
    record = {"session": value} if fixture_name.endswith(".jsonl") else value
    if type(record) is not dict:
        record = {"outputs": record}
    trace = normalize_record(copy.deepcopy(record))
    assert [(c.name, c.args) for c in trace.tool_calls()] == EXPECTED_CALLS
    assert trace.final_output == FINAL


def test_every_format_is_registered_in_detection_order() -> None:
    names = [f.name for f in detection_order()]
    assert set(MY_FORMATS) <= set(names)
    assert names[-1] == "value"


@pytest.mark.parametrize(
    ("name", "usage"),
    [
        ("anthropic.json", {"input_tokens": 980, "output_tokens": 35, "total_tokens": 1015}),
        ("openai_responses.json", {"input_tokens": 402, "output_tokens": 27, "total_tokens": 429}),
        ("langchain_dumpd.json", {"input_tokens": 460, "output_tokens": 65, "total_tokens": 525}),
        ("langsmith.json", {"input_tokens": 460, "output_tokens": 65, "total_tokens": 525}),
        ("langfuse.json", {"input_tokens": 460, "output_tokens": 65, "total_tokens": 525}),
        ("otel_semconv.json", {"input_tokens": 460, "output_tokens": 65, "total_tokens": 525}),
        ("otel_events.json", {"input_tokens": 460, "output_tokens": 65, "total_tokens": 525}),
        ("otel_openllmetry.json", {"input_tokens": 460, "output_tokens": 65, "total_tokens": 525}),
        # input counts include cache reads/writes; split assistant rows are counted once
        ("claude_code_session.jsonl", {"input_tokens": 30888, "output_tokens": 149, "total_tokens": 31037}),
        (
            "claude_agent_sdk_stream.jsonl",
            {"input_tokens": 30888, "output_tokens": 149, "total_tokens": 31037},
        ),
    ],
)
def test_usage(name: str, usage: dict[str, int]) -> None:
    assert to_trace(session_value(name)).usage == usage
