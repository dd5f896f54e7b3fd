"""LangSmith: one feedback per result on the trace's root run, ``POST {api_url}/feedback``.

The body is the SDK's ``FeedbackCreate`` (``Client.create_feedback``): the deterministic ``id``
(``feedback_id``), ``run_id`` (the root run; a LangSmith trace id is its root run's id),
``trace_id``, ``key``, ``score``, ``value``, ``comment``, a ``model`` feedback source,
``session_id`` when the row knows the project, and ``extend_trace_retention: false`` (true upgrades
the trace's retention tier, a cost: ``extend_trace_retention: true`` asks for it). The SDK's batched
multipart path ignores that flag, so, like the SDK with false, one request per item, paced at the
published 5,000 feedback requests per minute. An unknown run answers 404 (a push dead letter); a
feedback id that exists already answers 409 (``already_there``).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import ClassVar

import orjson

from assay.push.base import ItemOutcome, PushItem, PushParams, PushTarget, Request, json_message, value_of

__all__ = ["LangSmithParams", "LangSmithTarget"]


class LangSmithParams(PushParams):
    """``{type: langsmith}``; the key comes from ``LANGSMITH_API_KEY``."""

    api_url: str = "https://api.smith.langchain.com"
    """The API base URL, as the SDK's ``LANGSMITH_ENDPOINT`` (self-hosted: ``https://host/api/v1``)."""
    session_id: str | None = None
    """The tracing project's id, when the rows do not carry it (``platform.session_id``)."""
    extend_trace_retention: bool = False
    """True upgrades each scored trace's retention tier (LangSmith bills for it)."""


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


class LangSmithTarget(PushTarget):
    params_model = LangSmithParams
    default_rpm: ClassVar[float | None] = 5000.0
    default_batch_size: ClassVar[int] = 1
    key_env = ("LANGSMITH_API_KEY",)
    params: LangSmithParams

    @property
    def batch_size(self) -> int:
        return 1  # the per-item endpoint is the one that honours extend_trace_retention

    def describe(self) -> str:
        return f"{self.name} ({self.params.api_url})"

    def missing(self, item: PushItem) -> str | None:
        if not item.trace_id:
            return "no trace id"
        return None if _is_uuid(item.trace_id) else "trace id is not a LangSmith run id (a UUID)"

    def request(self, items: Sequence[PushItem]) -> Request:
        (item,) = items
        now = dt.datetime.now(dt.UTC).isoformat()
        body: dict[str, object] = {
            "id": str(item.id),
            "run_id": item.root_id if item.root_id and _is_uuid(item.root_id) else item.trace_id,
            "trace_id": item.trace_id,
            "key": item.key,
            "score": item.score,
            "value": value_of(item),
            "comment": item.comment or item.error,
            "feedback_source": {"type": "model", "metadata": {"assay_identity": item.identity}},
            "created_at": now,
            "modified_at": now,
            "extend_trace_retention": self.params.extend_trace_retention,
        }
        if item.error:
            body["error"] = True
        session = item.platform.get("session_id") or self.params.session_id
        if session:
            body["session_id"] = str(session)
        headers = {"x-api-key": self.key("LANGSMITH_API_KEY") or "", "content-type": "application/json"}
        url = self.params.api_url.rstrip("/") + "/feedback"
        return Request("POST", url, headers, orjson.dumps({k: v for k, v in body.items() if v is not None}))

    def outcomes(self, items: Sequence[PushItem], status: int, body: bytes) -> list[ItemOutcome]:
        (item,) = items
        if 200 <= status < 300:
            return [ItemOutcome(item, "delivered")]
        if status == 409:
            return [ItemOutcome(item, "already_there")]
        return [ItemOutcome(item, "rejected", f"HTTP {status}: {json_message(body)}")]
