"""Langfuse traces → canonical trace.

Reads a trace as the Langfuse API/SDK exports it (``{"id", "input", "output", "observations":
[...]}``) or a bare list of observations: also the rows of a blob-storage export
(``observations_v2/`` enriched observations, legacy ``observations/``) with snake_case columns
and JSON-text ``input`` / ``output``, grouped by trace id (:mod:`assay.traces.exports`); the
trace's fields then come from the rows (``trace_name``, ``user_id``, ``session_id``) and its
input and output from the root observation, or, with the legacy ``traces/`` row of the trace among
the rows, from that row (name, user and session ids, tags, metadata, input, output).
Observations are visited in ``startTime`` order, then by id:

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
from assay.traces.assemble import (
    TraceBuilder,
    add_usage,
    answer_of,
    cycle_text,
    parent_cycles,
    task_of,
    usage_of,
)
from assay.traces.base import TraceFormat
from assay.traces.exports import OBSERVATION_TYPES, decode_json_text, is_langfuse_trace_row, latest_by_id
from assay.traces.llm_io import input_messages, output_messages, tool_message_output
from assay.traces.model import Trace
from assay.traces.timing import Timings, time_key


def _is_observation(o: Any) -> bool:
    return (
        type(o) is dict
        and o.get("type") in OBSERVATION_TYPES
        and any(k in o for k in ("startTime", "traceId", "start_time", "trace_id"))
    )


#: Export (snake_case) column → API (camelCase) field, for blob-storage export rows.
_CAMEL = {
    "trace_id": "traceId",
    "parent_observation_id": "parentObservationId",
    "start_time": "startTime",
    "end_time": "endTime",
    "status_message": "statusMessage",
    "usage_details": "usageDetails",
    "provided_usage_details": "providedUsageDetails",
    "cost_details": "costDetails",
    "total_cost": "totalCost",
    "provided_model_name": "model",
}
#: Fields exports store as JSON text.
_JSON_TEXT = ("input", "output", "metadata", "usageDetails", "providedUsageDetails", "usage", "costDetails")


#: When an observation row was last written (exports repeat an updated observation: the latest wins).
_UPDATED = ("updated_at", "updatedAt", "endTime")


def _api_form(o: Any) -> Any:
    """An observation as the API returns it: an export row's snake_case columns renamed and its
    JSON-text columns decoded (a TOOL's output stays the text it is: the tool's result); the
    enriched export writes an empty string for an input or output that was not set, which is
    None here. A copy; API-form observations are returned as they are."""
    if type(o) is not dict or not (any(k in o for k in _CAMEL) or "isRootObservation" in o):
        return o  # the v2 observations API (``isRootObservation``) returns raw JSON text as the exports
    out = {_CAMEL.get(k, k): v for k, v in o.items() if k not in _CAMEL or _CAMEL[k] not in o}
    for k in ("input", "output"):
        if out.get(k) == "" and not (k == "output" and out.get("type") == "TOOL"):
            out[k] = None
    for k in _JSON_TEXT:
        if type(out.get(k)) is str and not (k == "output" and out.get("type") == "TOOL"):
            out[k] = decode_json_text(out[k])
    if not out.get("usageDetails") and out.get("providedUsageDetails"):
        out["usageDetails"] = out["providedUsageDetails"]
    return out


def _trace_of_rows(observations: list[Any]) -> dict[str, Any]:
    """The trace fields of a bare list of observations: the id, the enriched export's copied trace
    fields (``trace_name``, ``user_id``, ``session_id``), and ``input`` / ``output`` from the
    earliest root observation (no parent, or ``is_root_observation``)."""
    first = next((o for o in observations if type(o) is dict), {})
    trace: dict[str, Any] = {}
    tid = first.get("traceId")
    if tid is not None:
        trace["id"] = tid
    for key, cols in (
        ("name", ("trace_name", "traceName")),
        ("userId", ("user_id", "userId")),
        ("sessionId", ("session_id", "sessionId", "trace_session_id")),
    ):
        for col in cols:
            if isinstance(first.get(col), str) and first[col]:
                trace[key] = first[col]
                break
    roots = [  # v2 rows mark app roots that keep a physical parent (is_root_observation)
        o
        for o in observations
        if type(o) is dict
        and (
            o.get("is_root_observation") is True
            or o.get("isRootObservation") is True
            or not o.get("parentObservationId")
        )
    ]
    if roots:
        root = _ordered(roots)[0]
        trace["input"] = root.get("input")
        trace["output"] = root.get("output")
    return trace


def detect(value: Any) -> bool:
    if type(value) is dict:
        obs = value.get("observations")
        return type(obs) is list and (not obs or _is_observation(obs[0]))
    return type(value) is list and bool(value) and (_is_observation(value[0]) or is_langfuse_trace_row(value[0]))


def _trace_row_fields(row: dict[str, Any]) -> dict[str, Any]:
    """A legacy ``traces/`` export row as the API's trace fields (JSON text decoded)."""
    out: dict[str, Any] = {"id": row.get("id")}
    for key, col in (("name", "name"), ("userId", "user_id"), ("sessionId", "session_id")):
        if isinstance(row.get(col), str) and row[col]:
            out[key] = row[col]
    for key in ("input", "output"):
        if key in row:
            out[key] = decode_json_text(row[key])
    tags = decode_json_text(row.get("tags"))
    if type(tags) is list and tags:
        out["tags"] = [str(t) for t in tags]
    meta = decode_json_text(row.get("metadata"))
    if type(meta) is dict and meta:
        out["metadata"] = meta
    return out


