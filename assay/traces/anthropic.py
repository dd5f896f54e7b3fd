"""Anthropic Messages API → canonical trace.

Reads ``{"system": ..., "messages": [...]}`` (a request, optionally with its ``response``), a bare
list of messages, or one response object (``{"type": "message", "role": "assistant", ...}``).
Content is a string or a list of blocks: ``text``; ``tool_use`` ``{id, name, input}`` → a tool
call; ``tool_result`` ``{tool_use_id, content, is_error}`` inside a user message → a separate
``role="tool"`` message; ``thinking``/``redacted_thinking`` are not part of the answer text.
"""

from __future__ import annotations

from typing import Any

from assay.exceptions import NormalizationError
from assay.traces.assemble import TraceBuilder, as_dict, usage_of
from assay.traces.base import TraceFormat
from assay.traces.model import Message, ToolCall, Trace, content_text
from assay.traces.openai import has_anthropic_blocks, parse_args

_ROLES = frozenset({"user", "assistant"})


def _has_anthropic_blocks(messages: list[Any]) -> bool:
    for m in messages:
        if type(m) is not dict:
            return False
        if has_anthropic_blocks(m.get("content")):
            return True
    return False


def _is_response(value: dict[str, Any]) -> bool:
    return (
        value.get("type") == "message"
        and value.get("role") == "assistant"
        and type(value.get("content")) is list
        and ("stop_reason" in value or "model" in value)
    )


def detect(value: Any) -> bool:
    """Messages carrying Anthropic-only blocks, a top-level ``system`` with user/assistant
    messages, a request/response pair, or a single response object."""
    if type(value) is list:
        return bool(value) and type(value[0]) is dict and "role" in value[0] and _has_anthropic_blocks(value)
    if type(value) is not dict:
        return False
    msgs = value.get("messages")
    if type(msgs) is list:
        if _has_anthropic_blocks(msgs):
            return True
        if "system" in value and msgs and type(msgs[0]) is dict:
            return all(type(m) is dict and m.get("role") in _ROLES for m in msgs)
        return False
    request, response = value.get("request"), value.get("response")
    if type(request) is dict and type(request.get("messages")) is list:
        return type(response) is dict and _is_response(response)
    return _is_response(value)


def tool_result_text(content: Any) -> Any:
    """A tool_result's content: a string as is; a list of blocks → their text joined."""
    if isinstance(content, list):
        return content_text(content)
    return "" if content is None else content


def block_messages(role: str, content: Any, where: str) -> list[Message]:
    """One Anthropic message (role + string or block list) → canonical messages.

    An assistant message gives one message (text + tool calls); a user message gives one tool
    message per ``tool_result`` block and one user message per run of other blocks.
    """
    if isinstance(content, str) or content is None:
        return [Message(role, content or "")]
    if type(content) is not list:
        raise NormalizationError(f"{where}: content must be a string or a list of blocks")
    if role == "assistant":
        texts: list[str] = []
        calls: list[ToolCall] = []
        for j, block in enumerate(content):
            if type(block) is not dict:
                raise NormalizationError(f"{where} block {j}: expected an object")
            kind = block.get("type")
            if kind == "text":
                texts.append(block.get("text") or "")
            elif kind in ("tool_use", "server_tool_use"):
                calls.append(tool_use_call(block, f"{where} block {j}"))
        return [Message("assistant", "\n".join(t for t in texts if t), calls or None)]
    out: list[Message] = []
    pending: list[Any] = []
    for j, block in enumerate(content):
        if type(block) is dict and block.get("type") == "tool_result":
            if pending:
                out.append(Message(role, pending))
                pending = []
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                raise NormalizationError(f"{where} block {j}: tool_result has no tool_use_id")
            out.append(Message("tool", tool_result_text(block.get("content")), None, call_id))
        else:
            pending.append(block)
    if pending:
        out.append(Message(role, _simplify(pending)))
    return out


def _simplify(blocks: list[Any]) -> Any:
    """A list of only text blocks → one string; anything richer (images) is kept as blocks."""
    if all(type(b) is dict and b.get("type") == "text" for b in blocks):
        return "\n".join(b.get("text") or "" for b in blocks)
    return blocks


def tool_use_call(block: dict[str, Any], where: str) -> ToolCall:
    name = block.get("name")
    if not isinstance(name, str) or not name:
        raise NormalizationError(f"{where}: tool_use block has no name")
    args, err = parse_args(block.get("input"))
    return ToolCall(name, args, block.get("id"), err)


def tool_errors_of(content: Any) -> list[str]:
    """The tool_use_ids of ``tool_result`` blocks flagged ``is_error``."""
    if type(content) is not list:
        return []
    return [
        b["tool_use_id"]
        for b in content
        if type(b) is dict and b.get("type") == "tool_result" and b.get("is_error") and "tool_use_id" in b
    ]


def add_message(builder: TraceBuilder, msg: Any, where: str) -> None:
    """Append one Anthropic message dict to a builder (tool errors recorded)."""
    if type(msg) is not dict:
        raise NormalizationError(f"{where}: expected an object, got {type(msg).__name__}")
    role = msg.get("role")
    if role not in _ROLES:
        raise NormalizationError(f"{where}: unknown role {role!r} (expected user or assistant)")
    content = msg.get("content")
    builder.add_all(block_messages(role, content, where))
    builder.tool_errors.extend(tool_errors_of(content))


def system_text(system: Any) -> str:
    """A top-level ``system`` value (string or text blocks) → text."""
    return system if isinstance(system, str) else content_text(system)


def normalize(value: Any) -> Trace:
    builder = TraceBuilder()
    usage: dict[str, int] | None = None
    metadata: dict[str, Any] = {}
    messages: Any
    system: Any
    response: dict[str, Any] | None
    if type(value) is list:
        messages, system, response = value, None, None
    elif type(value) is dict:
        if _is_response(value):
            messages, system, response = [], None, value
        else:
            request: dict[str, Any] = as_dict(value.get("request")) or value
            messages, system = request.get("messages"), request.get("system")
            response = as_dict(value.get("response")) or None
            if type(messages) is not list:
                raise NormalizationError("anthropic: no 'messages' list")
            if isinstance(request.get("model"), str):
                metadata["model"] = request["model"]
    else:
        raise NormalizationError(f"anthropic: expected an object or a list, got {type(value).__name__}")
    if system:
        builder.add(Message("system", system_text(system)))
    for i, msg in enumerate(messages):
        add_message(builder, msg, f"message {i}")
    if response is not None:
        add_message(builder, response, "response")
        u = response.get("usage")
        if isinstance(u, dict):
            usage = usage_of(u.get("input_tokens"), u.get("output_tokens"))
        for key in ("model", "stop_reason"):
            if isinstance(response.get(key), str):
                metadata[key] = response[key]
    if usage is None and type(value) is dict and isinstance(value.get("usage"), dict):
        u = value["usage"]
        usage = usage_of(u.get("input_tokens"), u.get("output_tokens"))
    return builder.build("anthropic", usage=usage, metadata=metadata)


FORMAT = TraceFormat(
    name="anthropic",
    description="Anthropic Messages API: content blocks (text, tool_use, tool_result, thinking), system",
    detect=detect,
    normalize=normalize,
)
