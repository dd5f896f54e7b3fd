"""The canonical trace every input format is normalized into.

msgspec Structs: a trace is built once per record on the hot path and holds dozens of messages
and tool calls, so construction must be cheap (a Struct is built in C, about twice as fast as a
slotted dataclass). Normalizers are responsible for shapes; these classes trust their inputs.
"""

from __future__ import annotations

from typing import Any

import msgspec

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


class ToolCall(msgspec.Struct):
    """One tool call made by the agent.

    ``args`` is always a dict. Arguments that were not a JSON object are kept as
    ``{"_raw": text}`` (not JSON) or ``{"_value": parsed}`` (JSON, but not an object), and
    ``args_error`` says what was wrong, so nothing is lost and nothing crashes.
    """

    name: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)
    id: str | None = None
    args_error: str | None = None
    result: Any = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "name": self.name, "args": self.args}
        if self.args_error is not None:
            d["args_error"] = self.args_error
        if self.result is not None:
            d["result"] = self.result
        return d


class Message(msgspec.Struct):
    """One message of a trajectory. ``role`` is one of system, developer, user, assistant, tool."""

    role: str
    content: Any = ""
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    @property
    def text(self) -> str:
        """The message content as plain text (content blocks joined)."""
        return content_text(self.content)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls is not None:
            d["tool_calls"] = [tc.to_dict() for tc in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            d["name"] = self.name
        return d


class Trace(msgspec.Struct):
    """A canonical trace: what the agent was asked, what it did, and what was expected.

    * ``messages``: the agent's trajectory; ``final_output``: its final answer (the last assistant
      text, or the raw output value when the record held no messages);
    * ``reference``: the expected trajectory/output, itself a ``Trace`` (or None);
    * ``context``: retrieved documents; ``scenario``: per-record test-case fields (expected tools,
      budgets, …) read by the scenario evaluators; ``usage``: token counts.
    """

    id: str | None = None
    input: Any = None
    messages: list[Message] = msgspec.field(default_factory=list)
    final_output: Any = None
    reference: Trace | None = None
    context: Any = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    usage: dict[str, Any] | None = None
    scenario: dict[str, Any] | None = None
    format: str | None = None
    warnings: list[str] | None = None
    args_defects: int = -1
    """Tool calls (both sides) whose arguments were not a JSON object; -1 = not counted."""

    def tool_calls(self) -> list[ToolCall]:
        """Every tool call in the trajectory, in order (flattened across messages)."""
        return [tc for m in self.messages if m.tool_calls for tc in m.tool_calls]

    def tool_results(self) -> dict[str, Any]:
        """Tool results keyed by tool_call_id."""
        return {m.tool_call_id: m.content for m in self.messages if m.role == "tool" and m.tool_call_id}

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "format": self.format,
            "input": self.input,
            "messages": [m.to_dict() for m in self.messages],
            "final_output": self.final_output,
        }
        if self.reference is not None:
            d["reference"] = self.reference.to_dict()
        for name in ("context", "usage", "scenario"):
            value = getattr(self, name)
            if value is not None:
                d[name] = value
        if self.metadata:
            d["metadata"] = self.metadata
        if self.warnings:
            d["warnings"] = self.warnings
        return d


def content_text(content: Any) -> str:
    """Flatten message content (a string or a list of content blocks) into text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                text = block.get("text")
                if text is None:
                    inner = block.get("content")
                    text = content_text(inner) if isinstance(inner, str | list) else None
                if isinstance(text, str) and text:
                    parts.append(text)
        return "\n".join(parts)
    if isinstance(content, dict):
        text = content.get("text")
        if isinstance(text, str):
            return text
    return str(content)


def final_assistant_text(messages: list[Message]) -> str | None:
    """The last assistant message with text content, or None."""
    for m in reversed(messages):
        if m.role == "assistant":
            text = content_text(m.content)
            if text:
                return text
    return None
