"""A small corpus of OpenTelemetry (OTLP/JSON) traces for the push tests: one trace per line, a
root ``chat`` span whose trace id is a UUID's 32 hex digits (so LangSmith, Langfuse, Phoenix and an
OTLP backend can all address it) and whose span id is the root span id."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any


def _attr(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def otel_trace(i: int, *, answer: str = "It is sunny.") -> tuple[dict[str, Any], str, str]:
    """One trace: (the OTLP/JSON document, trace id, root span id)."""
    trace_id = uuid.uuid5(uuid.NAMESPACE_URL, f"assay-push-test/{i}").hex
    span_id = f"{i + 1:016x}"
    inputs = [{"role": "user", "parts": [{"type": "text", "content": f"Weather in city {i}?"}]}]
    outputs = [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
    span = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": "chat gpt-4o-mini",
        "kind": 3,
        "startTimeUnixNano": str(1763805603100000000 + i * 1_000_000_000),
        "endTimeUnixNano": str(1763805604000000000 + i * 1_000_000_000),
        "attributes": [
            _attr("gen_ai.operation.name", "chat"),
            _attr("gen_ai.provider.name", "openai"),
            _attr("gen_ai.request.model", "gpt-4o-mini"),
            _attr("gen_ai.input.messages", json.dumps(inputs)),
            _attr("gen_ai.output.messages", json.dumps(outputs)),
        ],
    }
    doc = {
        "resourceSpans": [
            {
                "resource": {"attributes": [_attr("service.name", "agent")]},
                "scopeSpans": [{"scope": {"name": "test"}, "spans": [span]}],
            }
        ]
    }
    return doc, trace_id, span_id


def write_corpus(path: Path, n: int) -> list[tuple[str, str]]:
    """Write ``n`` traces as JSON lines; returns their (trace id, root span id)."""
    ids = []
    with path.open("w") as f:
        for i in range(n):
            doc, tid, sid = otel_trace(i)
            f.write(json.dumps(doc) + "\n")
            ids.append((tid, sid))
    return ids
