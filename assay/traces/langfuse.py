"""Langfuse traces → canonical trace.

Reads a trace as the Langfuse API/SDK exports it (``{"id", "input", "output", "observations":
[...]}``) or a bare list of observations. Observations are visited in ``startTime`` order:

* ``GENERATION``: the first one's input messages open the trajectory, later ones add only new
  tool results and user turns; its output (an OpenAI/LangChain/Anthropic message or completion)
  gives the assistant message and its tool calls;
* ``TOOL`` observations, and ``SPAN``s named like a pending tool call, are tool results (a tool
  observation with no recorded call adds the call too: name = observation name, args = input;
  ``@observe`` inputs ``{"args": [], "kwargs": {...}}`` give the kwargs); ``level: ERROR`` marks
  a failed call. Observations below a tool observation are skipped (sub-agents);
* other ``SPAN``/``AGENT``/``CHAIN``/``EVENT`` observations are containers and are skipped.

The trace's ``input`` gives the task; its ``output`` is the final answer when no assistant text
was recorded. Usage sums the generations' ``usageDetails`` (or ``usage``).
"""

from __future__ import annotations

from typing import Any

from assay.exceptions import NormalizationError
from assay.traces.assemble import TraceBuilder, add_usage, answer_of, task_of, usage_of
from assay.traces.base import TraceFormat
from assay.traces.llm_io import input_messages, output_messages
from assay.traces.model import Trace
from assay.traces.timing import Timings, time_key

OBSERVATION_TYPES = frozenset(
    {
        "GENERATION",
        "SPAN",
        "EVENT",
        "TOOL",
        "AGENT",
        "CHAIN",
        "RETRIEVER",
        "EMBEDDING",
        "EVALUATOR",
        "GUARDRAIL",
    }
)


def _is_observation(o: Any) -> bool:
    return type(o) is dict and o.get("type") in OBSERVATION_TYPES and ("startTime" in o or "traceId" in o)


def detect(value: Any) -> bool:
    if type(value) is dict:
        obs = value.get("observations")
        return type(obs) is list and (not obs or _is_observation(obs[0]))
    return type(value) is list and bool(value) and _is_observation(value[0])


def _tool_args(value: Any) -> Any:
    if type(value) is dict and value and set(value) <= {"args", "kwargs"}:
        args, kwargs = value.get("args") or [], value.get("kwargs") or {}
        if type(kwargs) is dict and not args:
            return kwargs
        return {"args": args, **kwargs} if type(kwargs) is dict else value
    return value


def _usage(o: dict[str, Any]) -> dict[str, int] | None:
    u = o.get("usageDetails")
    if type(u) is not dict or not u:
        u = o.get("usage")
    if type(u) is not dict:
        return None
    return usage_of(
        u.get("input", u.get("promptTokens", u.get("input_tokens"))),
        u.get("output", u.get("completionTokens", u.get("output_tokens"))),
        u.get("total", u.get("totalTokens")),
    )


def _ordered(observations: list[Any]) -> list[dict[str, Any]]:
    for i, o in enumerate(observations):
        if type(o) is not dict or not isinstance(o.get("type"), str):
            raise NormalizationError(f"langfuse: observation {i} is not an object with a 'type'")
    keyed = [(time_key(o.get("startTime")), i, o) for i, o in enumerate(observations)]
    keyed.sort(key=lambda k: (k[0] is None, k[0] or 0.0, k[1]))
    return [o for _, _, o in keyed]


def normalize(value: Any) -> Trace:
    if type(value) is dict:
        trace_obj: dict[str, Any] = value
        observations = value.get("observations")
    elif type(value) is list:
        trace_obj, observations = {}, value
    else:
        raise NormalizationError(f"langfuse: expected a trace or a list of observations, got {type(value).__name__}")
    if type(observations) is not list:
        raise NormalizationError("langfuse: 'observations' must be a list")
    builder = TraceBuilder()
    task = task_of(trace_obj.get("input"))
    usage: dict[str, int] | None = None
    tool_ids: set[Any] = set()
    parents = {o.get("id"): o.get("parentObservationId") for o in observations if type(o) is dict}
    for o in _ordered(observations):
        if _below(o, parents, tool_ids):
            continue
        kind, name = o["type"], o.get("name")
        where = f"observation {name!r}"
        if kind == "GENERATION":
            inputs = input_messages(o.get("input"), f"{where} input")
            if not inputs and not builder.messages and task is not None:
                inputs = input_messages(task)
            builder.add_llm_input(inputs)
            builder.add_all(output_messages(o.get("output"), f"{where} output"))
            usage = add_usage(usage, _usage(o))
        elif kind == "TOOL" or (kind == "SPAN" and isinstance(name, str) and builder.is_pending(name)):
            tool_ids.add(o.get("id"))
            failed = o.get("level") == "ERROR"
            out = o.get("output")
            if out is None and failed:
                out = o.get("statusMessage")
            builder.tool_result(
                out,
                name=name if isinstance(name, str) else None,
                args=_tool_args(o.get("input")),
                is_error=failed,
            )
    final = None
    if not any(m.role == "assistant" and m.text for m in builder.messages):
        final = answer_of(trace_obj.get("output"))
    metadata: dict[str, Any] = {}
    for key in ("name", "sessionId", "userId"):
        if isinstance(trace_obj.get(key), str):
            metadata[key] = trace_obj[key]
    trace = builder.build(
        "langfuse",
        id=trace_obj.get("id"),
        input=task,
        final_output=final,
        usage=usage,
        metadata=metadata,
    )
    _timings(observations, tool_ids).apply(trace)
    latency = trace_obj.get("latency")  # the API's trace latency, in seconds
    if isinstance(latency, int | float) and not isinstance(latency, bool) and latency >= 0:
        trace.metadata["duration_s"] = float(latency)
    return trace


_SPAN_TYPE: dict[Any, str] = {"GENERATION": "llm", "TOOL": "tool", "AGENT": "agent", "CHAIN": "chain", "SPAN": "chain"}


def _timings(observations: list[Any], tool_ids: set[Any]) -> Timings:
    timings = Timings()
    for o in observations:
        if type(o) is dict and o.get("type") != "EVENT":
            kind = "tool" if o.get("id") in tool_ids else _SPAN_TYPE.get(o.get("type"), "other")
            timings.add(o.get("name"), kind, o.get("startTime"), o.get("endTime"))
    return timings


def _below(o: dict[str, Any], parents: dict[Any, Any], tool_ids: set[Any]) -> bool:
    """Whether an observation sits below a tool observation (its sub-steps are not the agent's)."""
    parent = o.get("parentObservationId")
    seen = 0
    while parent is not None and seen < 1000:
        if parent in tool_ids:
            return True
        parent = parents.get(parent)
        seen += 1
    return False


FORMAT = TraceFormat(
    name="langfuse",
    description="Langfuse traces/observations: GENERATION tool calls, TOOL/SPAN results",
    detect=detect,
    normalize=normalize,
)
