"""Potato canonical traces (``CanonicalTrace``) → canonical trace.

Reads ``{"id", "task_description", "conversation": [{"speaker", "text"}, ...], "metadata_table"}``,
a bare list of turns, or a ``CanonicalTrace``-like object (read through ``to_dict()`` or its
``conversation``/``task_description``/``id`` attributes). Speakers map to roles as potato's
trajectory evaluators map them: ``User…`` → user, ``System…`` → system, ``Environment…``/``Tool…``
or containing "observation" → tool, anything else → assistant. A speaker containing
``(Action)`` (``Agent (Action)``, ``Researcher (Action)``) is a tool call written ``name(args)``;
the args are JSON, else Python keyword arguments of literals (``search(query='x')`` gives
``{"query": "x"}``, where potato keeps ``{"_raw": "query='x'"}``), else kept raw and flagged.
Consecutive agent turns (thoughts and actions) form one assistant message; each tool turn
answers the oldest pending call (ids are synthesized: potato records none).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from assay.exceptions import NormalizationError
from assay.traces.assemble import TraceBuilder
from assay.traces.base import TraceFormat
from assay.traces.model import Message, ToolCall, Trace
from assay.traces.openai import parse_args

_ACTION = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*\((.*)\)\s*$", re.DOTALL)


def _object_dict(value: Any) -> dict[str, Any] | None:
    """A CanonicalTrace-like object → its dict form (None if it is not one)."""
    if type(value) is dict or type(value) is list or not hasattr(value, "conversation"):
        return None
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        d = to_dict()
        if type(d) is dict:
            return d
    return {
        "id": getattr(value, "id", None),
        "task_description": getattr(value, "task_description", None),
        "conversation": value.conversation,
        "metadata_table": getattr(value, "metadata_table", None),
    }


def _is_turn(t: Any) -> bool:
    return type(t) is dict and isinstance(t.get("speaker"), str) and "role" not in t


def detect(value: Any) -> bool:
    if type(value) is dict:
        conv = value.get("conversation")
        return type(conv) is list and (not conv or _is_turn(conv[0]))
    if type(value) is list:
        return bool(value) and _is_turn(value[0])
    return value is not None and not isinstance(value, str | int | float) and hasattr(value, "conversation")


def speaker_role(speaker: str) -> str:
    """Potato's speaker → role rule."""
    s = speaker.lower()
    if s.startswith("user"):
        return "user"
    if s.startswith("system"):
        return "system"
    if s.startswith(("environment", "tool")) or "observation" in s:
        return "tool"
    return "assistant"


def _kwargs_args(inner: str) -> dict[str, Any] | None:
    """``query='x', k=3`` → ``{"query": "x", "k": 3}`` when every value is a literal."""
    try:
        node = ast.parse(f"f({inner})", mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if not isinstance(node, ast.Call) or node.args:
        return None
    out: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            return None
        try:
            out[kw.arg] = ast.literal_eval(kw.value)
        except (ValueError, SyntaxError, TypeError):
            return None
    return out


def parse_action(text: str, call_id: str) -> tuple[ToolCall, str | None]:
    """A flattened ``name(args)`` action turn → (ToolCall, warning or None)."""
    m = _ACTION.match(text)
    if m is None:
        # potato's reading: the whole text is the tool name, with no arguments
        name = text.strip()
        return ToolCall(name, {}, call_id), f"action turn {name[:40]!r} is not of the form name(args)"
    name, inner = m.group(1), m.group(2)
    args, err = parse_args(inner.strip())
    if err is not None and "_raw" in args:
        kwargs = _kwargs_args(inner)
        if kwargs is not None:
            args, err = kwargs, None
    return ToolCall(name, args, call_id, err), None


def normalize(value: Any) -> Trace:
    obj = _object_dict(value)
    if obj is not None:
        value = obj
    if type(value) is list:
        record: dict[str, Any] = {"conversation": value}
    elif type(value) is dict:
        record = value
    else:
        raise NormalizationError(f"potato: expected a trace object or dict, got {type(value).__name__}")
    conv = record.get("conversation")
    if type(conv) is not list:
        raise NormalizationError("potato: 'conversation' must be a list of {speaker, text} turns")
    builder = TraceBuilder()
    texts: list[str] = []
    calls: list[ToolCall] = []

    def flush() -> None:
        nonlocal texts, calls
        if texts or calls:
            builder.assistant("\n".join(texts), calls)
            texts, calls = [], []

    for i, turn in enumerate(conv):
        if type(turn) is not dict or not isinstance(turn.get("speaker"), str):
            raise NormalizationError(f"potato: turn {i} is not a {{speaker, text}} object")
        speaker = turn["speaker"]
        text = turn.get("text")
        text = "" if text is None else text if isinstance(text, str) else str(text)
        role = speaker_role(speaker)
        if role == "assistant":
            if "(action)" in speaker.lower():
                if text.strip():
                    call, warning = parse_action(text, builder.synth_id())
                    calls.append(call)
                    if warning:
                        builder.warnings.append(f"turn {i}: {warning}")
            elif text:
                texts.append(text)
            continue
        flush()
        if role == "tool":
            builder.tool_result(text, is_error="error" in speaker.lower(), synthesize=False)
        else:
            builder.add(Message(role, text))
    flush()
    task = record.get("task_description")
    table = record.get("metadata_table")
    metadata: dict[str, Any] = {}
    if type(table) is list:
        metadata = {str(row["Property"]): row.get("Value") for row in table if type(row) is dict and "Property" in row}
    if isinstance(record.get("agent_name"), str) and record["agent_name"]:
        metadata["agent_name"] = record["agent_name"]
    fallback = None
    if isinstance(task, str) and task:
        metadata["task_description"] = fallback = task
    # potato's converters put the system prompt in task_description when there is one, so the
    # first User turn is the better task; task_description is the fallback
    user = next((m.text for m in builder.messages if m.role == "user" and m.text), None)
    return builder.build("potato", id=record.get("id"), input=user or fallback, metadata=metadata)


FORMAT = TraceFormat(
    name="potato",
    description="Potato canonical traces: {speaker, text} turns; 'Agent (Action)' turns are tool calls",
    detect=detect,
    normalize=normalize,
)
