"""The OpenAI chat format (also the canonical form assay writes) and the plain-value fallback."""

from __future__ import annotations

from typing import Any

from assay.exceptions import NormalizationError
from assay.traces.base import TraceFormat
from assay.traces.model import Message, Trace, final_assistant_text
from assay.traces.openai import ROLE_ALIASES, has_anthropic_blocks, parse_messages, parse_plain_openai


def _messages_of(value: Any) -> Any:
    if type(value) is list:
        return value
    if type(value) is dict:
        msgs = value.get("messages")
        if (
            msgs is None
            and isinstance(value.get("role"), str)
            and "type" not in value
            and ("content" in value or "tool_calls" in value)
        ):
            return [value]  # a single message, as openevals reads it
        if "response" in value and msgs is not None and _is_log(value):
            return None  # a proxy log (LiteLLM): the gateway format adds the response's message
        return msgs
    return None


def _is_log(value: dict[str, Any]) -> bool:
    from assay.traces.gateway import is_log  # imported on first use: rare, and keeps import light

    return is_log(value)


def detect(value: Any) -> bool:
    """OpenAI chat messages: every message is a dict with a known ``role`` (not a Responses item
    or LangChain ``type``), no ``sender``, and no Anthropic content blocks. Runs first in
    auto-detection (the common case), so it checks every message but stays cheap."""
    msgs = _messages_of(value)
    if type(msgs) is not list:
        return False
    if not msgs:
        return type(value) is dict
    for m in msgs:
        if type(m) is not dict or "type" in m or "sender" in m:
            return False
        if m.get("role") not in ROLE_ALIASES:
            return False
        if has_anthropic_blocks(m.get("content")):
            return False
    return True


def detect_loose(value: Any) -> bool:
    """Any message list whose first item has a string role: parsed as OpenAI (errors then name the
    bad message, e.g. an unknown role). Runs after every specific format."""
    msgs = _messages_of(value)
    if type(msgs) is not list or not msgs:
        return False
    first = msgs[0]
    return type(first) is dict and "sender" not in first and isinstance(first.get("role"), str)


def normalize(value: Any) -> Trace:
    msgs = _messages_of(value)
    if msgs is None:
        raise NormalizationError("no 'messages' list")
    return _finish(value, parse_messages(msgs))


def try_plain(value: Any) -> Trace | None:
    """Auto-detection's fast path: the Trace of a plainly OpenAI value, or None (detect as usual)."""
    msgs = _messages_of(value)
    if type(msgs) is not list or not msgs:
        return None
    messages = parse_plain_openai(msgs)
    return None if messages is None else _finish(value, messages)


def _finish(value: Any, messages: list[Message]) -> Trace:
    trace = Trace(messages=messages, format="openai")
    if type(value) is dict:
        if "final_output" in value:
            trace.final_output = value["final_output"]
            trace.format = "canonical"
        usage = value.get("usage")
        if isinstance(usage, dict):
            trace.usage = usage
        if isinstance(value.get("metadata"), dict):
            trace.metadata = dict(value["metadata"])
    if trace.final_output is None:
        trace.final_output = final_assistant_text(messages)
    return trace


FORMAT = TraceFormat(
    name="openai",
    description="OpenAI chat-completions messages (tool_calls, legacy function_call); also assay's canonical form",
    detect=detect,
    normalize=normalize,
)


OPENAI_LOOSE_FORMAT = TraceFormat(
    name="openai",
    description="message lists with roles that no specific format claimed (parsed as OpenAI)",
    detect=detect_loose,
    normalize=normalize,
)


def detect_value(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, str | int | float | bool)
        or (type(value) is dict and "messages" not in value)
        # a JSON list that is not a message list (e.g. structured output items for json_match)
        or (type(value) is list and not (value and type(value[0]) is dict and "role" in value[0]))
    )


def normalize_value(value: Any) -> Trace:
    return Trace(final_output=value, format="value")


VALUE_FORMAT = TraceFormat(
    name="value",
    description="a plain output value (string, number or JSON object) with no trajectory",
    detect=detect_value,
    normalize=normalize_value,
)
