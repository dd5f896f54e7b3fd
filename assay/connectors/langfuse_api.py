"""``source: {type: langfuse, host: …}``: a Langfuse project's traces over a day, with their
observations, from the public API (:mod:`assay.connectors.api_source`), through the observations
endpoint the ``langfuse`` 5.x SDK reads (``api.observations.get_many``; the v1 ``/traces`` read
endpoints are gone from that SDK, and Langfuse calls v2 its real-time read path):

* the listing: ``GET {host}/api/public/v2/observations?isRootObservation=true&fromStartTime=…
  &toStartTime=…&fields=core`` with its cursor (``meta.cursor``): the root observations that start
  in the window, one trace each (a trace is in the window when its root starts in it);
* each trace: ``GET {host}/api/public/v2/observations?traceId=…&fields=core,basic,time,io,…``
  (paged the same way): its observations, whose JSON array is the record, the form the
  ``langfuse`` normalizer reads from an ``observations_v2/`` export grouped by trace id (the v2 API
  and the export have the same data model; both give ``input`` / ``output`` as raw JSON text).

The keys come from ``LANGFUSE_PUBLIC_KEY`` / ``LANGFUSE_SECRET_KEY`` (basic auth, as the SDK).
**Langfuse's public API allows as little as 30 requests per minute** on its smallest plans (100 on
Core, 1,000 on Pro and up): the default ``rpm`` is 30, so a day of 10,000 traces takes some 5.6
hours; set ``rpm`` to your plan's limit. A 429 is waited out as its ``Retry-After`` says.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import orjson

from assay.connectors.api_client import ApiClient
from assay.connectors.api_source import ApiSourceConfig, ApiTraceSource, Page, TraceRecord, iso
from assay.connectors.registry import BaseConnector, SourceContext
from assay.exceptions import ConfigError, ConnectorError

__all__ = ["CONNECTOR", "FIELDS", "LangfuseApiSource", "LangfuseSourceConfig"]

OBSERVATIONS = "/api/public/v2/observations"
#: The field groups read for each observation of a trace (all but ``metadata`` truncation aside).
FIELDS = "core,basic,time,io,metadata,model,usage,prompt,metrics,trace_context"


class LangfuseSourceConfig(ApiSourceConfig):
    """``{type: langfuse, host: URL}``; keys from ``LANGFUSE_PUBLIC_KEY`` / ``LANGFUSE_SECRET_KEY``."""

    type: Literal["langfuse"] = "langfuse"
    host: str = "https://cloud.langfuse.com"
    environment: str | None = None
    """Only the traces of this environment (Langfuse's ``environment`` filter)."""


class LangfuseApiSource(ApiTraceSource):
    platform = "langfuse"
    default_page_size: ClassVar[int] = 1000  # the API's largest page
    fetch_chunk = 4  # a request per trace at as little as 30/min: hand traces on a few at a time

    def __init__(self, config: LangfuseSourceConfig, **kw: Any) -> None:
        super().__init__(config, **kw)
        self.cfg = config
        self._seen: set[str] = set()

    def default_rpm(self) -> float | None:
        return 30.0

    @property
    def rate_note(self) -> str:  # type: ignore[override]
        if self.cfg.rpm is None:
            return " (Langfuse's public API allows as little as 30 on small plans; set source.rpm to your plan's)"
        return ""

    def where(self) -> str:
        return f"langfuse:{self.cfg.host.rstrip('/')}"

    def client(self) -> ApiClient:
        public, secret = os.environ.get("LANGFUSE_PUBLIC_KEY"), os.environ.get("LANGFUSE_SECRET_KEY")
        if not public or not secret:
            raise ConfigError("source (type: langfuse): LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY must be set")
        auth = "Basic " + base64.b64encode(f"{public}:{secret}".encode()).decode()
        return ApiClient(
            self.cfg.host,
            label=self.where(),
            headers={"authorization": auth},
            rpm=self.cfg.rpm or self.default_rpm(),
            retries=self.cfg.retries,
            timeout_s=self.cfg.timeout_s,
            key_hint="LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY",
        )

    async def _observations(self, client: ApiClient, params: dict[str, Any]) -> tuple[list[dict[str, Any]], Any]:
        answer = await client.get(OBSERVATIONS, params)
        if not isinstance(answer, dict) or not isinstance(answer.get("data"), list):
            raise ConnectorError(f"source ({self.where()}): {OBSERVATIONS} answered no 'data' list")
        meta = answer.get("meta")
        cursor = meta.get("cursor") if isinstance(meta, dict) else None
        return [o for o in answer["data"] if isinstance(o, dict)], cursor or None

    async def list_page(self, client: ApiClient, cursor: Any) -> Page:
        params: dict[str, Any] = {
            "isRootObservation": "true",
            "fromStartTime": iso(self.start),
            "toStartTime": iso(self.end),
            "fields": "core",
            "limit": self.cfg.page_size or self.default_page_size,
        }
        if self.cfg.environment:
            params["environment"] = self.cfg.environment
        if cursor is not None:
            params["cursor"] = cursor
        roots, nxt = await self._observations(client, params)
        ids: list[str] = []
        for o in roots:  # a trace with two app roots is listed once
            tid = o.get("traceId")
            if isinstance(tid, str) and tid not in self._seen:
                self._seen.add(tid)
                ids.append(tid)
        return Page(ids, nxt if roots else None)

    async def fetch(self, client: ApiClient, page: Page, keep: Sequence[int]) -> list[TraceRecord]:
        out: list[TraceRecord] = []
        for i in keep:
            tid = page.trace_ids[i]
            params: dict[str, Any] = {"traceId": tid, "fields": FIELDS, "limit": 1000}
            rows: list[dict[str, Any]] = []
            while True:
                got, nxt = await self._observations(client, params)
                rows.extend(got)
                if nxt is None or not got:
                    break
                params = {**params, "cursor": nxt}
            if rows:
                out.append(TraceRecord(orjson.dumps(rows)))
            else:
                out.append(
                    TraceRecord(None, f"langfuse: trace {tid} has no observations (deleted since it was listed?)")
                )
        return out


class LangfuseConnector(BaseConnector):
    source_config = LangfuseSourceConfig

    def build_source(self, config: Any, ctx: SourceContext) -> LangfuseApiSource:
        return LangfuseApiSource(config, batch_size=ctx.batch_size, shard=ctx.shard, resume_state=ctx.resume_state)


CONNECTOR = LangfuseConnector()
