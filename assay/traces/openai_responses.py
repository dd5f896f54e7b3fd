"""OpenAI Responses API items → canonical trace.

Reads a list of items, a response object ``{"object": "response", "output": [...]}``, or a
record ``{"input": str | [items], "output": [items] | response, "instructions"?}``. Items:

* ``message`` (or an easy input message ``{"role", "content"}``): ``input_text``/``output_text``
  blocks are joined into text, ``refusal`` blocks too;
* ``function_call`` ``{call_id, name, arguments}`` and ``custom_tool_call`` ``{call_id, name,
  input}`` → tool calls (consecutive calls and the assistant text before them form one message);
  ``mcp_call`` → a call and its output; built-in ``*_call`` items (web_search_call, …) → a call
  named after the tool with its ``action`` as arguments;
* ``function_call_output``/``custom_tool_call_output`` ``{call_id, output}`` → tool messages;
* ``reasoning`` items are not part of the answer text.
"""

from __future__ import annotations

from typing import Any

from assay.exceptions import NormalizationError
from assay.traces.assemble import TraceBuilder, usage_of
from assay.traces.base import TraceFormat
from assay.traces.model import Message, ToolCall, Trace, content_text
from assay.traces.openai import ROLE_ALIASES, parse_args

_CALL_TYPES = frozenset({"function_call", "custom_tool_call", "mcp_call"})
_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
_TEXT_BLOCKS = frozenset({"input_text", "output_text"})
_ITEM_TYPES = frozenset({*_CALL_TYPES, *_OUTPUT_TYPES, "reasoning"})


def is_item(item: Any) -> bool:
    """One Responses input or output item (a function call, its output, reasoning, a message with
    ``input_text`` / ``output_text`` blocks)."""
    if type(item) is not dict:
        return False
    kind = item.get("type")
    if kind in _ITEM_TYPES or (isinstance(kind, str) and kind.endswith("_call") and "id" in item):
        return True
    content = item.get("content")
    if kind == "message" or (kind is None and "role" in item):
        return (
            type(content) is list
            and bool(content)
            and type(content[0]) is dict
            and (content[0].get("type") in _TEXT_BLOCKS or content[0].get("type") == "refusal")
        )
    return False


def _has_items(items: list[Any]) -> bool:
    return any(is_item(item) for item in items)


def detect(value: Any) -> bool:
    if type(value) is list:
        return bool(value) and type(value[0]) is dict and _has_items(value)
    if type(value) is not dict:
        return False
    if value.get("object") == "response":
        return True
    output = value.get("output")
    if type(output) is dict:
        return output.get("object") == "response"
    return type(output) is list and bool(output) and _has_items(output) and "messages" not in value


def _message_text(content: Any) -> Any:
    if type(content) is not list:
        return "" if content is None else content
    parts: list[str] = []
    for block in content:
        if type(block) is dict:
            kind = block.get("type")
            if kind in _TEXT_BLOCKS and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif kind == "refusal" and isinstance(block.get("refusal"), str):
                parts.append(block["refusal"])
            elif kind not in _TEXT_BLOCKS and kind != "refusal":
                return content  # images/files: keep the blocks
        elif isinstance(block, str):
            parts.append(block)
    return "\n".join(parts)


