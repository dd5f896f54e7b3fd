"""A strict stand-in for LangSmith's feedback API (written from the API reference and the
``langsmith`` SDK's ``FeedbackCreate``), readable with the official client::

    with LangSmithServerThread(api_key="k", runs={run_id}) as s:
        Client(api_url=s.url, api_key="k").list_feedback(run_ids=[run_id])

* ``x-api-key`` must match (else 401);
* ``POST /feedback`` (also under ``/api/v1``) takes one ``FeedbackCreate``: unknown fields, a
  missing ``key``, ids that are not UUIDs, a score that is not a number → 422; a run it does not
  know → 404 (when ``runs`` is given); an ``id`` it holds already → 409 (counted in
  ``stats.duplicates``: the platform keeps one);
* ``GET /feedback`` (``run``, ``key``, ``limit``, ``offset``) and ``GET /feedback/{id}`` answer in
  the SDK's ``Feedback`` shape; ``GET /info`` says what the SDK asks;
* 429 with ``Retry-After`` (scripted or above ``rpm``), 503 (scripted): see
  :class:`~assay.testing.platform_base.PlatformServer`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import orjson
from aiohttp import web

from assay.testing.platform_base import PlatformServer
from assay.testing.threaded import ServerThread

__all__ = ["FEEDBACK_FIELDS", "LangSmithServer", "LangSmithServerThread"]

FEEDBACK_FIELDS = frozenset(
    {
        "id", "run_id", "trace_id", "key", "score", "value", "correction", "comment", "feedback_source",
        "created_at", "modified_at", "feedback_config", "session_id", "start_time",
        "comparative_experiment_id", "feedback_group_id", "extra", "error", "extend_trace_retention",
        "address",
    }
)  # fmt: skip


def _uuid(value: Any) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


class LangSmithServer(PlatformServer):
    """The stand-in; ``feedback`` holds what was created (id → body as stored)."""

    def __init__(self, *, api_key: str = "test-key", runs: Iterable[str] | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.api_key = api_key
        self.runs = None if runs is None else {str(uuid.UUID(str(r))) for r in runs}
        self.feedback: dict[str, dict[str, Any]] = {}
        self.retention_extended: set[str] = set()

    def add_routes(self, app: web.Application) -> None:
        for prefix in ("", "/api/v1"):
            app.router.add_get(prefix + "/info", self._info)
            app.router.add_post(prefix + "/feedback", self._create)
            app.router.add_get(prefix + "/feedback", self._list)
            app.router.add_get(prefix + "/feedback/{id}", self._read)

    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("x-api-key") == self.api_key

    async def _info(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "0.11.0", "instance_flags": {}, "batch_ingest_config": {}})

    async def _create(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self.refuse_auth()
        refused = self.gate()
        if refused is not None:
            return refused
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            self.stats.invalid += 1
            return web.json_response({"detail": "body is not JSON"}, status=422)
        problem = self._invalid(body)
        if problem:
            self.stats.invalid += 1
            return web.json_response({"detail": problem}, status=422)
        self.stats.items += 1
        fid = str(uuid.UUID(str(body.get("id") or uuid.uuid4())))
        run = str(uuid.UUID(str(body.get("run_id") or body["trace_id"])))
        if self.runs is not None and run not in self.runs:
            self.stats.rejected += 1
            return web.json_response({"detail": f"Run {run} not found"}, status=404)
        if fid in self.feedback:
            self.stats.duplicates += 1
            return web.json_response({"detail": f"Feedback {fid} already exists"}, status=409)
        if body.get("extend_trace_retention", True):
            self.retention_extended.add(run)
        stored = {
            "id": fid,
            "run_id": run,
            "trace_id": body.get("trace_id"),
            "key": body["key"],
            "score": body.get("score"),
            "value": body.get("value"),
            "comment": body.get("comment"),
            "correction": body.get("correction"),
            "feedback_source": body.get("feedback_source"),
            "session_id": body.get("session_id"),
            "created_at": body.get("created_at") or "2026-01-01T00:00:00+00:00",
            "modified_at": body.get("modified_at") or "2026-01-01T00:00:00+00:00",
        }
        self.feedback[fid] = stored
        return web.json_response(stored)

    @staticmethod
    def _invalid(body: Any) -> str | None:
        if not isinstance(body, dict):
            return "body must be an object"
        unknown = sorted(set(body) - FEEDBACK_FIELDS)
        if unknown:
            return f"unknown fields: {', '.join(unknown)}"
        if not isinstance(body.get("key"), str) or not body["key"]:
            return "key: required"
        if body.get("run_id") is None and body.get("trace_id") is None:
            return "run_id or trace_id: required"
        for f in ("id", "run_id", "trace_id", "session_id"):
            if body.get(f) is not None and not _uuid(body[f]):
                return f"{f}: not a UUID"
        score = body.get("score")
        if score is not None and not isinstance(score, int | float):
            return "score: must be a number or a boolean"
        if not isinstance(body.get("extend_trace_retention", True), bool):
            return "extend_trace_retention: must be a boolean"
        source = body.get("feedback_source")
        if source is not None and (not isinstance(source, dict) or source.get("type") not in ("api", "model", "app")):
            return "feedback_source.type: must be api, model or app"
        return None

    async def _list(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self.refuse_auth()
        runs = {str(uuid.UUID(r)) for r in request.query.getall("run", []) if _uuid(r)}
        keys = set(request.query.getall("key", []))
        limit = int(request.query.get("limit", 100))
        offset = int(request.query.get("offset", 0))
        rows = [
            f for f in self.feedback.values() if (not runs or f["run_id"] in runs) and (not keys or f["key"] in keys)
        ]
        return web.json_response(rows[offset : offset + limit])

    async def _read(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self.refuse_auth()
        found = self.feedback.get(request.match_info["id"])
        if found is None:
            return web.json_response({"detail": "not found"}, status=404)
        return web.json_response(found)


class LangSmithServerThread(ServerThread[LangSmithServer]):
    """:class:`LangSmithServer` on a background thread (for sync tests and the CLI)."""

    server_class = LangSmithServer
    label = "langsmith"
