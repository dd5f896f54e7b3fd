"""LangChain messages → canonical trace.

Reads a list of messages (or ``{"messages": [...]}``) in any of LangChain's serialized forms:

* plain dicts ``{"type": "ai"|"human"|"system"|"tool"|"function"|"chat", "content", "tool_calls",
  "additional_kwargs", "tool_call_id", "status", "usage_metadata", ...}`` (``model_dump()``);
* ``messages_to_dict`` form ``{"type": "ai", "data": {...}}``;
* ``dumpd`` form ``{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}``;
* LangChain message objects themselves, read through ``model_dump()`` (or their attributes), so
  langchain_core is never imported by assay.

Tool calls come from ``tool_calls`` (dict ``args``), else ``additional_kwargs.tool_calls``
(OpenAI style, JSON-string arguments), else ``additional_kwargs.function_call``;
``invalid_tool_calls`` are kept with their raw arguments and flagged.
"""

from __future__ import annotations

from typing import Any

from assay.exceptions import NormalizationError
from assay.traces.assemble import TraceBuilder, add_usage, as_dict, usage_of
from assay.traces.base import TraceFormat
from assay.traces.model import Message, ToolCall, Trace
from assay.traces.openai import parse_args, parse_tool_call

ROLE_OF_TYPE: dict[str, str] = {
    "ai": "assistant",
    "human": "user",
    "system": "system",
    "tool": "tool",
    "function": "tool",
    # streaming chunks report their class name as ``type``
    "AIMessageChunk": "assistant",
    "HumanMessageChunk": "user",
    "SystemMessageChunk": "system",
    "ToolMessageChunk": "tool",
    "FunctionMessageChunk": "tool",
}
TYPE_OF_CLASS: dict[str, str] = {
    "AIMessage": "ai",
    "AIMessageChunk": "ai",
    "HumanMessage": "human",
    "HumanMessageChunk": "human",
    "SystemMessage": "system",
    "SystemMessageChunk": "system",
    "ToolMessage": "tool",
    "ToolMessageChunk": "tool",
    "FunctionMessage": "function",
    "ChatMessage": "chat",
    "ChatMessageChunk": "chat",
}
_CHAT_TYPES = frozenset({"chat", "ChatMessageChunk"})
_TYPES = frozenset({*ROLE_OF_TYPE, *_CHAT_TYPES})
_CHAT_ROLES = {"assistant": "assistant", "user": "user", "system": "system", "tool": "tool"}


def is_lc_message(m: Any) -> bool:
    """Whether a value looks like one serialized (or live) LangChain message. Cheap."""
    if type(m) is dict:
        if m.get("lc") == 1 and m.get("type") == "constructor":
            ids = m.get("id")
            return type(ids) is list and bool(ids) and ids[-1] in TYPE_OF_CLASS
        return m.get("type") in _TYPES and "role" not in m and ("content" in m or "data" in m)
    if type(m) is list or m is None or isinstance(m, str | int | float):
        return False
    return getattr(m, "type", None) in _TYPES and hasattr(m, "content")


def _messages_of(value: Any) -> Any:
    if type(value) is dict:
        return value.get("messages")
    if type(value) is list:
        return value
    return None


def detect(value: Any) -> bool:
    msgs = _messages_of(value)
    return type(msgs) is list and bool(msgs) and is_lc_message(msgs[0])


def as_message_dict(m: Any, where: str) -> dict[str, Any]:
    """Any supported LangChain message form → a flat dict with a ``type`` key."""
    if type(m) is not dict:
        dump = getattr(m, "model_dump", None) or getattr(m, "dict", None)
        if callable(dump):
            d = dump()
        else:
            fields = ("type", "content", "tool_calls", "invalid_tool_calls", "additional_kwargs")
            extra = ("tool_call_id", "name", "id", "status", "usage_metadata", "role")
            d = {k: getattr(m, k) for k in (*fields, *extra) if hasattr(m, k)}
        if type(d) is not dict:
            raise NormalizationError(f"{where}: cannot read a {type(m).__name__} as a LangChain message")
        return d
    if m.get("lc") == 1 and m.get("type") == "constructor":
        kwargs = m.get("kwargs")
        ids = m.get("id")
        cls = ids[-1] if type(ids) is list and ids else None
        if type(kwargs) is not dict or cls not in TYPE_OF_CLASS:
            raise NormalizationError(f"{where}: unsupported LangChain constructor {ids!r}")
        return {**kwargs, "type": TYPE_OF_CLASS[cls]}
    data = m.get("data")
    if type(data) is dict and "content" not in m:
        return {**data, "type": m.get("type")}
    return m


