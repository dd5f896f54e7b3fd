"""The ids a platform knows a trace by, as a result row carries them (``platform``): the trace id
and the root run / root span id of traces read from LangSmith, Langfuse or OpenTelemetry
(Phoenix) exports, so a push target can put a score on the platform's own trace.

>>> from assay.traces.model import Trace
>>> platform_ids(Trace(id="4bf92f3577b34da6a3ce929d0e0e4736", format="otel",
...                    metadata={"root_span_id": "00f067aa0ba902b7"}))
{'trace_id': '4bf92f3577b34da6a3ce929d0e0e4736', 'root_id': '00f067aa0ba902b7'}
"""

from __future__ import annotations

from typing import Any

from assay.traces.model import Trace

__all__ = ["platform_ids"]


def platform_ids(trace: Trace) -> dict[str, Any] | None:
    """``{trace_id, root_id, session_id}`` (what is known) for traces read from a platform's
    format; None for other formats (a push then uses the row's ``trace_id``)."""
    md = trace.metadata or {}
    if trace.id is None:
        return None
    if trace.format == "otel":
        root = md.get("root_span_id")
        return {"trace_id": trace.id, "root_id": root} if isinstance(root, str) else {"trace_id": trace.id}
    if trace.format == "langsmith":  # a LangSmith trace id is its root run's id
        out: dict[str, Any] = {"trace_id": trace.id, "root_id": trace.id}
        if isinstance(md.get("session_id"), str):
            out["session_id"] = md["session_id"]
        return out
    if trace.format == "langfuse":
        return {"trace_id": trace.id}
    return None
