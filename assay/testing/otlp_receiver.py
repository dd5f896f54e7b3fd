"""An OTLP/HTTP receiver for logs: ``POST /v1/logs`` with an ``ExportLogsServiceRequest``
protobuf (``Content-Type: application/x-protobuf``), decoded with ``opentelemetry-proto``.

It keeps every log record as a dict (``event_name``, ``trace_id`` and ``span_id`` in hex,
``attributes``, ``time_unix_nano``) in :attr:`OtlpReceiver.records`, counts records whose
``assay.evaluation.id`` it saw before (``stats.duplicates``), answers a wrong ``authorization``
(when ``token`` is set) with 401, a body that is not a request with 400, and records whose
``trace_id`` is in ``reject_traces`` with a ``partial_success`` (as collectors do)::

    with OtlpReceiverThread() as r:
        ...  # push to r.url
        r.server.records
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from assay.testing.platform_base import PlatformServer
from assay.testing.threaded import ServerThread

__all__ = ["OtlpReceiver", "OtlpReceiverThread", "decode_logs"]


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return None if kind is None else getattr(v, kind)


def decode_logs(body: bytes) -> list[dict[str, Any]]:
    """The log records of an ``ExportLogsServiceRequest``."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    req = ExportLogsServiceRequest()
    req.ParseFromString(body)
    out: list[dict[str, Any]] = []
    for rl in req.resource_logs:
        resource = {a.key: _value(a.value) for a in rl.resource.attributes}
        out.extend(
            {
                "event_name": rec.event_name,
                "trace_id": rec.trace_id.hex(),
                "span_id": rec.span_id.hex(),
                "time_unix_nano": rec.time_unix_nano,
                "attributes": {a.key: _value(a.value) for a in rec.attributes},
                "resource": resource,
                "scope": sl.scope.name,
            }
            for sl in rl.scope_logs
            for rec in sl.log_records
        )
    return out


class OtlpReceiver(PlatformServer):
    """The receiver."""

    def __init__(self, *, token: str | None = None, reject_traces: set[str] | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.token = token
        self.reject_traces = reject_traces or set()
        self.records: list[dict[str, Any]] = []
        self._seen: set[str] = set()

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/logs", self._logs)

    async def _logs(self, request: web.Request) -> web.Response:
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

        if self.token is not None and request.headers.get("authorization") != self.token:
            return self.refuse_auth()
        refused = self.gate()
        if refused is not None:
            return refused
        if request.content_type != "application/x-protobuf":
            self.stats.invalid += 1
            return web.Response(status=415, text="expected application/x-protobuf")
        try:
            records = decode_logs(await request.read())
        except DecodeError as exc:
            self.stats.invalid += 1
            return web.Response(status=400, text=f"not an ExportLogsServiceRequest: {exc}")
        resp = ExportLogsServiceResponse()
        rejected = 0
        for rec in records:
            self.stats.items += 1
            if rec["trace_id"] in self.reject_traces:
                rejected += 1
                self.stats.rejected += 1
                continue
            rid = rec["attributes"].get("assay.evaluation.id")
            if isinstance(rid, str):
                if rid in self._seen:
                    self.stats.duplicates += 1
                self._seen.add(rid)
            self.records.append(rec)
        if rejected:
            resp.partial_success.rejected_log_records = rejected
            resp.partial_success.error_message = f"{rejected} records refused: unknown trace"
        return web.Response(body=resp.SerializeToString(), content_type="application/x-protobuf")


class OtlpReceiverThread(ServerThread[OtlpReceiver]):
    """:class:`OtlpReceiver` on a background thread."""

    server_class = OtlpReceiver
    label = "otlp"
