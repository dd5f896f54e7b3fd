"""LangChain ``AgentExecutor`` results with ``intermediate_steps`` → canonical trace.

``AgentExecutor(..., return_intermediate_steps=True).invoke(...)`` returns ``{"input", "output",
"intermediate_steps": [[action, observation], ...]}``; saved as JSON, an action is a dict
(``{"tool", "tool_input", "log", "type": "AgentAction"|"ToolAgentAction"|…, "tool_call_id"?}``)
or a ``dumpd`` constructor (``{"lc": 1, "type": "constructor", "id": [..., "AgentAction"],
"kwargs": {...}}``). Each step gives an assistant tool call and its result; ``output`` is the
final answer, ``input`` the task.
"""

from __future__ import annotations

from typing import Any

from assay.exceptions import NormalizationError
from assay.traces.assemble import TraceBuilder, as_dict, loose_args, task_of
from assay.traces.base import TraceFormat
from assay.traces.model import Message, ToolCall, Trace


def _action(a: Any) -> dict[str, Any] | None:
    """An agent action as a flat dict (None when it is not one)."""
    if type(a) is not dict:
        return None
    if a.get("lc") == 1 and a.get("type") == "constructor":
        kwargs = as_dict(a.get("kwargs"))
        return kwargs if "tool" in kwargs else None
    return a if "tool" in a and "tool_input" in a else None


def _steps(value: Any) -> Any:
    return value.get("intermediate_steps") if type(value) is dict else None


def detect(value: Any) -> bool:
    """A dict whose ``intermediate_steps`` starts with an ``[action, observation]`` pair."""
    steps = _steps(value)
    if type(steps) is not list or not steps:
        return False
    first = steps[0]
    return type(first) is list and len(first) == 2 and _action(first[0]) is not None


def normalize(value: Any) -> Trace:
    steps = _steps(value)
    if type(steps) is not list:
        raise NormalizationError("langchain_agent: expected {'intermediate_steps': [[action, observation], ...]}")
    builder = TraceBuilder()
    task = task_of(value.get("input"))
    if task is not None:
        builder.add(Message("user", task))
    for i, step in enumerate(steps):
        action = _action(step[0]) if type(step) is list and len(step) == 2 else None
        if action is None:
            raise NormalizationError(f"langchain_agent: step {i} is not an [action, observation] pair")
        args, err = loose_args(action.get("tool_input"))
        call_id = action.get("tool_call_id")
        call = ToolCall(str(action["tool"]), args, call_id if isinstance(call_id, str) else builder.synth_id(), err)
        builder.assistant("", [call])
        builder.tool_result(step[1], call_id=call.id, name=call.name)
    output = value.get("output")
    if output is not None:
        builder.assistant(output if isinstance(output, str) else str(output))
    return builder.build("langchain_agent", input=task)


FORMAT = TraceFormat(
    name="langchain_agent",
    description="LangChain AgentExecutor results with intermediate_steps ([action, observation] pairs)",
    detect=detect,
    normalize=normalize,
)