def _tool_output(value: Any, where: str) -> tuple[Any, str | None, bool]:
    """A tool observation's output → ``(content, tool_call_id, is_error)``: the text it is, unless it
    is a LangChain ``ToolMessage`` (Langfuse's LangChain handler records the message a tool returns;
    in an export, as JSON text), whose content, call id and status are read."""
    message = decode_json_text(value) if type(value) is str and value.lstrip().startswith("{") else value
    if type(message) is dict and message.get("type") == "tool":
        return tool_message_output(message, f"{where} output")
    return value, None, False


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
    keyed = [(time_key(o.get("startTime")), str(o.get("id", "")), i, o) for i, o in enumerate(observations)]
    keyed.sort(key=lambda k: (k[0] is None, k[0] or 0.0, k[1], k[2]))
    return [o for *_, o in keyed]


def normalize(value: Any) -> Trace:
    if type(value) is dict:
        trace_obj: dict[str, Any] = {
            k: decode_json_text(value[k]) if k in ("input", "output") else value[k] for k in value
        }
        observations = value.get("observations")
        if type(observations) is list:
            observations = latest_by_id([_api_form(o) for o in observations], *_UPDATED)
    elif type(value) is list:
        # the legacy traces/ + observations/ pair: the trace's row gives its fields
        trace_rows = [o for o in value if is_langfuse_trace_row(o)]
        observations = latest_by_id([_api_form(o) for o in value if not is_langfuse_trace_row(o)], *_UPDATED)
        trace_obj = _trace_of_rows(observations)
        if trace_rows:
            trace_obj.update(_trace_row_fields(trace_rows[-1]))  # a re-exported trace: its last row
    else:
        raise NormalizationError(f"langfuse: expected a trace or a list of observations, got {type(value).__name__}")
    if type(observations) is not list:
        raise NormalizationError("langfuse: 'observations' must be a list")
    builder = TraceBuilder()
    task = task_of(trace_obj.get("input"))
    usage: dict[str, int] | None = None
    tool_ids: set[Any] = set()
    parents = {o.get("id"): o.get("parentObservationId") for o in observations if type(o) is dict}
    parents.pop(None, None)
    cycles = parent_cycles({k: v for k, v in parents.items() if _hashable(k) and _hashable(v)})
    if cycles:
        raise NormalizationError(
            f"langfuse: the observations' parentObservationId links form a cycle, not a tree: {cycle_text(cycles)} "
            "(no root observation is above them); fix the export's parent_observation_id"
        )
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
            out, call_id, failed = _tool_output(o.get("output"), where)
            failed = failed or o.get("level") == "ERROR"
            if (out is None or out == "") and failed:
                out = o.get("statusMessage")
            builder.tool_result(
                out,
                call_id=call_id,
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
    if type(trace_obj.get("tags")) is list and trace_obj["tags"]:
        metadata["tags"] = trace_obj["tags"]
    if type(trace_obj.get("metadata")) is dict and trace_obj["metadata"]:
        metadata["trace_metadata"] = trace_obj["metadata"]
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


def _hashable(value: Any) -> bool:
    return value is None or isinstance(value, str | int)


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
