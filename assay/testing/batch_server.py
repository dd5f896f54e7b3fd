"""A stand-in batch API: OpenAI files + batches and Anthropic Message Batches on loopback, answering
each line as the stand-in judge server (:class:`~assay.testing.judge_server.JudgeServer`) would
answer it in real time — whose chat endpoints it serves too, for real-time fallback calls.

Lifecycle: a batch is ``validating`` / ``in_progress`` (Anthropic: ``in_progress``) for ``delay``
seconds (fixed or a ``(low, high)`` range), then ``completed`` (``ended``), its output in any order
(shuffled); :meth:`BatchServer.end_open_batches` ends them at once. Misbehaviour on demand,
deterministic per (``seed``, ``custom_id``, submission number): ``line_error_rate`` (a line fails
with a 500 inside the batch), ``invalid_rate`` (a 400 with a provider message), ``expire_rate`` (a
line expires: the OpenAI batch ends ``expired``), plus
``enqueued_token_limit`` (OpenAI: the batch fails with ``token_limit_exceeded``; Anthropic: 429 on
create, when the unfinished batches' tokens would exceed it), ``poll_error_rate`` (a poll answered
500), ``download_error_rate`` / ``fail_first_download`` (a result download answered 502) and
``api_key`` (401 otherwise). :meth:`BatchServer.forget` (or ``POST /stand-in/forget``) makes it
forget batches as a provider does after a deletion, a reset or for another workspace: their
polls, cancels and result downloads answer 404 in each wire format.

``stats`` counts what a test asserts on: ``submissions`` (custom_id → times submitted),
``batches``, ``refused``, ``lines``, and the real-time requests (``judge.stats``).

>>> import anyio, aiohttp, json
>>> async def demo():
...     async with BatchServer(delay=0.0) as server:
...         line = {"custom_id": "a", "params": {"model": "m", "max_tokens": 9,
...                 "messages": [{"role": "user", "content": "hi"}]}}
...         async with aiohttp.ClientSession() as http:
...             url = server.url + "/v1/messages/batches"
...             async with http.post(url, json={"requests": [line]}) as resp:
...                 batch = await resp.json()
...             async with http.get(url + "/" + batch["id"]) as resp:
...                 batch = await resp.json()
...             async with http.get(batch["results_url"]) as resp:
...                 result = json.loads(await resp.text())
...     return batch["processing_status"], result["result"]["type"], server.stats.submissions["a"]
>>> anyio.run(demo)
('ended', 'succeeded', 1)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import hashlib
import random
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from assay.testing.judge_server import JudgeServer, Rule, Verdict
from assay.testing.threaded import LoopbackServer, ServerThread, parse_range


@dataclass(slots=True)
class BatchStats:
    submissions: Counter[str] = field(default_factory=Counter)
    """custom_id → how many times it was submitted in a batch."""
    fates: dict[str, list[str]] = field(default_factory=dict)
    """custom_id → the outcome of each of its submissions (ok, error, invalid, expired, cancelled)."""
    batches: int = 0
    refused: int = 0
    """Creates refused for the enqueued-token limit (OpenAI: failed batches; Anthropic: 429s)."""
    lines: int = 0
    line_errors: int = 0
    invalid: int = 0
    expired: int = 0
    cancelled: int = 0
    unauthorized: int = 0
    uploads: int = 0
    polls: int = 0
    poll_errors: int = 0
    download_errors: int = 0
    forgotten: int = 0
    """Batches forgotten on demand (:meth:`BatchServer.forget`)."""

    def resubmitted_after_success(self) -> list[str]:
        """custom_ids submitted again after a submission that was answered (must be none)."""
        return sorted(cid for cid, fates in self.fates.items() if "ok" in fates[:-1] or "invalid" in fates[:-1])

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__slots__ if k not in ("submissions", "fates")}
        out["distinct_custom_ids"] = len(self.submissions)
        out["resubmitted"] = sum(1 for n in self.submissions.values() if n > 1)
        return out


@dataclass
class _Batch:
    id: str
    provider: str
    lines: list[dict[str, Any]]
    created: float
    done_at: float
    tokens: int
    metadata: dict[str, Any] = field(default_factory=dict)
    input_file_id: str | None = None
    state: str = "in_progress"
    refused: bool = False
    cancelled: bool = False
    results: list[tuple[str, dict[str, Any]]] | None = None
    """(kind, result line) once finished: kind ok | error | expired | cancelled | invalid."""
    output_file_id: str | None = None
    error_file_id: str | None = None


class BatchServer(LoopbackServer):
    """``async with BatchServer(...) as server:``; OpenAI and Anthropic clients use ``server.url + "/v1"``."""

    def __init__(
        self,
        *,
        rule: Rule | None = None,
        responses: Sequence[Verdict] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        delay: float | tuple[float, float] = 0.5,
        line_error_rate: float = 0.0,
        invalid_rate: float = 0.0,
        expire_rate: float = 0.0,
        enqueued_token_limit: int | None = None,
        api_key: str | None = None,
        seed: int = 0,
        latency: float | tuple[float, float] = 0.0,
        poll_error_rate: float = 0.0,
        download_error_rate: float = 0.0,
        fail_first_download: bool = False,
    ) -> None:
        self.poll_error_rate = poll_error_rate
        self.download_error_rate = download_error_rate
        self.fail_first_download = fail_first_download
        self._failed_once: set[str] = set()
        self.judge = JudgeServer(rule=rule, responses=responses, api_key=api_key, latency=latency, seed=seed)
        super().__init__(host, port)
        self.delay = delay
        self.line_error_rate = line_error_rate
        self.invalid_rate = invalid_rate
        self.expire_rate = expire_rate
        self.enqueued_token_limit = enqueued_token_limit
        self.api_key = api_key
        self.seed = seed
        self.stats = BatchStats()
        self._rng = random.Random(seed)
        self._faults = random.Random(f"faults-{seed}")
        """Draws of poll and download failures (apart, so they do not shift the batches' delays)."""
        self._batches: dict[str, _Batch] = {}
        self._files: dict[str, bytes] = {}

    async def start(self) -> None:
        app = web.Application(client_max_size=512 * 1024 * 1024)
        self.judge.add_routes(app)
        r = app.router
        r.add_post("/v1/files", self._upload)
        r.add_get("/v1/files/{id}/content", self._file_content)
        r.add_post("/v1/batches", self._openai_create)
        r.add_get("/v1/batches", self._openai_list)
        r.add_get("/v1/batches/{id}", self._openai_get)
        r.add_post("/v1/batches/{id}/cancel", self._openai_cancel)
        r.add_post("/v1/messages/batches", self._anthropic_create)
        r.add_get("/v1/messages/batches", self._anthropic_list)
        r.add_get("/v1/messages/batches/{id}", self._anthropic_get)
        r.add_get("/v1/messages/batches/{id}/results", self._anthropic_results)
        r.add_post("/v1/messages/batches/{id}/cancel", self._anthropic_cancel)
        r.add_get("/stats", self._get_stats)
        r.add_post("/stand-in/forget", self._post_forget)
        await self.serve(app)

    async def stop(self) -> None:
        await self.judge.stop()
        await super().stop()

    # --- shared --------------------------------------------------------------------------------

    def _authorized(self, request: web.Request) -> bool:
        if self.api_key is None:
            return True
        given = request.headers.get("x-api-key") or request.headers.get("api-key") or ""
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            given = given or auth[len("Bearer ") :]
        if given == self.api_key:
            return True
        self.stats.unauthorized += 1
        return False

    def _unauthorized(self, provider: str) -> web.Response:
        if provider == "anthropic":
            body: dict[str, Any] = {
                "type": "error",
                "error": {"type": "authentication_error", "message": "invalid x-api-key"},
            }
        else:
            body = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
        return web.json_response(body, status=401)

    def _draw(self, custom_id: str, submission: int) -> float:
        digest = hashlib.sha256(f"{self.seed}|{custom_id}|{submission}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def _fate(self, custom_id: str) -> str:
        """ok | error | invalid | expired, for this submission of the line."""
        u = self._draw(custom_id, self.stats.submissions[custom_id])
        if u < self.invalid_rate:
            return "invalid"
        u -= self.invalid_rate
        if u < self.line_error_rate:
            return "error"
        u -= self.line_error_rate
        if u < self.expire_rate:
            return "expired"
        return "ok"

    def _new_batch(self, provider: str, lines: list[dict[str, Any]], **kw: Any) -> _Batch:
        delay = self._rng.uniform(*self.delay) if isinstance(self.delay, tuple) else float(self.delay)
        now = time.time()
        tokens = sum(len(orjson.dumps(line)) // 4 for line in lines)
        prefix = "batch_" if provider == "openai" else "msgbatch_"
        batch = _Batch(prefix + uuid.uuid4().hex[:24], provider, lines, now, now + delay, tokens, **kw)
        return batch

    def end_open_batches(self) -> int:
        """End every unfinished batch now (it answers ``completed`` / ``ended`` at its next poll),
        whatever its ``delay``: a test that starts with a long delay decides when batches end instead
        of sleeping past a short one. The number of batches ended."""
        ended = 0
        for batch in list(self._batches.values()):
            if batch.results is None and batch.done_at > 0.0:
                batch.done_at = 0.0
                ended += 1
        return ended

    def _enqueued(self, provider: str) -> int:
        return sum(
            b.tokens for b in self._batches.values() if b.provider == provider and b.results is None and not b.refused
        )

    def _admit(self, batch: _Batch) -> bool:
        """Whether the batch fits beside the unfinished ones (the enqueued-token limit)."""
        limit = self.enqueued_token_limit
        return limit is None or self._enqueued(batch.provider) + batch.tokens <= limit

    def _record(self, batch: _Batch) -> None:
        self._batches[batch.id] = batch
        self.stats.batches += 1
        for line in batch.lines:
            self.stats.submissions[str(line.get("custom_id"))] += 1
            self.stats.lines += 1

    async def _finish(self, batch: _Batch) -> None:
        """Answer every line (once), in shuffled order."""
        if batch.results is not None:
            return
        if not batch.cancelled and time.time() < batch.done_at:
            return
        results: list[tuple[str, dict[str, Any]]] = []
        for line in batch.lines:
            cid = str(line.get("custom_id"))
            fate = "cancelled" if batch.cancelled else self._fate(cid)
            self.stats.fates.setdefault(cid, []).append(fate)
            if batch.provider == "openai":
                results.append(await self._openai_line(line, cid, fate))
            else:
                results.append(await self._anthropic_line(line, cid, fate))
        random.Random(f"{self.seed}|{batch.id}").shuffle(results)
        batch.results = results
        kinds = Counter(k for k, _ in results)
        self.stats.line_errors += kinds["error"]
        self.stats.invalid += kinds["invalid"]
        self.stats.expired += kinds["expired"]
        self.stats.cancelled += kinds["cancelled"]
        if batch.provider == "openai":
            ok = [orjson.dumps(r) for k, r in results if k == "ok"]
            bad = [orjson.dumps(r) for k, r in results if k != "ok"]
            if ok:
                batch.output_file_id = self._store(b"\n".join(ok) + b"\n")
            if bad:
                batch.error_file_id = self._store(b"\n".join(bad) + b"\n")
            batch.state = "cancelled" if batch.cancelled else ("expired" if kinds["expired"] else "completed")
        else:
            batch.state = "ended"

    def _store(self, data: bytes) -> str:
        file_id = "file-" + uuid.uuid4().hex[:24]
        self._files[file_id] = data
        return file_id

    def forget(self, batch_id: str | None = None, *, provider: str | None = None) -> list[str]:
        """Forget batch ``batch_id`` (or every batch, of ``provider``: openai | anthropic), with its
        input and result files: the provider deleted them. The ids forgotten."""
        gone = [
            b
            for b in self._batches.values()
            if (batch_id is None or b.id == batch_id) and (provider is None or b.provider == provider)
        ]
        for b in gone:
            del self._batches[b.id]
            for fid in (b.input_file_id, b.output_file_id, b.error_file_id):
                if fid is not None:
                    self._files.pop(fid, None)
        self.stats.forgotten += len(gone)
        return [b.id for b in gone]

    async def _post_forget(self, request: web.Request) -> web.Response:
        """``POST /stand-in/forget`` with ``{"id": ..., "provider": ...}`` (both optional)."""
        body = await request.json(loads=orjson.loads) if request.can_read_body else {}
        ids = self.forget(body.get("id"), provider=body.get("provider"))
        return web.json_response({"forgotten": ids})

    async def _get_stats(self, request: web.Request) -> web.Response:
        return web.json_response({**self.stats.to_dict(), "realtime": self.judge.stats.to_dict()})

    # --- OpenAI --------------------------------------------------------------------------------

    async def _upload(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized("openai")
        reader = await request.multipart()
        data = b""
        purpose = None
        async for part in reader:
            if part.name == "purpose":  # type: ignore[union-attr]
                purpose = (await part.read()).decode()  # type: ignore[union-attr]
            elif part.name == "file":  # type: ignore[union-attr]
                data = bytes(await part.read())  # type: ignore[union-attr]
        if purpose != "batch":
            return web.json_response({"error": {"message": "purpose must be batch"}}, status=400)
        self.stats.uploads += 1
        file_id = self._store(data)
        return web.json_response({"id": file_id, "object": "file", "bytes": len(data), "purpose": "batch"})

    async def _file_content(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized("openai")
        data = self._files.get(request.match_info["id"])
        if self._download_fails(request.match_info["id"]):
            return web.json_response({"error": {"message": "stand-in batch: download failed"}}, status=502)
        if data is None:
            message = f"No such File object: {request.match_info['id']}"
            error = {"message": message, "type": "invalid_request_error", "param": "id", "code": None}
            return web.json_response({"error": error}, status=404)
        return web.Response(body=data, content_type="application/jsonl")

    async def _openai_create(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized("openai")
        body = await request.json(loads=orjson.loads)
        data = self._files.get(str(body.get("input_file_id")))
        if data is None:
            return web.json_response({"error": {"message": "input_file_id: no such file"}}, status=400)
        try:
            lines = [orjson.loads(x) for x in data.splitlines() if x.strip()]
        except orjson.JSONDecodeError:
            return web.json_response({"error": {"message": "the input file is not JSONL"}}, status=400)
        ids = [str(line.get("custom_id")) for line in lines]
        batch = self._new_batch("openai", lines, metadata=dict(body.get("metadata") or {}))
        batch.input_file_id = str(body.get("input_file_id"))
        if len(set(ids)) != len(ids):
            batch.state = "failed"
            batch.refused = True
            batch.results = []
            self._batches[batch.id] = batch
            return web.json_response(self._openai_batch(batch, "duplicate_custom_id"))
        if not self._admit(batch):
            batch.refused = True
            batch.state = "failed"
            batch.results = []
            self._batches[batch.id] = batch
            self.stats.refused += 1
            return web.json_response(self._openai_batch(batch, "token_limit_exceeded"))
        self._record(batch)
        batch.state = "validating"
        return web.json_response(self._openai_batch(batch))

    def _openai_batch(self, batch: _Batch, error_code: str | None = None) -> dict[str, Any]:
        results = batch.results or []
        failed = sum(1 for k, _ in results if k != "ok")
        errors = None
        if error_code is not None:
            message = {
                "token_limit_exceeded": "Enqueued token limit reached for this model.",
                "duplicate_custom_id": "The custom_id of each line must be unique.",
            }[error_code]
            errors = {"object": "list", "data": [{"code": error_code, "message": message, "param": None, "line": None}]}
        if batch.refused and error_code is None:
            errors = {
                "object": "list",
                "data": [{"code": "token_limit_exceeded", "message": "Enqueued token limit reached."}],
            }
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "errors": errors,
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": batch.state,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": int(batch.created),
            "request_counts": {
                "total": len(batch.lines),
                "completed": len(results) - failed,
                "failed": failed,
            },
            "metadata": batch.metadata,
        }

    async def _openai_batch_of(self, request: web.Request) -> _Batch | web.Response:
        if not self._authorized(request):
            return self._unauthorized("openai")
        batch = self._batches.get(request.match_info["id"])
        if batch is None or batch.provider != "openai":
            message = f"No batch found with id '{request.match_info['id']}'."
            error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
            return web.json_response({"error": error}, status=404)
        return batch

    def _poll_fails(self) -> bool:
        """A poll answered 500 (``poll_error_rate``): a provider's passing hiccup."""
        if self._faults.random() < self.poll_error_rate:
            self.stats.poll_errors += 1
            return True
        return False

    def _download_fails(self, key: str) -> bool:
        """A result download answered 502: with ``fail_first_download``, the first download of each
        file (or Anthropic batch); else at ``download_error_rate``."""
        if self.fail_first_download and key not in self._failed_once:
            self._failed_once.add(key)
        elif self._faults.random() >= self.download_error_rate:
            return False
        self.stats.download_errors += 1
        return True

    async def _openai_get(self, request: web.Request) -> web.Response:
        batch = await self._openai_batch_of(request)
        if isinstance(batch, web.Response):
            return batch
        if self._poll_fails():
            return web.json_response(
                {"error": {"message": "stand-in batch: poll failed", "type": "server_error"}}, status=500
            )
        self.stats.polls += 1
        if batch.state == "validating" and time.time() >= batch.created + 0.01:
            batch.state = "in_progress"
        await self._finish(batch)
        return web.json_response(self._openai_batch(batch))

    async def _openai_cancel(self, request: web.Request) -> web.Response:
        batch = await self._openai_batch_of(request)
        if isinstance(batch, web.Response):
            return batch
        if batch.results is None:
            batch.cancelled = True
            batch.state = "cancelling"
        return web.json_response(self._openai_batch(batch))

    async def _openai_list(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized("openai")
        limit = int(request.query.get("limit", "20"))
        after = request.query.get("after")
        items = sorted((b for b in self._batches.values() if b.provider == "openai"), key=lambda b: -b.created)
        if after:
            ids = [b.id for b in items]
            items = items[ids.index(after) + 1 :] if after in ids else []
        page = items[:limit]
        return web.json_response(
            {"object": "list", "data": [self._openai_batch(b) for b in page], "has_more": len(items) > limit}
        )

    async def _openai_line(self, line: dict[str, Any], cid: str, fate: str) -> tuple[str, dict[str, Any]]:
        rid = "batch_req_" + uuid.uuid4().hex[:16]
        if fate in ("expired", "cancelled"):
            code = "batch_expired" if fate == "expired" else "batch_cancelled"
            error = {"code": code, "message": f"This request could not be executed before the batch {fate}."}
            return fate, {"id": rid, "custom_id": cid, "response": None, "error": error}
        if fate == "error":
            body = {"error": {"message": "stand-in batch: injected server error", "type": "server_error"}}
            return "error", {"id": rid, "custom_id": cid, "response": {"status_code": 500, "body": body}, "error": None}
        if fate == "invalid":
            body = {"error": {"message": "stand-in batch: invalid request line", "type": "invalid_request_error"}}
            return "invalid", {
                "id": rid,
                "custom_id": cid,
                "response": {"status_code": 400, "body": body},
                "error": None,
            }
        status, body = await self.judge.answer("openai", line.get("body"))
        kind = "ok" if status == 200 else ("invalid" if status < 500 else "error")
        return kind, {
            "id": rid,
            "custom_id": cid,
            "response": {"status_code": status, "request_id": rid, "body": body},
            "error": None,
        }

    # --- Anthropic -----------------------------------------------------------------------------

    async def _anthropic_create(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized("anthropic")
        body = await request.json(loads=orjson.loads)
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            return _anthropic_error(400, "invalid_request_error", "requests: at least one request is required")
        ids = [str(r.get("custom_id")) for r in requests]
        if len(set(ids)) != len(ids):
            return _anthropic_error(400, "invalid_request_error", "requests: custom_id values must be unique")
        batch = self._new_batch("anthropic", requests)
        if not self._admit(batch):
            self.stats.refused += 1
            return _anthropic_error(429, "rate_limit_error", "Number of batch requests waiting exceeds the limit")
        self._record(batch)
        return web.json_response(self._anthropic_batch(batch))

    def _anthropic_batch(self, batch: _Batch) -> dict[str, Any]:
        results = batch.results
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if results is None:
            counts["processing"] = len(batch.lines)
        else:
            for _, r in results:
                counts[
                    {"succeeded": "succeeded", "errored": "errored", "canceled": "canceled"}.get(
                        r["result"]["type"], "expired"
                    )
                ] += 1
        status = "ended" if results is not None else ("canceling" if batch.cancelled else "in_progress")
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": counts,
            "created_at": _rfc3339(batch.created),
            "ended_at": _rfc3339(time.time()) if results is not None else None,
            "expires_at": _rfc3339(batch.created + 86400),
            "results_url": f"{self.url}/v1/messages/batches/{batch.id}/results" if results is not None else None,
        }

    async def _anthropic_batch_of(self, request: web.Request) -> _Batch | web.Response:
        if not self._authorized(request):
            return self._unauthorized("anthropic")
        batch = self._batches.get(request.match_info["id"])
        if batch is None or batch.provider != "anthropic":
            return _anthropic_error(404, "not_found_error", "no such batch")
        return batch

    async def _anthropic_get(self, request: web.Request) -> web.Response:
        batch = await self._anthropic_batch_of(request)
        if isinstance(batch, web.Response):
            return batch
        if self._poll_fails():
            return _anthropic_error(500, "api_error", "stand-in batch: poll failed")
        self.stats.polls += 1
        await self._finish(batch)
        return web.json_response(self._anthropic_batch(batch))

    async def _anthropic_cancel(self, request: web.Request) -> web.Response:
        batch = await self._anthropic_batch_of(request)
        if isinstance(batch, web.Response):
            return batch
        if batch.results is None:
            batch.cancelled = True
        return web.json_response(self._anthropic_batch(batch))

    async def _anthropic_results(self, request: web.Request) -> web.Response:
        batch = await self._anthropic_batch_of(request)
        if isinstance(batch, web.Response):
            return batch
        if batch.results is None:
            return _anthropic_error(400, "invalid_request_error", "the batch has not ended")
        if self._download_fails(batch.id):
            return _anthropic_error(502, "api_error", "stand-in batch: download failed")
        data = b"".join(orjson.dumps(r) + b"\n" for _, r in batch.results)
        return web.Response(body=data, content_type="application/binary")

    async def _anthropic_list(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized("anthropic")
        limit = int(request.query.get("limit", "20"))
        items = sorted((b for b in self._batches.values() if b.provider == "anthropic"), key=lambda b: -b.created)
        page = items[:limit]
        return web.json_response(
            {
                "data": [self._anthropic_batch(b) for b in page],
                "has_more": len(items) > limit,
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
            }
        )

    async def _anthropic_line(self, line: dict[str, Any], cid: str, fate: str) -> tuple[str, dict[str, Any]]:
        if fate == "cancelled":
            return fate, {"custom_id": cid, "result": {"type": "canceled"}}
        if fate == "expired":
            return fate, {"custom_id": cid, "result": {"type": "expired"}}
        if fate == "error":
            err = {"type": "error", "error": {"type": "api_error", "message": "stand-in batch: injected server error"}}
            return fate, {"custom_id": cid, "result": {"type": "errored", "error": err}}
        if fate == "invalid":
            err = {"type": "error", "error": {"type": "invalid_request_error", "message": "stand-in batch: invalid"}}
            return fate, {"custom_id": cid, "result": {"type": "errored", "error": err}}
        status, body = await self.judge.answer("anthropic", line.get("params"))
        if status == 200:
            return "ok", {"custom_id": cid, "result": {"type": "succeeded", "message": body}}
        err = body if "error" in body else {"type": "error", "error": {"type": "api_error", "message": str(body)}}
        return ("invalid" if status < 500 else "error"), {"custom_id": cid, "result": {"type": "errored", "error": err}}


def _anthropic_error(status: int, kind: str, message: str) -> web.Response:
    return web.json_response({"type": "error", "error": {"type": kind, "message": message}}, status=status)


def _rfc3339(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat().replace("+00:00", "Z")


class BatchServerThread(ServerThread[BatchServer]):
    """The batch server on a background thread with its own loop (sync tests, benchmarks)."""

    server_class = BatchServer
    label = "batch"

    @property
    def stats(self) -> BatchStats:
        return self.server.stats

    def forget(self, batch_id: str | None = None, *, provider: str | None = None) -> list[str]:
        """:meth:`BatchServer.forget` on the server's own loop."""
        assert self._loop is not None

        async def run() -> list[str]:
            return self.server.forget(batch_id, provider=provider)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=30)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m assay.testing.batch_server", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=parse_range, default=0.5, help="seconds until a batch ends (or LOW-HIGH)")
    parser.add_argument("--line-error-rate", type=float, default=0.0)
    parser.add_argument("--invalid-rate", type=float, default=0.0)
    parser.add_argument("--expire-rate", type=float, default=0.0)
    parser.add_argument("--enqueued-token-limit", type=int, default=None)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    async def serve() -> None:
        async with BatchServer(
            host=args.host,
            port=args.port,
            delay=args.delay,
            line_error_rate=args.line_error_rate,
            invalid_rate=args.invalid_rate,
            expire_rate=args.expire_rate,
            enqueued_token_limit=args.enqueued_token_limit,
            api_key=args.api_key,
            seed=args.seed,
        ) as server:
            print(f"stand-in batch API listening on {server.url} (openai and anthropic: {server.url}/v1)", flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
