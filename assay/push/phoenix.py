"""Arize Phoenix: span annotations on the trace's root span, ``POST {endpoint}/v1/span_annotations?sync=true``.

Each annotation has the result key as ``name``, ``annotator_kind`` LLM for judges and CODE for
deterministic evaluators, ``result`` (``label``, ``score``, ``explanation``) and an ``identifier``,
Phoenix's upsert key with (span, name): the result's ``identity``, so a rerun updates the same
annotation and a changed evaluator writes a new one beside the old (history is kept). ``sync``
makes the server check the spans: an unknown span answers 404 naming it (a push dead letter).
``PHOENIX_API_KEY`` is sent as a bearer token when set (servers with authentication need it).
A row needs the root span id (``platform.root_id``: the OpenTelemetry normalizer records it) or
the field ``root_id_field`` names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import orjson

from assay.push.base import ItemOutcome, PushItem, PushParams, PushTarget, Request, SplitBatch, json_message

__all__ = ["PhoenixParams", "PhoenixTarget"]


class PhoenixParams(PushParams):
    """``{type: phoenix, endpoint: http://127.0.0.1:6006, project: …}``."""

    endpoint: str = "http://127.0.0.1:6006"
    """The Phoenix server's base URL (``PHOENIX_COLLECTOR_ENDPOINT`` in Phoenix's own clients)."""
    project: str | None = None
    """The Phoenix project of the traces (used by the Phoenix source; span ids are global)."""


def label_of(item: PushItem) -> str | None:
    v = item.value
    if isinstance(v, bool):
        return "pass" if v else "fail"
    if isinstance(v, str):
        return v[:200]
    if item.error:
        return "error"
    return None


class PhoenixTarget(PushTarget):
    params_model = PhoenixParams
    default_rpm: ClassVar[float | None] = None  # a self-hosted server publishes no limit
    default_batch_size: ClassVar[int] = 100
    params: PhoenixParams

    def describe(self) -> str:
        return f"{self.name} ({self.params.endpoint})"

    def missing(self, item: PushItem) -> str | None:
        return None if item.root_id else "no root span id"

    def request(self, items: Sequence[PushItem]) -> Request:
        data: list[dict[str, Any]] = []
        for item in items:
            result: dict[str, Any] = {"label": label_of(item), "score": item.score}
            explanation = item.comment or item.error
            if explanation:
                result["explanation"] = explanation
            data.append(
                {
                    "span_id": item.root_id,
                    "name": item.key,
                    "annotator_kind": item.annotator,
                    "result": result,
                    "identifier": f"assay:{item.identity}",
                    "metadata": {"assay_id": str(item.id), "assay_identity": item.identity},
                }
            )
        headers = {"content-type": "application/json"}
        key = self.key("PHOENIX_API_KEY", required=False)
        if key:
            headers["authorization"] = f"Bearer {key}"
        url = self.params.endpoint.rstrip("/") + "/v1/span_annotations?sync=true"
        return Request("POST", url, headers, orjson.dumps({"data": data}))

    def outcomes(self, items: Sequence[PushItem], status: int, body: bytes) -> list[ItemOutcome]:
        if 200 <= status < 300:
            return [ItemOutcome(i, "delivered") for i in items]
        if len(items) > 1 and status in (400, 404, 413, 422):
            raise SplitBatch  # one unknown span refuses the whole request: find it
        return [ItemOutcome(i, "rejected", f"HTTP {status}: {json_message(body)}") for i in items]
