"""``potato.evaluators.trajectory``: ``normalize_trajectory`` / ``extract_tool_calls`` over every
trace shape assay reads (OpenAI messages, potato's canonical ``conversation`` with
``Agent (Action)`` turns, LangChain messages, …), as potato's ``Step`` / ``ToolCall``.

>>> [c.name for c in extract_tool_calls({"conversation": [
...     {"speaker": "Agent (Action)", "text": 'get_weather({"loc": "NYC"})'}]})]
['get_weather']
>>> normalize_trajectory(None), len(normalize_trajectory("hello"))
([], 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from assay.traces.model import Message
from assay.traces.normalize import to_trace


@dataclass
class ToolCall:
    """One tool call: its name and arguments (``{"_raw": text}`` when they are not JSON)."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "args": self.args}


@dataclass
class Step:
    """One message of a trajectory: role, text content and the tool calls it made."""

    role: str
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)


def _step(m: Message) -> Step:
    calls = [ToolCall(c.name, dict(c.args)) for c in m.tool_calls or []]
    return Step(role=m.role, content=_text(m.content), tool_calls=calls)


def normalize_trajectory(obj: Any) -> list[Step]:
    """Any supported trajectory as a list of steps (``None`` → ``[]``, a string → one assistant step)."""
    if obj is None:
        return []
    if isinstance(obj, str):
        return [Step(role="assistant", content=obj)]
    if isinstance(obj, list | tuple) and obj and all(isinstance(s, Step) for s in obj):
        return list(obj)
    trace = to_trace(list(obj) if isinstance(obj, tuple) else obj)
    if not trace.messages and trace.final_output is not None:
        return [Step(role="assistant", content=_text(trace.final_output))]
    return [_step(m) for m in trace.messages]


def extract_tool_calls(obj: Any) -> list[ToolCall]:
    """The trajectory's tool calls, in order."""
    return [c for step in normalize_trajectory(obj) for c in step.tool_calls]


__all__ = ["Step", "ToolCall", "extract_tool_calls", "normalize_trajectory"]
