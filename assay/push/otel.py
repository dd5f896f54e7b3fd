"""OpenTelemetry: one ``gen_ai.evaluation.result`` event per result, as an OTLP/HTTP protobuf
``ExportLogsServiceRequest`` to ``{endpoint}/v1/logs`` (``endpoint`` is the OTLP/HTTP base URL, as
the OpenTelemetry exporters read ``OTEL_EXPORTER_OTLP_ENDPOINT``).

Each log record is an event (``event_name`` and the ``event.name`` attribute) with
``gen_ai.evaluation.name`` (the result key), ``gen_ai.evaluation.score.value``,
``gen_ai.evaluation.score.label``, ``gen_ai.evaluation.explanation`` and ``error.type`` on
failure, carrying the trace id and the root span id when they are OpenTelemetry ids (32 and 16
hex digits), timestamped with the run's stable day. OTLP has no upsert key: the record carries
``assay.evaluation.id`` (the deterministic id) for a backend to de-duplicate on, and the push
ledger sends each record once unless a push is killed between sending and recording.
Needs the extra ``assay[push]`` (``opentelemetry-proto``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import Field

from assay.push.base import ItemOutcome, PushItem, PushParams, PushTarget, Request, SplitBatch, json_message
from assay.push.phoenix import label_of

__all__ = ["OtelParams", "OtelTarget", "log_records"]

_HEX32 = re.compile(r"^[0-9a-fA-F]{32}$")
_HEX16 = re.compile(r"^[0-9a-fA-F]{16}$")


class OtelParams(PushParams):
    """``{type: otel, endpoint: http://127.0.0.1:4318}``."""

    endpoint: str = "http://127.0.0.1:4318"
    headers_env: dict[str, str] = Field(default_factory=dict)
    """Request headers whose values come from environment variables (``{authorization: OTLP_AUTH}``)."""
    service_name: str = "assay"


def _attr(key: str, value: Any) -> Any:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def log_records(items: Sequence[PushItem]) -> list[Any]:
    """The OTLP log records of ``items``."""
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

    out = []
    for item in items:
        attrs: dict[str, Any] = {"event.name": "gen_ai.evaluation.result", "gen_ai.evaluation.name": item.key}
        if item.score is not None:
            attrs["gen_ai.evaluation.score.value"] = item.score
        label = label_of(item)
        if label is not None:
            attrs["gen_ai.evaluation.score.label"] = label
        if item.comment:
            attrs["gen_ai.evaluation.explanation"] = item.comment
        if item.error:
            attrs["error.type"] = item.error.split(":", 1)[0][:100] or "error"
        attrs["assay.evaluation.id"] = str(item.id)
        attrs["assay.identity"] = item.identity
        attrs["assay.trace_id"] = item.trace_id
        nanos = int(item.timestamp.timestamp() * 1e9)
        record = LogRecord(
            time_unix_nano=nanos,
            observed_time_unix_nano=nanos,
            event_name="gen_ai.evaluation.result",
            attributes=[_attr(k, v) for k, v in attrs.items()],
        )
        if _HEX32.match(item.trace_id):
            record.trace_id = bytes.fromhex(item.trace_id)
            if item.root_id and _HEX16.match(item.root_id):
                record.span_id = bytes.fromhex(item.root_id)
        out.append(record)
    return out


class OtelTarget(PushTarget):
    params_model = OtelParams
    default_rpm: ClassVar[float | None] = None
    default_batch_size: ClassVar[int] = 512
    params: OtelParams

    def describe(self) -> str:
        return f"{self.name} ({self.params.endpoint})"

    def check_keys(self) -> None:
        for var in self.params.headers_env.values():
            self.key(var)

    def request(self, items: Sequence[PushItem]) -> Request:
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
        from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
        from opentelemetry.proto.logs.v1.logs_pb2 import ResourceLogs, ScopeLogs
        from opentelemetry.proto.resource.v1.resource_pb2 import Resource

        req = ExportLogsServiceRequest(
            resource_logs=[
                ResourceLogs(
                    resource=Resource(attributes=[_attr("service.name", self.params.service_name)]),
                    scope_logs=[ScopeLogs(scope=InstrumentationScope(name="assay"), log_records=log_records(items))],
                )
            ]
        )
        headers: dict[str, str] = {"content-type": "application/x-protobuf"}
        for header, var in self.params.headers_env.items():
            headers[header] = self.key(var) or ""
        return Request("POST", self.params.endpoint.rstrip("/") + "/v1/logs", headers, req.SerializeToString())

    def outcomes(self, items: Sequence[PushItem], status: int, body: bytes) -> list[ItemOutcome]:
        if 200 <= status < 300:
            rejected, message = _partial(body)
            if rejected == 0:
                return [ItemOutcome(i, "delivered") for i in items]
            if len(items) > 1:
                raise SplitBatch
            return [ItemOutcome(items[0], "rejected", message or "rejected by the collector")]
        if len(items) > 1 and status in (400, 413):
            raise SplitBatch
        return [ItemOutcome(i, "rejected", f"HTTP {status}: {json_message(body)}") for i in items]


def _partial(body: bytes) -> tuple[int, str]:
    if not body:
        return 0, ""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

    resp = ExportLogsServiceResponse()
    try:
        resp.ParseFromString(body)
    except DecodeError:
        return 0, ""
    return int(resp.partial_success.rejected_log_records), resp.partial_success.error_message