class _Reader:
    """Walks items, merging an assistant's text and the calls that follow it into one message."""

    def __init__(self, builder: TraceBuilder):
        self.b = builder
        self.text: list[str] = []
        self.calls: list[ToolCall] = []
        self.open = False

    def flush(self) -> None:
        if self.open:
            self.b.assistant("\n".join(t for t in self.text if t), self.calls)
            self.text, self.calls, self.open = [], [], False

    def item(self, item: Any, where: str) -> None:
        if type(item) is not dict:
            raise NormalizationError(f"{where}: expected an object, got {type(item).__name__}")
        kind = item.get("type")
        if kind == "message" or (kind is None and "role" in item):
            role = ROLE_ALIASES.get(item.get("role"))  # type: ignore[arg-type]
            if role is None or role == "tool":
                raise NormalizationError(f"{where}: unknown message role {item.get('role')!r}")
            text = _message_text(item.get("content"))
            if role == "assistant":
                if self.calls:  # text after calls starts a new turn
                    self.flush()
                self.open = True
                self.text.append(text if isinstance(text, str) else content_text(text))
            else:
                self.flush()
                self.b.add(Message(role, text))
        elif kind in _CALL_TYPES:
            self.open = True
            call = self._call(item, kind, where)
            self.calls.append(call)
            if kind == "mcp_call" and ("output" in item or "error" in item):
                self.flush()  # a server-side call: its output sits on the call item itself
                err = item.get("error")
                out = item.get("output") if err is None else err
                self.b.tool_result(out, call_id=call.id, is_error=err is not None)
        elif kind in _OUTPUT_TYPES:
            self.flush()
            call_id = item.get("call_id")
            if not isinstance(call_id, str):
                raise NormalizationError(f"{where}: {kind} has no call_id")
            out = item.get("output")
            self.b.tool_result(content_text(out) if type(out) is list else out, call_id=call_id)
        elif isinstance(kind, str) and kind.endswith("_call"):
            action = item.get("action")
            args = action if type(action) is dict else {}
            self.open = True
            self.calls.append(ToolCall(kind[: -len("_call")], args, item.get("id")))
        elif kind == "reasoning" or kind is None:
            pass
        # other item types (item_reference, compaction, …) carry no trajectory step

    @staticmethod
    def calls_id(item: dict[str, Any]) -> str:
        return str(item.get("call_id") or item.get("id"))

    def _call(self, item: dict[str, Any], kind: str, where: str) -> ToolCall:
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise NormalizationError(f"{where}: {kind} has no name")
        if kind == "custom_tool_call":
            raw = item.get("input")
            args: dict[str, Any] = {"input": raw} if isinstance(raw, str) else parse_args(raw)[0]
            return ToolCall(name, args, self.calls_id(item))
        parsed, err = parse_args(item.get("arguments"))
        return ToolCall(name, parsed, self.calls_id(item), err)


def _items(value: Any, where: str) -> list[Any]:
    if isinstance(value, str) and where.endswith("input"):  # the API's text shorthand
        return [{"role": "user", "content": value}]
    if type(value) is dict and value.get("object") == "response":
        value = value.get("output")
    if type(value) is not list:
        raise NormalizationError(f"{where} must be a list of items, got {type(value).__name__}")
    return value


def normalize(value: Any) -> Trace:
    builder = TraceBuilder()
    reader = _Reader(builder)
    response: dict[str, Any] | None = None
    if type(value) is list:
        parts: list[tuple[str, Any]] = [("items", value)]
    elif type(value) is dict:
        if value.get("object") == "response":
            response = value
            parts = [("output", value.get("output"))]
        else:
            out = value.get("output")
            response = out if type(out) is dict and out.get("object") == "response" else None
            parts = [("input", value["input"])] if value.get("input") is not None else []
            parts.append(("output", out))
        instructions = value.get("instructions") or (response or {}).get("instructions")
        if isinstance(instructions, str) and instructions:
            builder.add(Message("system", instructions))
    else:
        raise NormalizationError(
            f"openai_responses: expected a list of items or a response object, got {type(value).__name__}"
        )
    for where, items in parts:
        for i, item in enumerate(_items(items, f"openai_responses: {where}")):
            reader.item(item, f"{where} item {i}")
    reader.flush()
    usage = None
    metadata: dict[str, Any] = {}
    if response is not None:
        u = response.get("usage")
        if type(u) is dict:
            usage = usage_of(u.get("input_tokens"), u.get("output_tokens"), u.get("total_tokens"))
        if isinstance(response.get("model"), str):
            metadata["model"] = response["model"]
    trace = builder.build("openai_responses", usage=usage, metadata=metadata)
    if response is not None and isinstance(response.get("id"), str):
        trace.metadata["response_id"] = response["id"]
    return trace


FORMAT = TraceFormat(
    name="openai_responses",
    description="OpenAI Responses API items (message, function_call, function_call_output, reasoning)",
    detect=detect,
    normalize=normalize,
)
