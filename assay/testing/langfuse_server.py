"""A strict stand-in for Langfuse's score API (written from the public API reference and the
``langfuse`` 5.x SDK's models), readable with the official client::

    with LangfuseServerThread(public_key="pk", secret_key="sk", traces={"t1"}) as s:
        LangfuseAPI(base_url=s.url, username="pk", password="sk").scores.get_many(trace_id="t1")

* basic auth ``public_key:secret_key`` (else 401);
* ``POST /api/public/scores`` takes a JSON list of ``CreateScoreRequest`` (one object too): more
  than ``max_batch`` scores or a body over 1 MiB → 413; each score is checked (``name``,
  ``value`` by ``dataType``: NUMERIC a number, BOOLEAN 0 or 1, CATEGORICAL a string; a
  ``traceId`` it knows when ``traces`` is given); all accepted → 202 ``{"message": "Accepted"}``,
  else 207 ``{accepted, rejected, errors: [{index, id, message}]}``;
* **the upsert rule**: a score is the same one only when ``id``, ``name`` and the day of its
  ``timestamp`` match; then it is updated in place (counted in ``stats.duplicates``), otherwise a
  new score is stored — a client whose timestamps drift between retries leaves duplicates;
* ``GET /api/public/v3/scores`` (``traceId``, ``name``, ``id``, ``limit``, ``cursor``, ``fields``)
  answers in the v3 shape (``value`` typed by ``dataType``);
* 429 with ``Retry-After`` and 503, scripted or above ``rpm``;
* the read side, for the ``langfuse`` source and the SDK's ``api.observations.get_many``:
  observations loaded with :meth:`LangfuseServer.load_observations` (the v2 API's camelCase
  shape, ``input`` / ``output`` as raw JSON text); ``GET /api/public/v2/observations`` with the
  documented filters (``traceId``, ``isRootObservation``, ``fromStartTime`` / ``toStartTime``,
  ``type``, ``name``, ``environment``, ``parentObservationId``), ``fields`` groups (default
  ``core,basic``), ``limit`` (at most 1,000) and ``cursor`` (``meta.cursor``), newest first;
  unknown parameters, field groups or ``parseIoAsJson=true`` → 400. Reads have their own
  scripted 429s and rate (``read_rate_limit_first``, ``read_rpm``).
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Iterable
from typing import Any

import orjson
from aiohttp import web

from assay.testing.platform_base import PlatformServer
from assay.testing.threaded import ServerThread

__all__ = ["SCORE_FIELDS", "LangfuseServer", "LangfuseServerThread"]

SCORE_FIELDS = frozenset(
    {
        "id", "traceId", "sessionId", "observationId", "datasetRunId", "name", "value", "comment", "metadata",
        "environment", "queueId", "dataType", "configId", "source", "timestamp",
    }
)  # fmt: skip
BODY_LIMIT = 1_000_000

#: The v2 observations API's field groups (``core`` always returned).
FIELD_GROUPS: dict[str, tuple[str, ...]] = {
    "core": ("id", "traceId", "startTime", "endTime", "projectId", "parentObservationId", "type"),
    "basic": (
        "name", "level", "statusMessage", "version", "environment", "bookmarked", "public", "userId",
        "sessionId", "isRootObservation",
    ),
    "time": ("completionStartTime", "createdAt", "updatedAt"),
    "io": ("input", "output"),
    "metadata": ("metadata",),
    "model": ("model", "internalModelId", "modelParameters"),
    "usage": ("usageDetails", "costDetails", "totalCost", "usagePricingTierName"),
    "prompt": ("promptId", "promptName", "promptVersion"),
    "metrics": ("latency", "timeToFirstToken"),
    "trace_context": ("tags", "release", "traceName"),
}  # fmt: skip
OBSERVATION_PARAMS = frozenset(
    {
        "fields", "expandMetadata", "limit", "cursor", "parseIoAsJson", "name", "userId", "sessionId", "type",
        "traceId", "level", "parentObservationId", "isRootObservation", "environment", "fromStartTime",
        "toStartTime", "version", "filter",
    }
)  # fmt: skip


class LangfuseServer(PlatformServer):
    """The stand-in; ``scores`` maps (id, name, day) → the stored score."""

    def __init__(
        self,
        *,
        public_key: str = "pk-test",
        secret_key: str = "sk-test",
        traces: Iterable[str] | None = None,
        max_batch: int = 1000,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.auth = "Basic " + base64.b64encode(f"{public_key}:{secret_key}".encode()).decode()
        self.traces = None if traces is None else set(traces)
        self.max_batch = max_batch
        self.scores: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.observations: dict[str, dict[str, Any]] = {}  # id -> observation (v2 API shape)
        self.reads_log: list[dict[str, str]] = []  # the query of each observations read, in order

    def load_observations(self, rows: Iterable[dict[str, Any]]) -> None:
        """Hold observations (the v2 API's shape); their traces become known to the score API."""
        for o in rows:
            row = {"projectId": "stand-in", "environment": "default", **o}
            row.setdefault("isRootObservation", not row.get("parentObservationId"))
            self.observations[str(o["id"])] = row
            if self.traces is not None:
                self.traces.add(str(o["traceId"]))

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/api/public/scores", self._create)
        app.router.add_get("/api/public/v3/scores", self._list)
        app.router.add_get("/api/public/v2/observations", self._observations)

    async def _create(self, request: web.Request) -> web.Response:
        if request.headers.get("authorization") != self.auth:
            return self.refuse_auth()
        refused = self.gate()
        if refused is not None:
            return refused
        raw = await request.read()
        if len(raw) > BODY_LIMIT:
            self.stats.invalid += 1
            return web.json_response({"message": "Body exceeded 1mb limit"}, status=413)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            self.stats.invalid += 1
            return web.json_response({"message": "Invalid JSON"}, status=400)
        scores = body if isinstance(body, list) else [body]
        if len(scores) > self.max_batch:
            self.stats.invalid += 1
            return web.json_response({"message": f"at most {self.max_batch} scores per request"}, status=413)
        errors = []
        for i, score in enumerate(scores):
            self.stats.items += 1
            problem = self._invalid(score)
            if problem is not None:
                self.stats.rejected += 1
                sid = score.get("id") if isinstance(score, dict) else None
                errors.append({"index": i, "id": sid, "message": problem})
                continue
            self._store(score)
        if not errors:
            return web.json_response({"message": "Accepted"}, status=202)
        return web.json_response(
            {"accepted": len(scores) - len(errors), "rejected": len(errors), "errors": errors}, status=207
        )

    def _invalid(self, s: Any) -> str | None:
        if not isinstance(s, dict):
            return "score must be an object"
        unknown = sorted(set(s) - SCORE_FIELDS)
        if unknown:
            return f"unknown fields: {', '.join(unknown)}"
        if not isinstance(s.get("name"), str) or not s["name"]:
            return "name: required"
        kind = s.get("dataType", "NUMERIC")
        value = s.get("value")
        if kind == "NUMERIC" and not (isinstance(value, int | float) and not isinstance(value, bool)):
            return "value: a NUMERIC score needs a number"
        if kind == "BOOLEAN" and value not in (0, 1):
            return "value: a BOOLEAN score needs 0 or 1"
        if kind == "CATEGORICAL" and not isinstance(value, str):
            return "value: a CATEGORICAL score needs a string"
        if kind not in ("NUMERIC", "BOOLEAN", "CATEGORICAL", "TEXT"):
            return f"dataType: unknown {kind!r}"
        if s.get("source", "API") != "API":
            return "source: only API can be set through the public API"
        tid = s.get("traceId")
        if tid is None and s.get("sessionId") is None and s.get("datasetRunId") is None:
            return "one of traceId, sessionId, datasetRunId is required"
        if self.traces is not None and tid is not None and tid not in self.traces:
            return f"trace {tid} not found"
        if s.get("timestamp") is not None:
            try:
                dt.datetime.fromisoformat(str(s["timestamp"]).replace("Z", "+00:00"))
            except ValueError:
                return "timestamp: not ISO 8601"
        return None

    def _store(self, s: dict[str, Any]) -> None:
        now = dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")
        ts = s.get("timestamp") or now
        day = str(ts)[:10]
        sid = s.get("id") or f"generated-{len(self.scores)}"
        key = (sid, s["name"], day)
        if key in self.scores:
            self.stats.duplicates += 1
        kind = s.get("dataType", "NUMERIC")
        value: Any = s["value"]
        if kind == "BOOLEAN":
            value = bool(value)
        self.scores[key] = {
            "id": sid,
            "projectId": "stand-in",
            "name": s["name"],
            "value": value,
            "dataType": kind,
            "source": "API",
            "timestamp": ts,
            "environment": s.get("environment") or "default",
            "createdAt": now,
            "updatedAt": now,
            "comment": s.get("comment"),
            "metadata": s.get("metadata"),
            "subject": {"kind": "observation", "id": s["observationId"], "traceId": s.get("traceId")}
            if s.get("observationId")
            else {"kind": "trace", "id": s.get("traceId")},
        }

    def rows_for(self, trace_id: str) -> list[dict[str, Any]]:
        return [
            v
            for v in self.scores.values()
            if v["subject"].get("id") == trace_id or v["subject"].get("traceId") == trace_id
        ]

    async def _list(self, request: web.Request) -> web.Response:
        if request.headers.get("authorization") != self.auth:
            return self.refuse_auth()
        q = request.query
        limit = int(q.get("limit", 50))
        if limit > 100:
            return web.json_response({"message": "limit must be at most 100"}, status=400)
        start = int(base64.urlsafe_b64decode(q["cursor"]).decode()) if q.get("cursor") else 0
        traces = set(q["traceId"].split(",")) if q.get("traceId") else None
        names = set(q["name"].split(",")) if q.get("name") else None
        ids = set(q["id"].split(",")) if q.get("id") else None
        rows = [
            r
            for r in self.scores.values()
            if (traces is None or r["subject"].get("id") in traces or r["subject"].get("traceId") in traces)
            and (names is None or r["name"] in names)
            and (ids is None or r["id"] in ids)
        ]
        page = rows[start : start + limit]
        meta: dict[str, Any] = {"limit": limit}
        if start + limit < len(rows):
            meta["cursor"] = base64.urlsafe_b64encode(str(start + limit).encode()).decode()
        return web.json_response({"data": page, "meta": meta})

    async def _observations(self, request: web.Request) -> web.Response:
        if request.headers.get("authorization") != self.auth:
            return self.refuse_auth()
        refused = self.read_gate()
        if refused is not None:
            return refused
        q = request.query
        self.reads_log.append(dict(q))

        def bad(message: str) -> web.Response:
            self.stats.invalid += 1
            return web.json_response({"message": message}, status=400)

        unknown = sorted(set(q) - OBSERVATION_PARAMS)
        if unknown:
            return bad(f"unknown query parameters: {', '.join(unknown)}")
        if q.get("parseIoAsJson") == "true":
            return bad("parseIoAsJson is deprecated: input/output are returned as raw strings")
        if q.get("filter"):
            return bad("the stand-in does not read the structured filter")
        groups = [g.strip() for g in q.get("fields", "core,basic").split(",") if g.strip()]
        if any(g not in FIELD_GROUPS for g in groups):
            return bad(f"fields: unknown group among {groups}")
        try:
            limit = int(q.get("limit", 50))
            start = int(base64.urlsafe_b64decode(q["cursor"]).decode()) if q.get("cursor") else 0
            since = _time(q["fromStartTime"]) if q.get("fromStartTime") else None
            until = _time(q["toStartTime"]) if q.get("toStartTime") else None
        except ValueError as exc:
            return bad(f"invalid parameter: {exc}")
        if not 1 <= limit <= 1000:
            return bad("limit must be between 1 and 1000")
        equal = {k: q[k] for k in ("traceId", "type", "name", "environment", "userId", "sessionId") if k in q}
        root = q.get("isRootObservation")
        parent = q.get("parentObservationId")

        def keep(o: dict[str, Any]) -> bool:
            if any(str(o.get(k)) != v for k, v in equal.items()):
                return False
            if root is not None and bool(o.get("isRootObservation")) != (root == "true"):
                return False
            if parent is not None and (o.get("parentObservationId") or "") != parent:
                return False
            t = _time(o["startTime"])
            return (since is None or t >= since) and (until is None or t < until)

        rows = sorted(
            (o for o in self.observations.values() if keep(o)), key=lambda o: (_time(o["startTime"]), o["id"])
        )
        rows.reverse()
        names = {f for g in ["core", *groups] for f in FIELD_GROUPS[g]}
        page = [{k: v for k, v in o.items() if k in names} for o in rows[start : start + limit]]
        meta: dict[str, Any] = {}
        if start + limit < len(rows):
            meta["cursor"] = base64.urlsafe_b64encode(str(start + limit).encode()).decode()
        return web.json_response({"data": page, "meta": meta})


def _time(value: Any) -> dt.datetime:
    t = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t


class LangfuseServerThread(ServerThread[LangfuseServer]):
    """:class:`LangfuseServer` on a background thread (for sync tests and the CLI)."""

    server_class = LangfuseServer
    label = "langfuse"