def _calls(d: dict[str, Any], where: str) -> list[ToolCall]:
    calls: list[ToolCall] = []
    raw = d.get("tool_calls")
    kwargs = as_dict(d.get("additional_kwargs"))
    if not raw:
        raw = kwargs.get("tool_calls")
    if raw:
        if type(raw) is not list:
            raise NormalizationError(f"{where}: 'tool_calls' is not a list")
        calls = [parse_tool_call(tc, f"{where} tool call {j}") for j, tc in enumerate(raw)]
    elif type(kwargs.get("function_call")) is dict:
        calls = [parse_tool_call(kwargs["function_call"], f"{where} function_call")]
    for j, bad in enumerate(d.get("invalid_tool_calls") or ()):
        if type(bad) is not dict:
            raise NormalizationError(f"{where} invalid tool call {j}: expected an object")
        args, err = parse_args(bad.get("args"))
        reason = bad.get("error") or err or "LangChain marked this tool call invalid"
        calls.append(ToolCall(str(bad.get("name") or "unknown_tool"), args, bad.get("id"), str(reason)))
    return calls


def _text(content: Any) -> Any:
    """AI content blocks → the text blocks joined (tool_use / reasoning blocks are not text)."""
    if type(content) is list:
        parts = [
            b if isinstance(b, str) else b.get("text", "")
            for b in content
            if isinstance(b, str) or (type(b) is dict and b.get("type") in ("text", None))
        ]
        return "\n".join(p for p in parts if isinstance(p, str) and p)
    return "" if content is None else content


def parse_lc_message(m: Any, where: str) -> tuple[Message, dict[str, int] | None, bool]:
    """One LangChain message → (Message, its usage, whether it is a failed tool result)."""
    d = as_message_dict(m, where)
    kind = d.get("type")
    role = ROLE_OF_TYPE.get(kind) if isinstance(kind, str) else None
    if kind in _CHAT_TYPES:
        role = _CHAT_ROLES.get(d.get("role"))  # type: ignore[arg-type]
    if role is None:
        raise NormalizationError(f"{where}: unknown LangChain message type {kind!r}")
    content = d.get("content")
    name = d.get("name") if isinstance(d.get("name"), str) else None
    if role == "assistant":
        msg = Message("assistant", _text(content), _calls(d, where) or None, None, name)
        um = d.get("usage_metadata")
        usage = usage_of(um.get("input_tokens"), um.get("output_tokens")) if type(um) is dict else None
        return msg, usage, False
    if role == "tool":
        call_id = d.get("tool_call_id")
        if call_id is None and kind in ("function", "FunctionMessageChunk"):
            call_id = name
        is_error = d.get("status") == "error"
        return Message("tool", "" if content is None else content, None, call_id, name), None, is_error
    return Message(role, "" if content is None else content, None, None, name), None, False


def add_messages(builder: TraceBuilder, messages: list[Any]) -> dict[str, int] | None:
    """Append LangChain messages to a builder; return their summed usage."""
    usage: dict[str, int] | None = None
    for i, m in enumerate(messages):
        msg, u, failed = parse_lc_message(m, f"message {i}")
        builder.add(msg)
        if failed and msg.tool_call_id is not None:
            builder.tool_errors.append(msg.tool_call_id)
        usage = add_usage(usage, u)
    return usage


def normalize(value: Any) -> Trace:
    msgs = _messages_of(value)
    if type(msgs) is not list:
        raise NormalizationError(
            f"langchain: expected a list of messages or {{'messages': [...]}}, got {type(value).__name__}"
        )
    builder = TraceBuilder()
    usage = add_messages(builder, msgs)
    return builder.build("langchain", usage=usage)


FORMAT = TraceFormat(
    name="langchain",
    description="LangChain messages: dicts (type ai/human/tool/system), dumpd constructors, objects",
    detect=detect,
    normalize=normalize,
)
