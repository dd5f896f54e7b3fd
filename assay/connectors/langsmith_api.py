"""``source: {type: langsmith, project: agents}``: a LangSmith project's traces over a day, read
with the runs query the SDK's ``Client.list_runs`` uses (:mod:`assay.connectors.api_source`).

* the project's id: ``GET {api_url}/sessions?name=…`` (or ``project_id`` given);
* the listing: ``POST {api_url}/runs/query`` with the project, ``is_root: true``, the window
  (``start_time`` and ``filter: lt(start_time, "…")``), its cursor (``cursors.next``);
* each trace: ``POST {api_url}/runs/query`` with ``trace: <id>`` (paged the same way), the record
  being the JSON array of its runs: what a ``list_runs`` dump grouped by trace id gives the
  ``langsmith`` normalizer.

The key comes from ``LANGSMITH_API_KEY`` (``x-api-key``). LangSmith publishes 2,000 requests per
minute for its endpoints other than feedback: the default ``rpm``. A trace costs one request
(more when it has over ``trace_page_size`` runs), a listing page one more.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field

from assay.connectors.api_client import ApiClient
from assay.connectors.api_source import ApiSourceConfig, ApiTraceSource, Page, TraceRecord, iso
from assay.connectors.registry import BaseConnector, SourceContext
from assay.exceptions import ConfigError, ConnectorError

__all__ = ["CONNECTOR", "LangSmithApiSource", "LangSmithSourceConfig"]

#: The run fields read (the SDK's ``list_runs`` default selection, less attachments).
SELECT = [
    "app_path", "completion_cost", "completion_tokens", "dotted_order", "end_time", "error", "events",
    "extra", "feedback_stats", "first_token_time", "id", "inputs", "name", "outputs", "parent_run_id",
    "prompt_cost", "prompt_tokens", "reference_example_id", "run_type", "session_id", "start_time",
    "status", "tags", "total_cost", "total_tokens", "trace_id",
]  # fmt: skip


class LangSmithSourceConfig(ApiSourceConfig):
    """``{type: langsmith, project: NAME}`` (or ``project_id``); the key from ``LANGSMITH_API_KEY``."""

    type: Literal["langsmith"] = "langsmith"
    project: str | None = None
    """The tracing project's name."""
    project_id: str | None = None
    """The tracing project's id (no lookup by name)."""
    api_url: str = "https://api.smith.langchain.com"
    """The API base URL, as the SDK's ``LANGSMITH_ENDPOINT``."""
    trace_page_size: int = Field(default=100, gt=0)
    """Runs per request when reading one trace."""


class LangSmithApiSource(ApiTraceSource):
    platform = "langsmith"
    default_page_size: ClassVar[int] = 100
    fetch_chunk = 16  # a request per trace

    def __init__(self, config: LangSmithSourceConfig, **kw: Any) -> None:
        if not config.project and not config.project_id:
            raise ConfigError("source (type: langsmith): name the project (project: NAME or project_id: ID)")
        super().__init__(config, **kw)
        self.cfg = config
        self._session = config.project_id

    def default_rpm(self) -> float | None:
        return 2000.0

    def where(self) -> str:
        return f"langsmith:{self.cfg.project or self.cfg.project_id}"

    def client(self) -> ApiClient:
        key = os.environ.get("LANGSMITH_API_KEY")
        if not key:
            raise ConfigError("source (type: langsmith): LANGSMITH_API_KEY is not set")
        return ApiClient(
            self.cfg.api_url,
            label=self.where(),
            headers={"x-api-key": key},
            rpm=self.cfg.rpm or self.default_rpm(),
            retries=self.cfg.retries,
            timeout_s=self.cfg.timeout_s,
            key_hint="LANGSMITH_API_KEY",
        )

    async def prepare(self, client: ApiClient) -> None:
        if self._session:
            return
        found = await client.get("/sessions", {"name": self.cfg.project or "", "limit": 1})
        if isinstance(found, dict):
            found = [found]
        if not isinstance(found, list) or not found or not isinstance(found[0], dict) or "id" not in found[0]:
            msg = f"source (type: langsmith): no project named {self.cfg.project!r} at {self.cfg.api_url}"
            raise ConnectorError(msg)
        self._session = str(found[0]["id"])

    async def _query(self, client: ApiClient, body: dict[str, Any]) -> tuple[list[dict[str, Any]], Any]:
        answer = await client.post("/runs/query", body)
        if not isinstance(answer, dict):
            msg = f"source ({self.where()}): /runs/query answered {type(answer).__name__}, not an object"
            raise ConnectorError(msg)
        runs = answer.get("runs") or []
        cursors = answer.get("cursors") or {}
        return [r for r in runs if isinstance(r, dict)], cursors.get("next") if isinstance(cursors, dict) else None

    async def list_page(self, client: ApiClient, cursor: Any) -> Page:
        body: dict[str, Any] = {
            "session": [self._session],
            "is_root": True,
            "start_time": iso(self.start),
            "filter": f'lt(start_time, "{iso(self.end)}")',
            "select": ["id", "trace_id", "start_time"],
            "limit": self.cfg.page_size or self.default_page_size,
        }
        if cursor is not None:
            body["cursor"] = cursor
        runs, nxt = await self._query(client, body)
        ids = [str(r.get("trace_id") or r.get("id")) for r in runs]
        return Page(ids, nxt if runs else None)

    async def fetch(self, client: ApiClient, page: Page, keep: Sequence[int]) -> list[TraceRecord]:
        import orjson

        out: list[TraceRecord] = []
        for i in keep:
            tid = page.trace_ids[i]
            body: dict[str, Any] = {
                "session": [self._session],
                "trace": tid,
                "select": SELECT,
                "limit": self.cfg.trace_page_size,
            }
            runs: list[dict[str, Any]] = []
            while True:
                got, nxt = await self._query(client, body)
                runs.extend(got)
                if not nxt or not got:
                    break
                body = {**body, "cursor": nxt}
            if runs:
                out.append(TraceRecord(orjson.dumps(runs)))
            else:
                out.append(TraceRecord(None, f"langsmith: trace {tid} has no runs (deleted since it was listed?)"))
        return out


class LangSmithConnector(BaseConnector):
    source_config = LangSmithSourceConfig

    def build_source(self, config: Any, ctx: SourceContext) -> LangSmithApiSource:
        return LangSmithApiSource(config, batch_size=ctx.batch_size, shard=ctx.shard, resume_state=ctx.resume_state)


CONNECTOR = LangSmithConnector()
