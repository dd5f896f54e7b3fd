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
* the read side, for the ``langsmith`` source and ``Client.list_runs``: runs loaded with
  :meth:`LangSmithServer.load_runs` into a project; ``GET /sessions?name=…`` and
  ``GET /sessions/{id}`` (the SDK's ``read_project``); ``POST /runs/query`` with ``session``
  (required), ``is_root``, ``trace``, ``id``, ``start_time``, a ``filter`` of comparisons
  (``lt``/``lte``/``gt``/``gte``/``eq`` on ``start_time``, ``and(…)`` of them), ``select``,
  ``limit`` (at most 100) and ``cursor``: newest first, ``{"runs", "cursors": {"next"}}``; unknown
  body fields, select fields or filters → 422;
* 429 with ``Retry-After`` (scripted or above ``rpm``), 503 (scripted): see
  :class:`~assay.testing.platform_base.PlatformServer`.
"""

from __future__ import annotations

import base64
import datetime as dt
import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from aiohttp import web

from assay.testing.platform_base import PlatformServer
from assay.testing.threaded import ServerThread

__all__ = ["FEEDBACK_FIELDS", "QUERY_FIELDS", "LangSmithServer", "LangSmithServerThread"]

#: The body fields of ``POST /runs/query`` (the API's ``BodyParamsForRunSchema``).
QUERY_FIELDS = frozenset(
    {
        "id", "trace", "parent_run", "run_type", "session", "reference_example", "start_time", "end_time",
        "error", "query", "filter", "trace_filter", "tree_filter", "is_root", "data_source_type",
        "skip_pagination", "search_filter", "use_experimental_search", "select", "limit", "cursor", "order",
    }
)  # fmt: skip
#: The run fields a query may select.
RUN_FIELDS = frozenset(
    {
        "id", "name", "run_type", "start_time", "end_time", "extra", "error", "events", "inputs", "outputs",
        "parent_run_id", "parent_run_ids", "manifest_id", "manifest_s3_id", "serialized", "reference_example_id",
        "tags", "trace_id", "dotted_order", "status", "session_id", "child_run_ids", "feedback_stats",
        "app_path", "total_tokens", "prompt_tokens", "completion_tokens", "total_cost", "prompt_cost",
        "completion_cost", "first_token_time", "s3_urls", "attachments", "in_dataset", "last_queued_at",
        "share_token", "inputs_preview", "outputs_preview", "thread_id", "trace_min_start_time",
        "trace_max_start_time", "prompt_token_details", "completion_token_details",
    }
)  # fmt: skip
TENANT = "00000000-0000-4000-8000-00000000a55a"
_COMPARE = re.compile(r'^(lt|lte|gt|gte|eq)\(\s*start_time\s*,\s*"([^"]+)"\s*\)$')

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
        self.projects: dict[str, str] = {}  # name -> id
        self.stored_runs: dict[str, dict[str, Any]] = {}  # run id -> run (the API's Run shape)
        self.queries: list[dict[str, Any]] = []  # the bodies of /runs/query, in order

    def load_runs(self, project: str, runs: Iterable[dict[str, Any]], *, project_id: str | None = None) -> str:
        """Hold ``runs`` (dicts in the API's ``Run`` shape) in ``project`` (made with ``project_id``,
        default a uuid5 of its name); returns its id. Feedback may then name them (when ``runs``
        limits which runs feedback may name)."""
        made = project_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"langsmith-project:{project}"))
        pid = self.projects.setdefault(project, made)
        for run in runs:
            rid = str(uuid.UUID(str(run["id"])))
            self.stored_runs[rid] = {**run, "id": rid, "session_id": pid}
            if self.runs is not None:
                self.runs.add(rid)
        return pid

    def add_routes(self, app: web.Application) -> None:
        for prefix in ("", "/api/v1"):
            app.router.add_get(prefix + "/info", self._info)
            app.router.add_post(prefix + "/feedback", self._create)
            app.router.add_get(prefix + "/feedback", self._list)
            app.router.add_get(prefix + "/feedback/{id}", self._read)
            app.router.add_get(prefix + "/sessions", self._sessions)
            app.router.add_get(prefix + "/sessions/{id}", self._session)
            app.router.add_post(prefix + "/runs/query", self._query)

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

    def _project(self, name: str, pid: str) -> dict[str, Any]:
        return {
            "id": pid,
            "name": name,
            "tenant_id": TENANT,
            "start_time": "2026-01-01T00:00:00+00:00",
            "reference_dataset_id": None,
            "run_count": sum(1 for r in self.stored_runs.values() if r["session_id"] == pid),
        }

    async def _sessions(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self.refuse_auth()
        refused = self.read_gate()
        if refused is not None:
            return refused
        name = request.query.get("name")
        rows = [self._project(n, pid) for n, pid in self.projects.items() if name is None or n == name]
        return web.json_response(rows[: int(request.query.get("limit", 100))])

    async def _session(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self.refuse_auth()
        for n, pid in self.projects.items():
            if pid == request.match_info["id"]:
                return web.json_response(self._project(n, pid))
        return web.json_response({"detail": "Project not found"}, status=404)

    async def _query(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self.refuse_auth()
        refused = self.read_gate()
        if refused is not None:
            return refused
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return web.json_response({"detail": "body is not JSON"}, status=422)
        self.queries.append(body)
        problem, keep = self._query_problem(body)
        if problem is not None:
            self.stats.invalid += 1
            return web.json_response({"detail": problem}, status=422)
        assert keep is not None
        runs = sorted(
            (r for r in self.stored_runs.values() if keep(r)),
            key=lambda r: (_time(r["start_time"]), r["id"]),
            reverse=True,
        )
        start = int(base64.urlsafe_b64decode(body["cursor"]).decode()) if body.get("cursor") else 0
        limit = int(body.get("limit") or 100)
        page = runs[start : start + limit]
        select = body.get("select")
        if select:
            page = [{k: v for k, v in r.items() if k in select or k == "id"} for r in page]
        more = start + limit < len(runs)
        nxt = base64.urlsafe_b64encode(str(start + limit).encode()).decode() if more else None
        return web.json_response({"runs": page, "cursors": {"next": nxt}})

    def _query_problem(self, body: Any) -> tuple[str | None, Callable[[dict[str, Any]], bool] | None]:
        if not isinstance(body, dict):
            return "body must be an object", None
        unknown = sorted(set(body) - QUERY_FIELDS)
        if unknown:
            return f"unknown fields: {', '.join(unknown)}", None
        sessions = body.get("session")
        if not isinstance(sessions, list) or not sessions or not all(_uuid(x) for x in sessions):
            return "session: a list of project ids is required", None
        limit = body.get("limit", 100)
        if not isinstance(limit, int) or not 1 <= limit <= 100:
            return "limit: must be between 1 and 100", None
        select = body.get("select") or []
        bad = sorted(set(select) - RUN_FIELDS)
        if bad:
            return f"select: unknown fields {', '.join(bad)}", None
        tests: list[Callable[[dict[str, Any]], bool]] = []
        wanted = {str(uuid.UUID(x)) for x in sessions}
        tests.append(lambda r: r["session_id"] in wanted)
        if body.get("is_root") is not None:
            root = bool(body["is_root"])
            tests.append(lambda r: (r.get("parent_run_id") is None) == root)
        if body.get("trace") is not None:
            if not _uuid(body["trace"]):
                return "trace: not a UUID", None
            trace = str(uuid.UUID(str(body["trace"])))
            tests.append(lambda r: str(r.get("trace_id")) == trace)
        if body.get("id") is not None:
            ids = {str(uuid.UUID(str(x))) for x in body["id"]}
            tests.append(lambda r: r["id"] in ids)
        if body.get("start_time") is not None:
            since = _time(body["start_time"])
            tests.append(lambda r: _time(r["start_time"]) >= since)
        for term in _terms(body.get("filter")):
            m = _COMPARE.match(term)
            if m is None:
                return f"filter: the stand-in reads comparisons of start_time only, not {term!r}", None
            tests.append(_comparison(m.group(1), _time(m.group(2))))
        return None, lambda r: all(t(r) for t in tests)


def _time(value: Any) -> dt.datetime:
    t = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t


def _comparison(op: str, when: dt.datetime) -> Callable[[dict[str, Any]], bool]:
    import operator

    cmp = {"lt": operator.lt, "lte": operator.le, "gt": operator.gt, "gte": operator.ge, "eq": operator.eq}[op]
    return lambda r: bool(cmp(_time(r["start_time"]), when))


def _terms(expr: Any) -> list[str]:
    """The comparisons of a filter: one, or those inside ``and(…)``."""
    if not expr:
        return []
    text = str(expr).strip()
    if text.startswith("and(") and text.endswith(")"):
        inner, parts, depth, cur = text[4:-1], [], 0, ""
        for ch in inner:
            depth += ch == "("
            depth -= ch == ")"
            if ch == "," and depth == 0:
                parts.append(cur.strip())
                cur = ""
            else:
                cur += ch
        parts.append(cur.strip())
        return parts
    return [text]


class LangSmithServerThread(ServerThread[LangSmithServer]):
    """:class:`LangSmithServer` on a background thread (for sync tests and the CLI)."""

    server_class = LangSmithServer
    label = "langsmith"
