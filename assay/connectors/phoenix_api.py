"""``source: {type: phoenix, endpoint: …, project: agents}``: an Arize Phoenix project's traces over a
day, read through its REST API (:mod:`assay.connectors.api_source`).

* the listing: ``GET {endpoint}/v1/projects/{project}/traces?start_time=…&end_time=…&sort=start_time
  &order=asc`` with its ``next_cursor`` (a trace is in the window when it *starts* in it);
* the spans of a page's traces: ``GET {endpoint}/v1/projects/{project}/spans?trace_id=…&trace_id=…``
  (paged by ``next_cursor``), grouped by trace id: one record per trace, the list of its spans
  (``context.trace_id`` / ``span_id``, ``parent_id``, flat ``attributes``, ``events``), which the
  ``otel`` normalizer reads as it reads a span-per-line export.

``PHOENIX_API_KEY`` is sent as a bearer token when it is set (a server with auth enabled). A
self-hosted Phoenix publishes no rate limit: no pacing unless ``rpm`` is set. Then ``source: {type:
phoenix}`` with ``push: [{type: phoenix}]`` reads a night's traces and writes the scores back.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar, Literal
from urllib.parse import quote

import orjson
from pydantic import Field

from assay.connectors.api_client import ApiClient
from assay.connectors.api_source import ApiSourceConfig, ApiTraceSource, Page, TraceRecord, iso
from assay.connectors.registry import BaseConnector, SourceContext
from assay.exceptions import ConnectorError

__all__ = ["CONNECTOR", "PhoenixApiSource", "PhoenixSourceConfig"]


class PhoenixSourceConfig(ApiSourceConfig):
    """``{type: phoenix, endpoint: URL, project: NAME}``."""

    type: Literal["phoenix"] = "phoenix"
    endpoint: str = "http://127.0.0.1:6006"
    project: str = "default"
    """The project's name (or id)."""
    span_page_size: int = Field(default=1000, gt=0, le=1000)
    """Spans per request (Phoenix's largest page is 1,000)."""


class PhoenixApiSource(ApiTraceSource):
    platform = "phoenix"
    default_page_size: ClassVar[int] = 100
    fetch_chunk = 50  # trace ids per spans request

    def __init__(self, config: PhoenixSourceConfig, **kw: Any) -> None:
        super().__init__(config, **kw)
        self.cfg = config

    def where(self) -> str:
        return f"phoenix:{self.cfg.endpoint.rstrip('/')}/{self.cfg.project}"

    def client(self) -> ApiClient:
        key = os.environ.get("PHOENIX_API_KEY")
        return ApiClient(
            self.cfg.endpoint,
            label=self.where(),
            headers={"authorization": f"Bearer {key}"} if key else {},
            rpm=self.cfg.rpm,
            retries=self.cfg.retries,
            timeout_s=self.cfg.timeout_s,
            key_hint="PHOENIX_API_KEY",
        )

    def _path(self, what: str) -> str:
        return f"/v1/projects/{quote(self.cfg.project, safe='')}/{what}"

    async def _get(self, client: ApiClient, what: str, params: list[tuple[str, str]]) -> dict[str, Any]:
        try:
            answer = await client.get(self._path(what), params)
        except ConnectorError as exc:
            if " answered 404" in str(exc):
                raise ConnectorError(
                    f"source (type: phoenix): no project {self.cfg.project!r} at {self.cfg.endpoint}"
                ) from exc
            raise
        if not isinstance(answer, dict) or not isinstance(answer.get("data"), list):
            raise ConnectorError(f"source ({self.where()}): {what} answered no 'data' list")
        return answer

    async def list_page(self, client: ApiClient, cursor: Any) -> Page:
        params = [
            ("start_time", iso(self.start)),
            ("end_time", iso(self.end)),
            ("sort", "start_time"),
            ("order", "asc"),
            ("limit", str(self.cfg.page_size or self.default_page_size)),
        ]
        if cursor is not None:
            params.append(("cursor", str(cursor)))
        answer = await self._get(client, "traces", params)
        ids = [str(t["trace_id"]) for t in answer["data"] if isinstance(t, dict) and t.get("trace_id")]
        return Page(ids, answer.get("next_cursor") or None)

    async def fetch(self, client: ApiClient, page: Page, keep: Sequence[int]) -> list[TraceRecord]:
        wanted = [page.trace_ids[i] for i in keep]
        spans: dict[str, list[Any]] = {t: [] for t in wanted}
        base = [("trace_id", t) for t in wanted] + [("limit", str(self.cfg.span_page_size))]
        cursor: str | None = None
        while True:
            answer = await self._get(client, "spans", base + ([("cursor", cursor)] if cursor else []))
            for span in answer["data"]:
                ctx = span.get("context") if isinstance(span, dict) else None
                tid = ctx.get("trace_id") if isinstance(ctx, dict) else None
                if tid in spans:
                    spans[tid].append(span)
            cursor = answer.get("next_cursor") or None
            if cursor is None or not answer["data"]:
                break
        out: list[TraceRecord] = []
        for t in wanted:
            got = spans[t]
            if got:
                got.reverse()  # the spans endpoint lists the newest first; the normalizer orders by start time
                out.append(TraceRecord(orjson.dumps(got)))
            else:
                out.append(TraceRecord(None, f"phoenix: trace {t} has no spans (deleted since it was listed?)"))
        return out


class PhoenixConnector(BaseConnector):
    source_config = PhoenixSourceConfig

    def build_source(self, config: Any, ctx: SourceContext) -> PhoenixApiSource:
        return PhoenixApiSource(config, batch_size=ctx.batch_size, shard=ctx.shard, resume_state=ctx.resume_state)


CONNECTOR = PhoenixConnector()
