"""Typed decoding of OpenAI-format records straight from their bytes (the pipeline's fast path).

The general path parses a line into Python dicts (orjson) and walks them to build the canonical
:class:`~assay.traces.model.Trace`. For the most common input, OpenAI chat messages with tool
calls, most of that work is building dicts that are thrown away. Here msgspec decodes the line
into typed wire structs in C, reading only the keys a Trace is built from, and a short loop turns
the structs into canonical messages: about twice as fast per record.

:func:`decode_openai_record` returns a Trace *only* when the record is one the general path
(``normalize_record`` with default options) would normalize as OpenAI messages, and then the very
same Trace, with one difference: ``scenario`` is the record's ``scenario`` object or None, never
the whole record (so the pipeline uses this path only when no evaluator reads scenario fields).
For anything else (another format, a plain output value, an odd shape, invalid JSON or UTF-8, a
byte-order mark) it returns None and the caller takes the general path, which decides, and names what is wrong.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from assay.exceptions import NormalizationError
from assay.traces.model import Message, ToolCall, Trace, final_assistant_text
from assay.traces.normalize import CONTEXT_KEYS
from assay.traces.openai import (
    ARGS_MEMO,
    args_defects,
    has_anthropic_blocks,
    object_args,
    parse_args,
    parse_message,
    reset_args_memo,
)

# Wire structs: short-lived and acyclic, so not tracked by the garbage collector (gc=False).
# Whatever these types reject (a missing tool name, a non-string message name, a key that only
# other formats use) fails the decode, and the record takes the general path.


class _Function(msgspec.Struct, gc=False):
    name: Annotated[str, msgspec.Meta(min_length=1)]
    arguments: Any = None


class _Call(msgspec.Struct, gc=False):
    function: _Function
    id: Any = None


class _FunctionCall(msgspec.Struct, gc=False):
    """The legacy ``function_call`` of an assistant message."""

    name: Annotated[str, msgspec.Meta(min_length=1)]
    arguments: Any = None
    id: Any = None
    # keys that make the general path read the call differently: must be absent
    function: UnsetType = UNSET
    args: UnsetType = UNSET
    input: UnsetType = UNSET


class _Message(msgspec.Struct, gc=False):
    role: Literal["system", "developer", "user", "assistant", "tool", "function", "human", "ai"]
    content: Any = None
    tool_calls: list[_Call] | None = None
    tool_call_id: Any = None
    name: str | None = None
    function_call: _FunctionCall | UnsetType = UNSET
    # keys of Responses items and LangChain/AutoGen messages: must be absent
    type: UnsetType = UNSET
    sender: UnsetType = UNSET


class _Wrapped(msgspec.Struct, gc=False):
    """``{"messages": [...], ...}`` as an outputs or reference value."""

    messages: list[_Message]
    final_output: Any = UNSET
    usage: Any = UNSET
    metadata: Any = UNSET


_Trajectory = list[_Message] | _Wrapped | None | UnsetType


class _Record(msgspec.Struct, gc=False):
    """The keys ``normalize_record`` reads with default options (normalize.py's key lists)."""

    messages: list[_Message] | UnsetType = UNSET
    final_output: Any = UNSET
    # OUTPUT_KEYS
    outputs: _Trajectory = UNSET
    trajectory: _Trajectory = UNSET
    actual: _Trajectory = UNSET
    # ID_KEYS
    id: Any = UNSET
    trace_id: Any = UNSET
    run_id: Any = UNSET
    uuid: Any = UNSET
    session_id: Any = UNSET
    # INPUT_KEYS
    inputs: Any = UNSET
    input: Any = UNSET
    question: Any = UNSET
    query: Any = UNSET
    prompt: Any = UNSET
    # REFERENCE_KEYS
    reference_outputs: _Trajectory = UNSET
    reference: _Trajectory = UNSET
    expected: _Trajectory = UNSET
    expected_output: _Trajectory = UNSET
    expected_outputs: _Trajectory = UNSET
    reference_trajectory: _Trajectory = UNSET
    expected_trajectory: _Trajectory = UNSET
    reference_messages: _Trajectory = UNSET
    # CONTEXT_KEYS
    context: Any = UNSET
    contexts: Any = UNSET
    retrieved_context: Any = UNSET
    retrieval_context: Any = UNSET
    documents: Any = UNSET
    scenario: Any = UNSET
    metadata: Any = UNSET
    # a proxy log's response (LiteLLM ``{messages, response}``): the gateway format reads it
    response: UnsetType = UNSET
    # USAGE_KEYS
    usage: Any = UNSET
    metrics: Any = UNSET
    token_usage: Any = UNSET


_decode = msgspec.json.Decoder(_Record).decode
_DecodeError = msgspec.DecodeError


def _first(*values: Any) -> Any:
    """The first value that is present (UNSET when none is)."""
    for v in values:
        if v is not UNSET:
            return v
    return UNSET


def _messages(wire: list[_Message]) -> list[Message] | None:
    """Canonical messages, exactly as the general path builds them (``parse_plain_openai``, or
    ``parse_messages`` for role aliases and legacy function calls); None if it would not."""
    if not wire:
        return None
    memo = ARGS_MEMO
    out: list[Message] = []
    append = out.append
    for m in wire:
        content = m.content
        if type(content) is not str:
            if content is None:
                content = ""
            elif has_anthropic_blocks(content):
                return None
        if m.role in _ALIASED or m.function_call is not UNSET:
            msg = _legacy_message(m)
            if msg is None:
                return None
            append(msg)
            continue
        wire_calls = m.tool_calls
        if not wire_calls:
            append(Message(m.role, content, None, m.tool_call_id, m.name))
            continue
        calls: list[ToolCall] = []
        for c in wire_calls:
            fn = c.function
            raw = fn.arguments
            if type(raw) is str:
                args = memo.get(raw)  # the hit inline: most calls repeat in the reference
                if args is None:
                    args = object_args(raw)
                if args is not None:
                    calls.append(ToolCall(fn.name, args, c.id))
                    continue
            args, err = parse_args(raw)  # flags and counts the defect, as the general path does
            calls.append(ToolCall(fn.name, args, c.id, err))
        append(Message(m.role, content, calls, m.tool_call_id, m.name))
    return out


_ALIASED = frozenset({"function", "human", "ai"})


def _legacy_message(m: _Message) -> Message | None:
    """A message with a role alias or a legacy ``function_call``: the general path's own
    ``parse_message`` on it (rare, so not worth a copy of its rules); None where it would fail."""
    try:
        return parse_message(msgspec.to_builtins(m), 0)
    except NormalizationError:
        return None


def _trace(value: Any, record: _Record | None = None) -> Trace | None:
    """``try_plain`` + ``_finish`` of openai_format, on a wire value (or on the record itself)."""
    if record is not None:
        wire, final, usage, metadata = record.messages, record.final_output, record.usage, record.metadata
    elif type(value) is list:
        wire, final, usage, metadata = value, UNSET, UNSET, UNSET
    elif type(value) is _Wrapped:
        wire, final, usage, metadata = value.messages, value.final_output, value.usage, value.metadata
    else:
        return None
    if wire is UNSET:
        return None
    messages = _messages(wire)
    if messages is None:
        return None
    trace = Trace(messages=messages, format="openai")
    if final is not UNSET:
        trace.final_output = final
        trace.format = "canonical"
    if type(usage) is dict:
        trace.usage = usage
    if type(metadata) is dict:
        trace.metadata = dict(metadata)
    if trace.final_output is None:
        trace.final_output = final_assistant_text(messages)
    return trace


def decode_openai_record(payload: bytes | memoryview) -> Trace | None:
    """The Trace of one OpenAI-format record line, or None (use the general path)."""
    try:
        r = _decode(payload)
    except (_DecodeError, UnicodeDecodeError):
        # DecodeError (and ValidationError): not a shape this path takes. UnicodeDecodeError:
        # invalid UTF-8 in a string; the general path turns it into a dead letter naming the byte.
        return None
    reset_args_memo()
    outputs = _first(r.outputs, r.trajectory, r.actual)
    trace = _trace(None, r) if outputs is UNSET else _trace(outputs)
    if trace is None:
        return None
    ref = _first(
        r.reference_outputs,
        r.reference,
        r.expected,
        r.expected_output,
        r.expected_outputs,
        r.reference_trajectory,
        r.expected_trajectory,
        r.reference_messages,
    )
    if ref is not UNSET and ref is not None:
        trace.reference = _trace(ref)
        if trace.reference is None:
            return None
    tid = _first(r.id, r.trace_id, r.run_id, r.uuid, r.session_id)
    if tid is not UNSET and tid is not None:
        trace.id = str(tid)
    inputs = _first(r.inputs, r.input, r.question, r.query, r.prompt)
    if inputs is not UNSET:
        trace.input = inputs
    ctx = _first(r.context, r.contexts, r.retrieved_context, r.retrieval_context, r.documents)
    if ctx is not UNSET and ctx is not None:
        trace.context = ctx
    elif type(inputs) is dict:
        trace.context = next((inputs[k] for k in CONTEXT_KEYS if k in inputs), None)
    if type(r.scenario) is dict:
        trace.scenario = r.scenario
    md = r.metadata
    if type(md) is dict:
        trace.metadata = {**trace.metadata, **md} if trace.metadata else md
    usage = _first(r.usage, r.metrics, r.token_usage)
    if type(usage) is dict:
        trace.usage = usage
    trace.args_defects = args_defects()
    return trace
