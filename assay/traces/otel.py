"""OpenTelemetry GenAI spans → canonical trace.

Reads an OTLP/JSON export (``{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}``, attribute
lists ``[{"key", "value": {"stringValue"|"intValue"|...}}]``), a list of such exports, or a flat
list of spans (``{"spans": [...]}`` too) with dict or OTLP attributes, as the Python SDK's
``span.to_json()`` and most collectors write them. Spans are visited in start-time order. A
single span (one document of a ``ConsoleSpanExporter`` stream) is read as a trace of its own,
with a warning unless it is a root span: session mode groups such streams by trace id
(:mod:`assay.traces.span_groups`).

Chat spans (``gen_ai.operation.name`` chat/text_completion/generate_content, or any span carrying
messages) give messages, read from, in order of preference:

1. ``gen_ai.system_instructions`` + ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON
   ``[{"role", "parts": [{"type": "text"|"tool_call"|"tool_call_response", ...}]}]``; also on a
   ``gen_ai.client.inference.operation.details`` event);
2. the event form: ``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message``,
   ``gen_ai.tool.message`` and ``gen_ai.choice`` span events (body in ``gen_ai.event.content`` or
   the event attributes), and ``gen_ai.content.prompt``/``gen_ai.content.completion`` events;
3. OpenLLMetry's indexed attributes ``gen_ai.prompt.N.role/content/tool_call_id`` and
   ``gen_ai.completion.N.role/content/tool_calls.M.id/name/arguments``.

The first chat span's input opens the trajectory; later ones add only new tool results and user
turns. ``execute_tool`` spans (``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``) give tool results, paired with the
call by id (the call is added when no chat span recorded it). Usage sums the chat spans'
``gen_ai.usage.input_tokens``/``output_tokens`` (or ``prompt_tokens``/``completion_tokens``).
"""

from __future__ import annotations

from typing import Any

import orjson

from assay.exceptions import NormalizationError
from assay.traces.assemble import TraceBuilder, add_usage, as_dict, as_int, usage_of
from assay.traces.base import TraceFormat
from assay.traces.model import Message, ToolCall, Trace, content_text
from assay.traces.openai import parse_args, parse_message
from assay.traces.span_groups import is_root_span as _is_root_span
from assay.traces.span_groups import is_span_row
from assay.traces.timing import Timings, time_key

CHAT_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent"})
_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_MESSAGE_ATTRS = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.prompt.0.role")


# ---- reading spans -------------------------------------------------------------------------


