"""The agent's tool calls as evaluators see them, including the catalog's record shapes.

Besides tool calls inside chat messages, users log:

* a plain list of tool names (``["lookup_order", "process_refund"]``: the catalog's
  ``check_trajectory(expected=…, actual=…)``), or a list of call dicts
  (``{"name", "args"|"arguments"|"input", "result"}``), as the outputs or the reference;
* an ``all_tool_calls`` list next to the messages (the catalog's run result), each call with its
  ``result``.

>>> [c.name for c in listed_calls(["a", {"name": "b", "args": {"x": 1}}])]
['a', 'b']
>>> listed_calls([{"role": "user", "content": "hi"}]) is None
True
"""

from __future__ import annotations

from typing import Any

import orjson

from assay.traces.model import ToolCall, Trace

_ARG_KEYS = ("args", "arguments", "input", "parameters")


def _call(item: Any) -> ToolCall | None:
    if isinstance(item, str):
        return ToolCall(name=item) if item.strip() else None
    if not isinstance(item, dict) or "role" in item:
        return None
    fn = item.get("function")
    source = fn if isinstance(fn, dict) else item
    name = source.get("name")
    if not isinstance(name, str) or not name:
        return None
    raw = next((source[k] for k in _ARG_KEYS if k in source), None)
    args_error = None
    if isinstance(raw, str):
        try:
            raw = orjson.loads(raw) if raw.strip() else {}
        except orjson.JSONDecodeError:
            raw, args_error = {"_raw": raw}, "arguments are not JSON"
    if raw is None:
        args: dict[str, Any] = {}
    elif isinstance(raw, dict):
        args = raw
    else:
        args, args_error = {"_value": raw}, "arguments are not a JSON object"
    cid = item.get("id")
    return ToolCall(name, args, cid if isinstance(cid, str) else None, args_error, item.get("result"))


def listed_calls(value: Any) -> list[ToolCall] | None:
    """Tool calls from a plain list of tool names or call dicts; None when ``value`` is not one."""
    if not isinstance(value, list | tuple) or not value:
        return None
    calls = [_call(item) for item in value]
    if any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def record_calls(trace: Trace) -> list[ToolCall] | None:
    """The record's ``all_tool_calls`` list (with results), when it has one; else its top-level
    ``tool_calls`` list (the agent-evaluation catalog's run result: ``{name, args}`` dicts)."""
    scenario = trace.scenario or {}
    listed = listed_calls(scenario.get("all_tool_calls"))
    if listed is None:
        listed = listed_calls(scenario.get("tool_calls"))
    return listed


def trace_calls(trace: Trace) -> list[ToolCall]:
    """The agent's tool calls: from the messages, else a listed value, else ``all_tool_calls``."""
    calls = trace.tool_calls()
    if calls:
        return calls
    if trace.format == "value":
        listed = listed_calls(trace.final_output)
        if listed is not None:
            return listed
    return record_calls(trace) or []


def is_listed(trace: Trace) -> bool:
    """Whether the trace is a plain list of tool names/call dicts rather than messages."""
    return trace.format == "value" and not trace.messages and listed_calls(trace.final_output) is not None


__all__ = ["is_listed", "listed_calls", "record_calls", "trace_calls"]
