"""One conversation in one JSON file: a top-level array of one trace's messages (OpenAI Responses
items, LangChain messages_to_dict and dumpd lists, a plain chat message list) is ONE trace;
``input_format: json`` reads one record per element, ``json_trace`` one trace per file."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from assay.connectors.file_source import FileSource
from assay.connectors.framing import iter_records
from assay.records import Envelope
from assay.stages.normalize import parse_envelope
from assay.traces.conversation import is_conversation_item
from assay.traces.model import Trace
from assay.traces.normalize import NormalizeOptions

ARGS = {"city": "Paris", "unit": "celsius"}


def chat_messages() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(ARGS)}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C, cloudy"},
        {"role": "assistant", "content": "18C and cloudy."},
    ]


def responses_items() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": json.dumps(ARGS)},
        {"type": "function_call_output", "call_id": "call_1", "output": "18C, cloudy"},
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "content": [{"type": "output_text", "text": "18C and cloudy.", "annotations": []}],
        },
    ]


def langchain_messages() -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    return [
        SystemMessage("Be brief."),
        HumanMessage("Weather in Paris?"),
        AIMessage("", tool_calls=[{"name": "get_weather", "args": ARGS, "id": "call_1", "type": "tool_call"}]),
        ToolMessage("18C, cloudy", tool_call_id="call_1"),
        AIMessage("18C and cloudy."),
    ]


def messages_to_dict() -> list[dict[str, Any]]:
    from langchain_core.messages import messages_to_dict as to_dict

    return to_dict(langchain_messages())


def dumpd() -> list[dict[str, Any]]:
    from langchain_core.load import dumpd as dump

    return [dump(m) for m in langchain_messages()]


def responses_sdk_items() -> list[dict[str, Any]]:
    """The items as the ``openai`` SDK's types dump them (every field, None included; a reasoning item)."""
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseReasoningItem,
    )
    from openai.types.responses.response_input_item import FunctionCallOutput

    text = ResponseOutputText(type="output_text", text="18C and cloudy.", annotations=[])
    return [
        {"role": "user", "content": "Weather in Paris?"},
        ResponseReasoningItem(id="rs_1", type="reasoning", summary=[]).model_dump(),
        ResponseFunctionToolCall(
            type="function_call", id="fc_1", call_id="call_1", name="get_weather", arguments=json.dumps(ARGS)
        ).model_dump(),
        FunctionCallOutput(type="function_call_output", call_id="call_1", output="18C, cloudy").model_dump(),
        ResponseOutputMessage(
            id="msg_1", type="message", role="assistant", status="completed", content=[text]
        ).model_dump(),
    ]


def chat_sdk_messages() -> list[dict[str, Any]]:
    """Assistant turns appended as ``ChatCompletionMessage.model_dump()`` (refusal, audio, … None)."""
    from openai.types.chat import ChatCompletionMessage

    out = chat_messages()
    for i in (2, 4):
        out[i] = ChatCompletionMessage.model_validate(out[i]).model_dump()
    return out


def langchain_model_dump() -> list[dict[str, Any]]:
    return [m.model_dump() for m in langchain_messages()]


CONVERSATIONS = {
    "chat": chat_messages,
    "responses": responses_items,
    "messages_to_dict": messages_to_dict,
    "dumpd": dumpd,
    "responses_sdk": responses_sdk_items,
    "chat_sdk": chat_sdk_messages,
    "model_dump": langchain_model_dump,
}


async def _read(path: Path, input_format: str = "auto") -> tuple[list[Envelope], FileSource]:
    src = FileSource([str(path)], input_format=input_format)
    async with src:
        envs = [e async for b in src.batches() for e in b]
    assert not src.read_errors
    return envs, src


def _trace(env: Envelope) -> Trace:
    t = parse_envelope(env, NormalizeOptions())
    assert isinstance(t, Trace), t
    return t


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
@pytest.mark.parametrize("indent", [2, None])
def test_array_of_one_conversation_is_one_trace(tmp_path: Path, name: str, indent: int | None) -> None:
    pytest.importorskip("langchain_core")
    if name.endswith("_sdk"):
        pytest.importorskip("openai")
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(CONVERSATIONS[name](), indent=indent))
    envs, src = anyio.run(_read, path)
    assert len(envs) == 1
    assert envs[0].position.line == 1
    trace = _trace(envs[0])
    assert [(c.name, c.args) for c in trace.tool_calls()] == [("get_weather", ARGS)]
    assert trace.final_output == "18C and cloudy."
    assert "read as one trace" in src.readings[str(path)]


def test_input_format_json_reads_one_record_per_element_and_json_trace_one_per_file(tmp_path: Path) -> None:
    msgs = chat_messages()
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(msgs, indent=2))
    envs, src = anyio.run(_read, path, "json")
    assert [json.loads(e.payload) for e in envs] == msgs
    assert "one record per array element" in src.readings[str(path)]
    # json_trace: the whole file, also when it is JSON lines of messages
    lines = tmp_path / "chat.jsonl"
    lines.write_text("".join(json.dumps(m) + "\n" for m in msgs))
    envs, src = anyio.run(_read, lines, "json_trace")
    assert len(envs) == 1 and json.loads(envs[0].payload) == msgs
    assert [c.name for c in _trace(envs[0]).tool_calls()] == ["get_weather"]
    assert "whole input is one trace" in src.readings[str(lines)]


def test_array_of_records_is_still_one_record_per_element() -> None:
    recs = [{"id": "a", "messages": chat_messages()}, {"id": "b", "messages": chat_messages()}]
    got = list(iter_records(io.BytesIO(json.dumps(recs, indent=2).encode()), "f"))
    assert [json.loads(p) for _, p in got if isinstance(p, bytes)] == recs
    # messages first, then a record: every element is a record of its own, in order, lines kept
    mixed = [chat_messages()[0], {"id": "x", "outputs": "y"}, chat_messages()[1]]
    notes: list[str] = []
    got = list(iter_records(io.BytesIO(json.dumps(mixed, indent=2).encode()), "f", note=notes.append))
    assert [json.loads(p) for _, p in got if isinstance(p, bytes)] == mixed
    assert [line for line, _ in got] == [2, 6, 10]
    assert notes == ["a JSON array of records: one record per element"]


def test_a_broken_conversation_array_is_a_read_error() -> None:
    text = json.dumps(chat_messages(), indent=2)[:-20].encode()
    got = list(iter_records(io.BytesIO(text), "f"))
    assert len(got) == 1 and not isinstance(got[0][1], bytes)


def test_is_conversation_item() -> None:
    pytest.importorskip("langchain_core")
    for build in CONVERSATIONS.values():
        assert all(is_conversation_item(m) for m in build())
    assert not is_conversation_item({"id": "t", "messages": []})
    assert not is_conversation_item({"role": "user", "content": "x", "outputs": "y"})
    assert not is_conversation_item([{"role": "user", "content": "x"}])
    assert not is_conversation_item({"run_type": "llm", "inputs": {}})