def _any_value(v: Any) -> Any:
    """An OTLP AnyValue ``{"stringValue": ...}`` → a Python value."""
    if type(v) is not dict:
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        n = as_int(v["intValue"])
        return n if n is not None else v["intValue"]
    if "doubleValue" in v:
        return v["doubleValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        return [_any_value(x) for x in (v["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in v:
        return _attrs((v["kvlistValue"] or {}).get("values") or [])
    if "bytesValue" in v:
        return v["bytesValue"]
    return v or None


def _attrs(raw: Any) -> dict[str, Any]:
    if type(raw) is dict:
        return raw
    if type(raw) is list:
        return {kv["key"]: _any_value(kv.get("value")) for kv in raw if type(kv) is dict and "key" in kv}
    return {}


class _Span:
    __slots__ = ("attrs", "end", "events", "failed", "name", "raw_start", "start", "trace_id")

    def __init__(self, raw: dict[str, Any]):
        name = raw.get("name")
        self.name: str = name if isinstance(name, str) else ""
        self.attrs = _attrs(raw.get("attributes"))
        ctx = as_dict(raw.get("context"))
        tid = raw.get("traceId") or raw.get("trace_id") or ctx.get("trace_id")
        self.trace_id = tid.removeprefix("0x") if isinstance(tid, str) else tid  # SDK to_json: "0x…"
        start = raw.get("startTimeUnixNano", raw.get("start_time", raw.get("startTime")))
        self.start = time_key(start)
        self.raw_start = start
        self.end = raw.get("endTimeUnixNano", raw.get("end_time", raw.get("endTime")))
        self.events = [
            (e.get("name"), _attrs(e.get("attributes")), e.get("body"))
            for e in raw.get("events") or ()
            if type(e) is dict
        ]
        status = as_dict(raw.get("status"))
        code = status.get("code", status.get("status_code"))
        self.failed = code in (2, "STATUS_CODE_ERROR", "ERROR")

    def get(self, key: str) -> Any:
        return self.attrs.get(key)

    def event_attr(self, key: str) -> Any:
        """An attribute from the span or from its operation-details event."""
        if key in self.attrs:
            return self.attrs[key]
        for name, attrs, _ in self.events:
            if name == "gen_ai.client.inference.operation.details" and key in attrs:
                return attrs[key]
        return None


def _is_span(s: Any) -> bool:
    return (
        type(s) is dict
        and "name" in s
        and "attributes" in s
        and ("spanId" in s or "span_id" in s or "context" in s or "traceId" in s)
    )


def _raw_spans(value: Any) -> list[dict[str, Any]]:
    if type(value) is dict:
        if "resourceSpans" in value:
            return _export_spans(value)
        if type(value.get("spans")) is list:
            return list(value["spans"])
        if _is_span(value):
            return [value]
        raise NormalizationError("otel: expected an OTLP export (resourceSpans) or a list of spans")
    if type(value) is list:
        if value and type(value[0]) is dict and "resourceSpans" in value[0]:
            return [s for export in value for s in _export_spans(export)]
        return value
    raise NormalizationError(f"otel: expected an OTLP export or spans, got {type(value).__name__}")


def _export_spans(export: Any) -> list[dict[str, Any]]:
    if type(export) is not dict or type(export.get("resourceSpans")) is not list:
        raise NormalizationError("otel: 'resourceSpans' must be a list")
    out: list[dict[str, Any]] = []
    for rs in export["resourceSpans"]:
        scopes = rs.get("scopeSpans", rs.get("instrumentationLibrarySpans")) if type(rs) is dict else None
        for ss in scopes or ():
            spans = ss.get("spans") if type(ss) is dict else None
            if type(spans) is list:
                out.extend(spans)
    return out


def detect(value: Any) -> bool:
    if type(value) is dict:
        if "resourceSpans" in value:
            return True
        spans = value.get("spans")
        if type(spans) is list:
            return bool(spans) and _is_span(spans[0])
        return _is_span(value) and is_span_row(value)  # one span of a span-per-record export
    if type(value) is list and value:
        first = value[0]
        return type(first) is dict and ("resourceSpans" in first or _is_span(first))
    return False


# ---- messages ------------------------------------------------------------------------------


def _json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _parts_text(parts: Any) -> str:
    if isinstance(parts, str):
        return parts
    if type(parts) is not list:
        return content_text(parts)
    return "\n".join(
        p["content"] for p in parts if type(p) is dict and p.get("type") == "text" and isinstance(p.get("content"), str)
    )


def _semconv_message(m: Any, where: str) -> list[Message]:
    """One ``{"role", "parts": [...]}`` message (semconv ≥1.37) → canonical messages."""
    if type(m) is not dict:
        raise NormalizationError(f"{where}: expected a message object")
    parts = m.get("parts")
    if type(parts) is not list:
        return [parse_message(m, 0)]  # an instrumentation that wrote OpenAI-style messages
    role = m.get("role")
    if role == "tool" or any(type(p) is dict and p.get("type") == "tool_call_response" for p in parts):
        return [
            Message("tool", p.get("response"), None, p.get("id"))
            for p in parts
            if type(p) is dict and p.get("type") == "tool_call_response"
        ]
    text = _parts_text(parts)
    if role == "assistant":
        calls = []
        for j, p in enumerate(parts):
            if type(p) is dict and p.get("type") == "tool_call":
                name = p.get("name")
                if not isinstance(name, str) or not name:
                    raise NormalizationError(f"{where} part {j}: tool_call has no name")
                args, err = parse_args(p.get("arguments"))
                calls.append(ToolCall(name, args, p.get("id"), err))
        return [Message("assistant", text, calls or None)]
    if role not in ("system", "user", "developer"):
        raise NormalizationError(f"{where}: unknown role {role!r}")
    return [Message(role, text)]


def _semconv_messages(raw: Any, where: str) -> list[Message]:
    value = _json(raw)
    if type(value) is not list:
        raise NormalizationError(f"{where}: expected a JSON list of messages")
    return [msg for i, m in enumerate(value) for msg in _semconv_message(m, f"{where}[{i}]")]


def _event_body(attrs: dict[str, Any], body: Any) -> dict[str, Any]:
    content = attrs.get("gen_ai.event.content")
    if content is not None:
        body = _json(content)
    if type(body) is dict:
        return body
    return attrs


def _event_messages(span: _Span) -> tuple[list[Message], list[Message]]:
    inputs: list[Message] = []
    outputs: list[Message] = []
    for name, attrs, raw_body in span.events:
        if name in _EVENT_ROLES:
            body = _event_body(attrs, raw_body)
            role = _EVENT_ROLES[name]
            msg = {"role": role, "content": body.get("content"), "tool_calls": body.get("tool_calls")}
            if role == "tool":
                msg["tool_call_id"] = body.get("id", body.get("tool_call_id"))
            inputs.append(parse_message(msg, len(inputs)))
        elif name == "gen_ai.choice":
            body = _event_body(attrs, raw_body)
            inner = as_dict(body.get("message")) or body
            msg = {
                "role": "assistant",
                "content": inner.get("content"),
                "tool_calls": inner.get("tool_calls"),
            }
            outputs.append(parse_message(msg, len(outputs)))
        elif name == "gen_ai.content.prompt" and "gen_ai.prompt" in attrs:
            inputs.extend(_openai_list(attrs["gen_ai.prompt"], "gen_ai.prompt"))
        elif name == "gen_ai.content.completion" and "gen_ai.completion" in attrs:
            outputs.extend(_openai_list(attrs["gen_ai.completion"], "gen_ai.completion"))
    return inputs, outputs


def _openai_list(raw: Any, where: str) -> list[Message]:
    value = _json(raw)
    if isinstance(value, str):
        return [Message("assistant" if "completion" in where else "user", value)]
    if type(value) is dict:
        value = [value]
    if type(value) is not list:
        raise NormalizationError(f"{where}: expected JSON messages")
    return [parse_message({"role": "assistant", **m} if "role" not in m else m, i) for i, m in enumerate(value)]


def _indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """OpenLLMetry ``prefix.N.field`` / ``prefix.N.tool_calls.M.field`` attributes → dicts by N."""
    rows: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        head, _, rest = key[len(prefix) :].partition(".")
        if not head.isdigit() or not rest:
            continue
        row = rows.setdefault(int(head), {})
        if rest.startswith("tool_calls."):
            idx, _, field = rest[len("tool_calls.") :].partition(".")
            if idx.isdigit() and field:
                calls = row.setdefault("_calls", {})
                calls.setdefault(int(idx), {})[field] = value
        else:
            row[rest] = value
    out: list[dict[str, Any]] = []
    for n in sorted(rows):
        row = rows[n]
        calls = row.pop("_calls", None)
        if calls:
            row["tool_calls"] = [calls[i] for i in sorted(calls)]
        out.append(row)
    return out


def _openllmetry_messages(span: _Span) -> tuple[list[Message], list[Message]]:
    prompt = _indexed(span.attrs, "gen_ai.prompt.")
    completion = _indexed(span.attrs, "gen_ai.completion.")
    inputs = [parse_message({"role": "user", **m} if "role" not in m else m, i) for i, m in enumerate(prompt)]
    outputs = [parse_message({**m, "role": m.get("role") or "assistant"}, i) for i, m in enumerate(completion)]
    return inputs, outputs


def span_messages(span: _Span) -> tuple[list[Message], list[Message]]:
    """A chat span's (input messages, output messages)."""
    inp, out = span.event_attr("gen_ai.input.messages"), span.event_attr("gen_ai.output.messages")
    if inp is not None or out is not None:
        inputs = _semconv_messages(inp, "gen_ai.input.messages") if inp is not None else []
        system = span.event_attr("gen_ai.system_instructions")
        if system is not None:
            inputs.insert(0, Message("system", _parts_text(_json(system))))
        outputs = _semconv_messages(out, "gen_ai.output.messages") if out is not None else []
        return inputs, outputs
    if span.events:
        inputs, outputs = _event_messages(span)
        if inputs or outputs:
            return inputs, outputs
    return _openllmetry_messages(span)


# ---- assembling ----------------------------------------------------------------------------


def _is_tool_span(span: _Span) -> bool:
    op = span.get("gen_ai.operation.name")
    return (
        op == "execute_tool"
        or (op is None and "gen_ai.tool.name" in span.attrs)
        or (span.get("traceloop.span.kind") == "tool")
    )


def _is_chat_span(span: _Span) -> bool:
    if span.get("gen_ai.operation.name") in CHAT_OPERATIONS:
        return True
    if any(k in span.attrs for k in _MESSAGE_ATTRS):
        return True
    return any(name in _EVENT_ROLES or name == "gen_ai.choice" for name, _, _ in span.events)


def _span_usage(span: _Span) -> dict[str, int] | None:
    a = span.attrs
    return usage_of(
        a.get("gen_ai.usage.input_tokens", a.get("gen_ai.usage.prompt_tokens")),
        a.get("gen_ai.usage.output_tokens", a.get("gen_ai.usage.completion_tokens")),
        a.get("llm.usage.total_tokens"),
    )


def _add_tool(builder: TraceBuilder, span: _Span) -> None:
    a = span.attrs
    if a.get("traceloop.span.kind") == "tool" and "gen_ai.tool.name" not in a:
        name = a.get("traceloop.entity.name") or span.name
        raw_in = _json(a.get("traceloop.entity.input"))
        args = raw_in.get("inputs", raw_in.get("kwargs", raw_in)) if type(raw_in) is dict else raw_in
        result = _json(a.get("traceloop.entity.output"))
        call_id = None
    else:
        name = a.get("gen_ai.tool.name") or span.name.removeprefix("execute_tool ").strip() or None
        args = a.get("gen_ai.tool.call.arguments")
        result = a.get("gen_ai.tool.call.result")
        call_id = a.get("gen_ai.tool.call.id")
    if span.failed and result is None:
        result = a.get("error.type") or "error"
    builder.tool_result(
        result,
        call_id=str(call_id) if call_id is not None else None,
        name=name if isinstance(name, str) else None,
        args=args,
        is_error=span.failed,
    )


def _span_id(raw: dict[str, Any]) -> str | None:
    sid = raw.get("spanId") or raw.get("span_id") or as_dict(raw.get("context")).get("span_id")
    return sid.removeprefix("0x") if isinstance(sid, str) and sid else None


def normalize(value: Any) -> Trace:
    spans = []
    root_span_id: str | None = None
    for i, raw in enumerate(_raw_spans(value)):
        if type(raw) is not dict:
            raise NormalizationError(f"otel: span {i} is not an object")
        spans.append(_Span(raw))
        if root_span_id is None and _is_root_span(raw):
            root_span_id = _span_id(raw)
    spans.sort(key=lambda s: (s.start is None, s.start or 0.0))
    chat = [s for s in spans if not _is_tool_span(s) and _is_chat_span(s)]
    # agent spans repeat their model calls' messages: read them only when no chat span exists
    model_calls = [s for s in chat if s.get("gen_ai.operation.name") not in AGENT_OPERATIONS]
    if model_calls:
        chat = model_calls
    chat_ids = {id(s) for s in chat}
    builder = TraceBuilder()
    usage: dict[str, int] | None = None
    metadata: dict[str, Any] = {}
    found = False
    for span in spans:
        if id(span) in chat_ids:
            found = True
            try:
                inputs, outputs = span_messages(span)
            except NormalizationError as exc:
                raise NormalizationError(f"otel: span {span.name!r}: {exc}") from exc
            builder.add_llm_input(inputs)
            builder.add_all(outputs)
            usage = add_usage(usage, _span_usage(span))
            for key, attr in (("model", "gen_ai.request.model"), ("provider", "gen_ai.provider.name")):
                v = span.get(attr) or (span.get("gen_ai.system") if key == "provider" else None)
                if key not in metadata and isinstance(v, str):
                    metadata[key] = v
        elif _is_tool_span(span):
            found = True
            _add_tool(builder, span)
        elif isinstance(span.get("gen_ai.agent.name"), str) and "agent_name" not in metadata:
            metadata["agent_name"] = span.get("gen_ai.agent.name")
    if not found:
        raise NormalizationError(f"otel: none of the {len(spans)} spans carries GenAI (gen_ai.*) attributes")
    if root_span_id is not None:
        metadata["root_span_id"] = root_span_id  # where a push target annotates the trace (Phoenix)
    trace_ids = {s.trace_id for s in spans if s.trace_id}
    if len(trace_ids) > 1:
        builder.warnings.append(f"spans of {len(trace_ids)} traces were read as one trace")
    if type(value) is dict and _is_span(value) and not _is_root_span(value):
        builder.warnings.append(
            "one span of a trace was read alone; read span-per-record exports (ConsoleSpanExporter) "
            "in session mode to group their spans by trace id"
        )
    trace = builder.build(
        "otel", id=next(iter(trace_ids)) if len(trace_ids) == 1 else None, usage=usage, metadata=metadata
    )
    timings = Timings()
    for span in spans:
        timings.add(span.name, _span_type(span, chat_ids), span.raw_start, span.end)
    return timings.apply(trace)


_TRACELOOP_KIND = {"workflow": "chain", "task": "chain", "agent": "agent", "tool": "tool"}


def _span_type(span: _Span, chat_ids: set[int]) -> str:
    if _is_tool_span(span):
        return "tool"
    if span.get("gen_ai.operation.name") in AGENT_OPERATIONS:
        return "agent"
    if id(span) in chat_ids or _is_chat_span(span) or "llm.request.type" in span.attrs:
        return "llm"
    kind = _TRACELOOP_KIND.get(span.get("traceloop.span.kind"))
    return kind or ("agent" if "gen_ai.agent.name" in span.attrs else "other")


FORMAT = TraceFormat(
    name="otel",
    description="OpenTelemetry GenAI spans (OTLP JSON or span lists): gen_ai.* messages and tool spans",
    detect=detect,
    normalize=normalize,
)
