"""Langfuse: scores on the trace (or its observation), in batches, ``POST {host}/api/public/scores``
(a JSON list, as the Langfuse Python SDK 5.x sends them; basic auth with
``LANGFUSE_PUBLIC_KEY`` / ``LANGFUSE_SECRET_KEY``).

Each score has the deterministic ``id``, the result key as ``name``, a ``dataType`` from the value
(``BOOLEAN`` for a true/false value, ``NUMERIC`` for a score, ``CATEGORICAL`` for a label), the
comment, and a ``timestamp`` that is the same on every rerun (the run's ``ds``): Langfuse treats a
score as the same one only when its id, name and the timestamp's day match. The answer is 202
(all accepted) or 207 with ``accepted``, ``rejected`` and ``errors`` (each error names the score
by ``id`` or ``index`` when the server says; a batch whose errors name nothing is sent again item
by item to learn which one was refused). A result with no score (an evaluator error) is not sent.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, ClassVar

import orjson

from assay.push.base import (
    ItemOutcome,
    PushItem,
    PushParams,
    PushTarget,
    Request,
    SplitBatch,
    as_dict,
    json_message,
)

__all__ = ["LangfuseParams", "LangfuseTarget", "score_value"]


class LangfuseParams(PushParams):
    """``{type: langfuse, host: …}``."""

    host: str = "https://cloud.langfuse.com"
    environment: str | None = None
    """The Langfuse environment of the scores (default: the server's)."""


def score_value(item: PushItem) -> tuple[str, Any] | None:
    """``(dataType, value)`` of a result, or None when it has nothing to send."""
    if isinstance(item.value, bool):
        return "BOOLEAN", 1.0 if item.value else 0.0
    if item.score is not None:
        return "NUMERIC", item.score
    if isinstance(item.value, str) and item.value:
        return "CATEGORICAL", item.value
    return None


class LangfuseTarget(PushTarget):
    params_model = LangfuseParams
    default_rpm: ClassVar[float | None] = 100.0  # the public API's Core-plan limit (Hobby: 30, Pro: 1,000)
    default_batch_size: ClassVar[int] = 100  # well under the endpoint's 1 MiB body limit
    key_env = ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY")
    params: LangfuseParams

    def describe(self) -> str:
        return f"{self.name} ({self.params.host})"

    def missing(self, item: PushItem) -> str | None:
        if not item.trace_id:
            return "no trace id"
        return None if score_value(item) is not None else "no score (evaluator error)"

    def request(self, items: Sequence[PushItem]) -> Request:
        scores = []
        for item in items:
            kind, value = score_value(item) or ("NUMERIC", 0.0)
            score: dict[str, Any] = {
                "id": str(item.id),
                "traceId": item.trace_id,
                "name": item.key,
                "value": value,
                "dataType": kind,
                "timestamp": item.timestamp.isoformat().replace("+00:00", "Z"),
                "source": "API",
                "metadata": {"assay_identity": item.identity},
            }
            if item.comment:
                score["comment"] = item.comment
            observation = item.platform.get("observation_id")
            if observation:
                score["observationId"] = str(observation)
            if self.params.environment:
                score["environment"] = self.params.environment
            scores.append(score)
        user = self.key("LANGFUSE_PUBLIC_KEY") or ""
        secret = self.key("LANGFUSE_SECRET_KEY") or ""
        auth = base64.b64encode(f"{user}:{secret}".encode()).decode()
        headers = {"authorization": f"Basic {auth}", "content-type": "application/json"}
        return Request("POST", self.params.host.rstrip("/") + "/api/public/scores", headers, orjson.dumps(scores))

    def outcomes(self, items: Sequence[PushItem], status: int, body: bytes) -> list[ItemOutcome]:
        if status in (200, 201, 202):
            return [ItemOutcome(i, "delivered") for i in items]
        if status != 207:
            if len(items) > 1 and status in (400, 404, 413, 422):
                raise SplitBatch
            return [ItemOutcome(i, "rejected", f"HTTP {status}: {json_message(body)}") for i in items]
        try:
            doc = as_dict(orjson.loads(body))
        except orjson.JSONDecodeError:
            doc = {}
        errors = [as_dict(e) for e in doc.get("errors") or []]
        by_id = {str(i.id): i for i in items}
        failed: dict[str, str] = {}
        for err in errors:
            msg = str(err.get("message") or err.get("error") or "rejected")
            index = err.get("index")
            if isinstance(err.get("id"), str) and err["id"] in by_id:
                failed[err["id"]] = msg
            elif isinstance(index, int) and 0 <= index < len(items):
                failed[str(items[index].id)] = msg
            elif len(items) == 1:
                failed[str(items[0].id)] = msg
            else:
                raise SplitBatch
        return [
            ItemOutcome(i, "rejected", failed[str(i.id)]) if str(i.id) in failed else ItemOutcome(i, "delivered")
            for i in items
        ]
