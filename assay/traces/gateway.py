"""LLM proxy and gateway logs, and bare completion objects → canonical trace.

A proxy (LiteLLM, Helicone, Portkey, an in-house gateway) logs each LLM call as the request it
forwarded and the response it got back. The last call of an agent run holds the whole conversation
(the request's messages) and the final answer (the response's message). Read shapes:

* ``{"request": {...}, "response": {...}}`` (in-house proxies; Portkey's ``{request: {body},
  response: {body}}``; OpenAI Batch API output's ``response.body``);
* ``{"request_body": ..., "response_body": ...}`` (Helicone request exports);
* ``{"messages": [...], "response": {...}}`` (LiteLLM's ``StandardLoggingPayload`` and proxy spend
  logs; bodies may be JSON text);
* a bare ``ChatCompletion`` (``{"object": "chat.completion", "choices": [...]}``), and an OpenAI
  Batch API output line (``{"custom_id", "response": {"body": ChatCompletion}}``).

The request may be OpenAI chat (``messages``), Anthropic (``system`` + ``messages``) or Responses
(``input`` + ``instructions``); the response a ChatCompletion, an Anthropic ``Message`` or a
Responses ``response`` object. Timings (LiteLLM ``startTime``/``endTime``, Helicone ``delay_ms``,
Portkey ``response_time``) give ``metadata["duration_s"]``.
"""

from __future__ import annotations

from typing import Any

import orjson

from assay.exceptions import NormalizationError
from assay.traces.assemble import TraceBuilder
from assay.traces.base import TraceFormat
from assay.traces.llm_io import input_messages, output_messages, output_usage
from assay.traces.model import Message, Trace
from assay.traces.timing import seconds_between

#: (request key, response key) pairs, in preference order.
_PAIRS = (("request", "response"), ("request_body", "response_body"), ("messages", "response"))


def _body(value: Any) -> Any:
    """A logged body: JSON text parsed; a ``{"body": {...}}`` envelope (Portkey, Batch API) opened."""
    if isinstance(value, str | bytes) and value[:1] in ("{", "[", b"{", b"["):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    if type(value) is dict and type(value.get("body")) in (dict, str):
        inner = value["body"]
        return _body(inner) if isinstance(inner, str) else inner
    return value


def is_completion(value: Any) -> bool:
    """A chat completion, an Anthropic message or a Responses ``response`` object. Cheap."""
    if type(value) is not dict:
        return False
    kind = value.get("object")
    if kind == "chat.completion" or kind == "response":
        return True
    if kind is None and type(value.get("choices")) is list and "model" in value:
        return True
    return value.get("type") == "message" and value.get("role") == "assistant" and type(value.get("content")) is list


def _pair(value: Any) -> tuple[Any, Any] | None:
    """The (request, response) a log record holds, or None."""
    if type(value) is not dict:
        return None
    if "custom_id" in value and "request" not in value and type(value.get("response")) is dict:
        response = _body(value["response"])  # an OpenAI Batch output line: no request is logged
        return (None, response) if is_completion(response) else None
    for req_key, res_key in _PAIRS:
        if res_key in value and req_key in value:
            response = _body(value[res_key])
            if not is_completion(response):
                continue
            if req_key != "request_body" and response is value[res_key] and response.get("type") == "message":
                continue  # an Anthropic request with its response, unwrapped: the anthropic format reads it
            return _body(value[req_key]), response
    return None


def is_log(value: Any) -> bool:
    """Whether a dict is a proxy log: a request and a completion response."""
    return _pair(value) is not None


def detect(value: Any) -> bool:
    """A proxy log whose response is a completion object, or a bare ChatCompletion."""
    if type(value) is not dict:
        return False
    if value.get("object") == "chat.completion" and type(value.get("choices")) is list:
        return True
    return _pair(value) is not None


def _request_messages(request: Any) -> list[Message]:
    if type(request) is list:  # LiteLLM logs the bare message list
        return input_messages(request, "request")
    if type(request) is not dict:
        return input_messages(request, "request") if isinstance(request, str) else []
    messages = input_messages(request.get("messages"), "request") if "messages" in request else []
    system = request.get("system")  # Anthropic: a string or text blocks
    if isinstance(system, str) and system:
        messages.insert(0, Message("system", system))
    elif type(system) is list and system:
        text = "\n".join(b.get("text", "") for b in system if type(b) is dict)
        messages.insert(0, Message("system", text))
    return messages


def _responses(request: Any, response: dict[str, Any]) -> Trace:
    from assay.traces.openai_responses import normalize as responses_normalize

    value: dict[str, Any] = {"output": response}
    if type(request) is dict:
        if request.get("input") is not None:
            value["input"] = request["input"]
        if isinstance(request.get("instructions"), str):
            value["instructions"] = request["instructions"]
    return responses_normalize(value)


def normalize(value: Any) -> Trace:
    if type(value) is not dict:
        raise NormalizationError(f"gateway: expected a log object, got {type(value).__name__}")
    pair = _pair(value)
    if pair is None:
        if value.get("object") != "chat.completion":
            raise NormalizationError("gateway: no request/response pair with a completion response")
        request, response = None, value
    else:
        request, response = pair
    if response.get("object") == "response":
        trace = _responses(request, response)
    else:
        builder = TraceBuilder()
        builder.add_all(_request_messages(request))
        builder.add_all(output_messages(response, "response"))
        metadata: dict[str, Any] = {}
        if isinstance(response.get("model"), str):
            metadata["model"] = response["model"]
        trace = builder.build("gateway", usage=output_usage(response), metadata=metadata)
    trace.format = "gateway"
    if pair is not None:
        duration = _duration(value)
        if duration is not None:
            trace.metadata["duration_s"] = duration
            name = trace.metadata.get("model") or "llm"
            trace.metadata["spans"] = [{"name": name, "type": "llm", "duration_s": duration}]
        md = value.get("metadata")
        tid = value.get("trace_id") or value.get("custom_id") or value.get("request_id") or value.get("id")
        tid = tid or (md.get("trace_id") if type(md) is dict else None)  # Portkey
        if isinstance(tid, str | int) and not isinstance(tid, bool):
            trace.id = str(tid)
    elif isinstance(response.get("id"), str):
        trace.id = response["id"]
    return trace


def _duration(log: dict[str, Any]) -> float | None:
    start, end = log.get("startTime", log.get("start_time")), log.get("endTime", log.get("end_time"))
    if start is not None and end is not None:
        return seconds_between(start, end)
    for key, scale in (("delay_ms", 1e-3), ("latency_ms", 1e-3), ("response_time", 1e-3), ("latency", 1.0)):
        v = log.get(key)
        if v is None and type(log.get("response")) is dict:
            v = log["response"].get(key)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return float(v) * scale
    return None


FORMAT = TraceFormat(
    name="gateway",
    description="LLM proxy/gateway logs (LiteLLM, Helicone, Portkey): request + response; a bare ChatCompletion",
    detect=detect,
    normalize=normalize,
)
