"""A second, independent emulator of the providers' batch APIs, written from their documentation
and the wire types of the official SDKs (``openai.types.Batch``, ``FileObject``,
``BatchRequestCounts``; ``anthropic.types.messages.MessageBatch``, ``MessageBatchRequestCounts``
and the ``MessageBatch*Result`` types), not from assay's own stand-in
(:mod:`assay.testing.batch_server`): what assay believes about the wire is checked against a
reading made apart from it.

Served on a free loopback port from a thread of the test process (aiohttp):

* OpenAI: ``POST /v1/files`` (multipart, ``purpose=batch``), ``GET /v1/files/{id}/content``,
  ``POST /v1/batches``, ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``,
  ``GET /v1/batches?limit=&after=`` (newest first, ``has_more``, ``first_id``, ``last_id``) and the
  real-time ``POST /v1/chat/completions``;
* Anthropic: ``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``,
  ``POST .../cancel``, ``GET .../results`` (JSONL), ``GET /v1/messages/batches?limit=&after_id=&before_id=``
  (newest first) and the real-time ``POST /v1/messages``.

As strict as the services: the key (OpenAI ``Authorization: Bearer``; Anthropic ``x-api-key`` or,
as the anthropic 2.x SDK sends it, ``Authorization: Bearer``; plus ``anthropic-version``) or 401;
one model per OpenAI file, each line's ``url`` the batch's ``endpoint``, ``method`` POST,
duplicate ``custom_id``\\s refused (the batch fails validation); Anthropic ``custom_id``
matching ``^[a-zA-Z0-9_-]{1,64}$``, unique, ``params`` with ``model``, ``max_tokens`` and
``messages`` (a 400 ``invalid_request_error`` for the whole create).

Lifecycles: OpenAI ``validating`` → ``in_progress`` → ``finalizing`` → ``completed`` (or ``failed``,
``expired``, ``cancelling`` → ``cancelled``); Anthropic ``in_progress`` → ``canceling`` → ``ended``
with ``request_counts`` {processing, succeeded, errored, canceled, expired}, ``results_url`` once
ended, ``ended_at`` and ``expires_at``. Output and error files list their lines shuffled.

Faults (:class:`Faults`, deterministic per ``seed``): a delay per batch, lines failing with a 500
or a 429 inside a batch, lines some custom_ids always fail with (so that they use up their
attempts), 400 validation failures of single lines, part of the batches expiring (OpenAI
``batch_expired`` error lines and status ``expired``; Anthropic ``expired`` results), polls
answered 500, uploads and creates answered 500 (half of those creates made the batch all the
same), and an enqueued-token limit (OpenAI: the batch goes ``failed`` with
``errors.data[].code == "token_limit_exceeded"``; Anthropic: 429 on create).

:class:`Ledger` (``emulator.seen``) counts what the tests assert on: every custom_id's submissions
and their fates, the tokens billed per line (batch) and per real-time call, and the real-time calls
themselves (joined to custom_ids by their request bodies). ``emulator.hook`` (if set) is called on
the server's thread at ``upload``, ``create``, ``poll``, ``results`` (half-way through a download)
and ``realtime``: a test kills its ``assay run`` process there.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import json
import random
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.support.processes import free_port

ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
OPENAI_ENDPOINTS = ("/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/v1/completions")
OPENAI_MAX_LINES, OPENAI_MAX_BYTES = 50_000, 200 * 1024 * 1024
ANTHROPIC_MAX_LINES, ANTHROPIC_MAX_BYTES = 100_000, 256 * 1024 * 1024
#: Fates after which a custom_id may be submitted again.
RETRYABLE = frozenset({"error500", "error429", "expired", "refused", "cancelled"})


@dataclass
class Faults:
    """What goes wrong, and how slowly."""

    delay: tuple[float, float] = (0.3, 1.5)
    """Seconds from create to the end of a batch (uniform in the range)."""
    line_500: float = 0.0
    line_429: float = 0.0
    always_fail: float = 0.0
    """Share of custom_ids failing (500) at every submission: they use up their attempts."""
    invalid: float = 0.0
    """Share of custom_ids answered a 400 (their request is refused, every time)."""
    expire_batches: float = 0.0
    """Share of batches that run out of time with part of their lines unfinished."""
    expire_share: float = 0.5
    """Of an expiring batch, the share of lines left unfinished."""
    poll_500: float = 0.0
    download_drop: float = 0.0
    """Share of result downloads whose connection is dropped half-way through."""
    drop_first_downloads: int = 0
    """The first this many result downloads are all dropped half-way (a proxy down for a while)."""
    fail_first_lists: int = 0
    """The first this many batch listings are answered 500 (an outage of the listing)."""
    create_500: float = 0.0
    """Share of uploads and creates answered 500; half of the creates answered so were made all the
    same (the gateway gave up waiting): the caller cannot tell which."""
    enqueued_token_limit: int | None = None
    """Input tokens of unfinished batches per model (OpenAI) / per workspace (Anthropic)."""
    seed: int = 0


@dataclass
class Ledger:
    """What the emulator saw (the test's side of the bill)."""

    fates: dict[str, list[str]] = field(default_factory=dict)
    """custom_id → the fate of each submission: ok, error500, error429, invalid, expired,
    refused (enqueued-token limit), cancelled, rejected (the batch failed validation)."""
    billed: dict[str, tuple[int, int]] = field(default_factory=dict)
    """custom_id → (input, output) tokens of its answered batch line (billed at the batch price)."""
    bodies: dict[str, str] = field(default_factory=dict)
    """canonical request body → custom_id (to join real-time calls to their line)."""
    realtime: list[tuple[str | None, int, int, bool]] = field(default_factory=list)
    """Every real-time call: (custom_id of the same request, input tokens, output tokens, whether
    the answer reached the caller: a caller killed while it waits is billed all the same)."""
    uploads: int = 0
    batches_created: int = 0
    refused_creates: int = 0
    poll_errors: int = 0
    create_errors: int = 0
    lists: int = 0
    downloads: int = 0
    dropped_downloads: int = 0
    unauthorized: int = 0
    rejected_batches: list[str] = field(default_factory=list)

    @property
    def submissions(self) -> Counter[str]:
        return Counter({cid: len(f) for cid, f in self.fates.items()})

    def submitted_again_after_success(self) -> list[str]:
        """custom_ids submitted after a submission that was neither failed nor expired."""
        return sorted(cid for cid, f in self.fates.items() if any(x not in RETRYABLE for x in f[:-1]))

    def exhausted(self, max_attempts: int) -> set[str]:
        """custom_ids whose every counted attempt failed (refusals do not count)."""
        out = set()
        for cid, f in self.fates.items():
            counted = [x for x in f if x != "refused"]
            if len(counted) >= max_attempts and "ok" not in counted and "invalid" not in counted:
                out.add(cid)
        return out


def _now() -> float:
    return time.time()


def _rfc3339(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat().replace("+00:00", "Z")


def _canonical(body: Any) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def _tokens_in(body: dict[str, Any]) -> int:
    """The emulator's own count of a request's input tokens (about 4 characters a token)."""
    text = json.dumps(body.get("messages", []), sort_keys=True) + json.dumps(body.get("system", ""))
    return max(1, len(text) // 4)


def _value(schema: dict[str, Any]) -> Any:
    """A value that satisfies a (simple) JSON schema: what a compliant model answers."""
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return _value(options[0])
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: _value(v) for k, v in props.items()}
    if kind == "array":
        return [_value(schema["items"])] * int(schema.get("minItems", 0)) if "items" in schema else []
    if kind == "boolean":
        return True
    if kind in ("number", "integer"):
        low = schema.get("minimum", 0)
        high = schema.get("maximum", 1)
        return high if kind == "integer" else float(high if high <= 1 else low)
    if kind == "null":
        return None
    return "emulated verdict"


@dataclass
class _Batch:
    id: str
    provider: str  # openai | anthropic
    lines: list[dict[str, Any]]
    created: float
    delay: float
    model: str
    tokens: int
    input_file_id: str = ""
    endpoint: str = ""
    metadata: dict[str, str] | None = None
    refused: bool = False
    rejected: str | None = None
    """A validation failure (code: message) of the whole batch."""
    expire: bool = False
    cancel_at: float | None = None
    settled: bool = False
    ended_at: float | None = None
    results: list[dict[str, Any]] = field(default_factory=list)
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts: dict[str, int] = field(default_factory=dict)

    def unfinished(self, now: float) -> bool:
        return not self.settled and not self.refused and self.rejected is None and now < self.created + self.delay


class ProviderBatchEmulator:
    """The two services on one loopback port (see the module doc)."""

    def __init__(
        self,
        faults: Faults | None = None,
        *,
        openai_key: str = "sk-emu-openai-key-0001",
        anthropic_key: str = "sk-ant-emu-key-0001",
    ) -> None:
        self.faults = faults or Faults()
        self.openai_key = openai_key
        self.anthropic_key = anthropic_key
        self.port = free_port()
        self.seen = Ledger()
        self.hook: Callable[[str, dict[str, Any]], bool] | None = None
        """Called at ``upload``, ``create``, ``poll``, ``results``, ``realtime``; True: it killed the caller."""
        self._files: dict[str, dict[str, Any]] = {}
        self._batches: dict[str, _Batch] = {}
        self._order: list[str] = []  # creation order
        self._rng = random.Random(self.faults.seed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> ProviderBatchEmulator:
        self._thread = threading.Thread(target=self._serve, name="provider-batch-emulator", daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the batch emulator did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(30)

    def __enter__(self) -> ProviderBatchEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            runner = web.AppRunner(self._app(), access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", self.port)
            await site.start()
            self._ready.set()
            try:
                await self._stop.wait()
            finally:
                await runner.cleanup()

        asyncio.run(main())

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=OPENAI_MAX_BYTES + 1024 * 1024)
        r = app.router
        r.add_post("/v1/files", self._upload)
        r.add_get("/v1/files/{id}/content", self._file_content)
        r.add_post("/v1/batches", self._openai_create)
        r.add_get("/v1/batches", self._openai_list)
        r.add_get("/v1/batches/{id}", self._openai_get)
        r.add_post("/v1/batches/{id}/cancel", self._openai_cancel)
        r.add_post("/v1/chat/completions", self._openai_realtime)
        r.add_post("/v1/messages/batches", self._anthropic_create)
        r.add_get("/v1/messages/batches", self._anthropic_list)
        r.add_get("/v1/messages/batches/{id}", self._anthropic_get)
        r.add_post("/v1/messages/batches/{id}/cancel", self._anthropic_cancel)
        r.add_get("/v1/messages/batches/{id}/results", self._anthropic_results)
        r.add_post("/v1/messages", self._anthropic_realtime)
        return app

    def _event(self, name: str, **info: Any) -> bool:
        return self.hook(name, info) if self.hook is not None else False

    # --- auth and errors ---------------------------------------------------------------------------

    def _openai_auth(self, request: web.Request) -> web.Response | None:
        if request.headers.get("Authorization") != f"Bearer {self.openai_key}":
            self.seen.unauthorized += 1
            return _openai_error(401, "invalid_request_error", "Incorrect API key provided.", "invalid_api_key")
        return None

    def _anthropic_auth(self, request: web.Request) -> web.Response | None:
        bearer = request.headers.get("Authorization", "")
        given = request.headers.get("x-api-key") or (bearer[7:] if bearer.startswith("Bearer ") else None)
        if given != self.anthropic_key:  # (the anthropic 2.x SDK sends the key as a Bearer token)
            self.seen.unauthorized += 1
            return _anthropic_error(401, "authentication_error", "invalid x-api-key")
        if not request.headers.get("anthropic-version"):
            return _anthropic_error(400, "invalid_request_error", "anthropic-version: header is required")
        return None

    def _create_fails(self) -> str | None:
        """None, or how a create fails: ``before`` (nothing made) or ``after`` (made, answered 500)."""
        if self.faults.create_500 and self._rng.random() < self.faults.create_500:
            self.seen.create_errors += 1
            return "before" if self._rng.random() < 0.5 else "after"
        return None

    def _drops(self, request: web.Request) -> bool:
        """Whether to drop this download half-way (then the connection is cut)."""
        first = self.seen.downloads < self.faults.drop_first_downloads
        self.seen.downloads += 1
        if first or (self.faults.download_drop and self._rng.random() < self.faults.download_drop):
            self.seen.dropped_downloads += 1
            return True
        return False

    def _poll_fails(self) -> bool:
        if self.faults.poll_500 and self._rng.random() < self.faults.poll_500:
            self.seen.poll_errors += 1
            return True
        return False

    # --- fates of lines ----------------------------------------------------------------------------

    def _draw(self, *parts: Any) -> float:
        digest = hashlib.sha256(repr((self.faults.seed, *parts)).encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def _fate(self, cid: str, attempt: int) -> str:
        f = self.faults
        if self._draw("invalid", cid) < f.invalid:
            return "invalid"
        if self._draw("always", cid) < f.always_fail:
            return "error500"
        u = self._draw("line", cid, attempt)
        if u < f.line_500:
            return "error500"
        if u < f.line_500 + f.line_429:
            return "error429"
        return "ok"

    def _record(self, cid: str, fate: str) -> None:
        self.seen.fates.setdefault(cid, []).append(fate)

    def _attempt(self, cid: str) -> int:
        return len(self.seen.fates.get(cid, []))

    def _enqueued(self, provider: str, model: str) -> int:
        now = _now()
        return sum(
            b.tokens
            for b in self._batches.values()
            if b.provider == provider and (provider == "anthropic" or b.model == model) and b.unfinished(now)
        )

    def _settle(self, batch: _Batch) -> None:
        """Run the batch's lines once its time is up (or it was cancelled): fates, results, counts."""
        now = _now()
        if batch.settled or batch.refused or batch.rejected is not None:
            return
        cancelled = batch.cancel_at is not None and now >= batch.cancel_at
        if now < batch.created + batch.delay and not cancelled:
            return
        batch.settled = True
        batch.ended_at = now
        rng = random.Random(f"{self.faults.seed}:{batch.id}")
        order = list(range(len(batch.lines)))
        rng.shuffle(order)
        unfinished: set[int] = set()
        if cancelled:
            unfinished = set(order[: len(order) // 2])
        elif batch.expire:
            unfinished = set(order[: int(len(order) * self.faults.expire_share)])
        for i in order:
            line = batch.lines[i]
            cid = line["custom_id"]
            if i in unfinished:
                fate = "cancelled" if cancelled else "expired"
            else:
                fate = self._fate(cid, self._attempt(cid))
            self._record(cid, fate)
            body = line["body"] if batch.provider == "openai" else line["params"]
            if fate == "ok":
                answer, tin, tout = self._answer(batch.provider, body)
                self.seen.billed[cid] = (tin, tout)
                batch.results.append({"cid": cid, "fate": fate, "answer": answer})
            else:
                batch.results.append({"cid": cid, "fate": fate})

    # --- answers -------------------------------------------------------------------------------

    def _answer(self, provider: str, body: dict[str, Any]) -> tuple[dict[str, Any], int, int]:
        tin = _tokens_in(body)
        model = body.get("model", "")
        if provider == "openai":
            fmt = (body.get("response_format") or {}).get("json_schema") or {}
            content = json.dumps(_value(fmt.get("schema") or {"type": "object"}))
            tout = max(1, len(content) // 4)
            return (
                {
                    "id": "chatcmpl-" + uuid.uuid4().hex[:24],
                    "object": "chat.completion",
                    "created": int(_now()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content, "refusal": None},
                            "logprobs": None,
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout},
                    "system_fingerprint": "fp_emulator",
                },
                tin,
                tout,
            )
        tools = body.get("tools") or []
        if tools:
            data = _value(tools[0].get("input_schema") or {"type": "object"})
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": "toolu_" + uuid.uuid4().hex[:24],
                "name": tools[0]["name"],
                "input": data,
            }
            tout = max(1, len(json.dumps(data)) // 4)
            stop = "tool_use"
        else:
            block = {"type": "text", "text": "emulated answer", "citations": None}
            tout, stop = 4, "end_turn"
        return (
            {
                "id": "msg_" + uuid.uuid4().hex[:24],
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [block],
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": tin,
                    "output_tokens": tout,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            },
            tin,
            tout,
        )

    def _realtime(self, provider: str, body: dict[str, Any]) -> web.Response:
        answer, tin, tout = self._answer(provider, body)
        killed = self._event("realtime", provider=provider)
        self.seen.realtime.append((self.seen.bodies.get(_canonical(body)), tin, tout, not killed))
        return web.json_response(answer)

    # --- OpenAI: files ---------------------------------------------------------------------------

    async def _upload(self, request: web.Request) -> web.Response:
        if (denied := self._openai_auth(request)) is not None:
            return denied
        if not request.content_type.startswith("multipart/"):
            return _openai_error(400, "invalid_request_error", "Expected a multipart/form-data upload.")
        purpose = None
        data = b""
        filename = ""
        reader = await request.multipart()
        async for part in reader:
            if part.name == "purpose":
                purpose = (await part.read()).decode()  # type: ignore[union-attr]
            elif part.name == "file":
                filename = part.filename or ""  # type: ignore[union-attr]
                data = bytes(await part.read())  # type: ignore[union-attr]
        if purpose is None:
            return _openai_error(400, "invalid_request_error", "Missing required parameter: 'purpose'.")
        if purpose not in ("batch", "fine-tune", "assistants", "vision", "user_data", "evals"):
            return _openai_error(400, "invalid_request_error", f"Invalid value for 'purpose': {purpose!r}.")
        if not data:
            return _openai_error(400, "invalid_request_error", "Missing required parameter: 'file'.")
        if purpose == "batch" and len(data) > OPENAI_MAX_BYTES:
            return _openai_error(400, "invalid_request_error", "File is too large for a batch (200 MB).")
        if self._create_fails() is not None:
            return _openai_error(500, "server_error", "The server had an error while processing your request.")
        fid = "file-" + uuid.uuid4().hex[:22]
        created = int(_now())
        self._files[fid] = {"purpose": purpose, "data": data, "filename": filename, "created": created}
        self.seen.uploads += 1
        self._event("upload", file_id=fid)
        return web.json_response(_file_object(fid, self._files[fid]))

    async def _file_content(self, request: web.Request) -> web.StreamResponse:
        if (denied := self._openai_auth(request)) is not None:
            return denied
        fid = request.match_info["id"]
        f = self._files.get(fid)
        if f is None:
            return _openai_error(404, "invalid_request_error", f"No such File object: {fid}")
        if f["purpose"] == "batch":
            return _openai_error(400, "invalid_request_error", "Not allowed to download files of purpose: batch")
        lines = f["data"].splitlines(keepends=True)
        resp = web.StreamResponse(headers={"content-type": "application/octet-stream"})
        await resp.prepare(request)
        return await self._send_lines(request, resp, lines, file_id=fid)

    async def _send_lines(
        self, request: web.Request, resp: web.StreamResponse, lines: list[bytes], **info: Any
    ) -> web.StreamResponse:
        """The JSONL body of a result download, in two halves (the ``results`` event in between);
        a dropped download stops after the first half, in the middle of a line, and cuts the
        connection."""
        half = len(lines) // 2
        drop = self._drops(request)
        with contextlib.suppress(ConnectionError):
            first = b"".join(lines[:half])
            if drop:
                await resp.write(first + lines[half][: len(lines[half]) // 2])
                if request.transport is not None:
                    request.transport.abort()  # as a proxy that gave up does
                return resp
            await resp.write(first)
            self._event("results", **info)
            await resp.write(b"".join(lines[half:]))
            await resp.write_eof()
        return resp

    # --- OpenAI: batches -------------------------------------------------------------------------

    async def _openai_create(self, request: web.Request) -> web.Response:
        if (denied := self._openai_auth(request)) is not None:
            return denied
        try:
            payload = await request.json()
        except json.JSONDecodeError:
            return _openai_error(400, "invalid_request_error", "We could not parse the JSON body of your request.")
        fid = payload.get("input_file_id")
        endpoint = payload.get("endpoint")
        window = payload.get("completion_window")
        metadata = payload.get("metadata")
        if fid not in self._files:
            return _openai_error(
                400, "invalid_request_error", f"Invalid 'input_file_id': {fid!r}.", param="input_file_id"
            )
        if self._files[fid]["purpose"] != "batch":
            return _openai_error(400, "invalid_request_error", "The input file must have purpose 'batch'.")
        if endpoint not in OPENAI_ENDPOINTS:
            return _openai_error(400, "invalid_request_error", f"Invalid value for 'endpoint': {endpoint!r}.")
        if window != "24h":
            return _openai_error(400, "invalid_request_error", f"Invalid value for 'completion_window': {window!r}.")
        if metadata is not None:
            ok = isinstance(metadata, dict) and len(metadata) <= 16
            ok = ok and all(isinstance(k, str) and len(k) <= 64 for k in metadata)
            ok = ok and all(isinstance(v, str) and len(v) <= 512 for v in metadata.values())
            if not ok:
                return _openai_error(400, "invalid_request_error", "Invalid 'metadata'.", param="metadata")
        failure = self._create_fails()
        if failure == "before":
            return _openai_error(500, "server_error", "The server had an error while processing your request.")
        lines, rejected, model = self._validate_openai_file(self._files[fid]["data"], endpoint)
        tokens = sum(_tokens_in(line["body"]) for line in lines) if rejected is None else 0
        f = self.faults
        batch = _Batch(
            id="batch_" + uuid.uuid4().hex[:24],
            provider="openai",
            lines=lines,
            created=_now(),
            delay=self._rng.uniform(*f.delay),
            model=model,
            tokens=tokens,
            input_file_id=fid,
            endpoint=endpoint,
            metadata=metadata,
            rejected=rejected,
        )
        for b in list(self._batches.values()):
            self._settle(b)
        limit = f.enqueued_token_limit
        if rejected is None and limit is not None and self._enqueued("openai", model) + tokens > limit:
            batch.refused = True
            self.seen.refused_creates += 1
            for line in lines:
                self._record(line["custom_id"], "refused")
        if rejected is not None:
            self.seen.rejected_batches.append(rejected)
            for line in lines:
                self._record(line["custom_id"], "rejected")
        batch.expire = not batch.refused and rejected is None and self._rng.random() < f.expire_batches
        if not batch.refused and rejected is None:
            for line in lines:
                self.seen.bodies[_canonical(line["body"])] = line["custom_id"]
        self._batches[batch.id] = batch
        self._order.append(batch.id)
        self.seen.batches_created += 1
        self._event("create", batch_id=batch.id)
        if failure == "after":
            return _openai_error(500, "server_error", "The server had an error while processing your request.")
        return web.json_response(self._openai_batch(batch))

    def _validate_openai_file(self, data: bytes, endpoint: str) -> tuple[list[dict[str, Any]], str | None, str]:
        lines: list[dict[str, Any]] = []
        models: set[str] = set()
        seen: set[str] = set()
        for n, raw in enumerate(data.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except json.JSONDecodeError:
                return [], f"invalid_json_line: line {n} is not valid JSON", ""
            cid = line.get("custom_id")
            if not isinstance(cid, str) or not cid:
                return [], f"missing_custom_id: line {n} has no custom_id", ""
            if cid in seen:
                return [], f"duplicate_custom_id: the custom_id {cid!r} of line {n} is not unique", ""
            seen.add(cid)
            if line.get("method") != "POST":
                return [], f"invalid_method: line {n}: method must be POST", ""
            if line.get("url") != endpoint:
                return [], f"mismatched_endpoint: line {n}: url {line.get('url')!r} is not {endpoint!r}", ""
            body = line.get("body")
            if not isinstance(body, dict) or not body.get("model"):
                return [], f"missing_model: line {n} has no body.model", ""
            models.add(body["model"])
            lines.append(line)
        if not lines:
            return [], "empty_file: the input file has no requests", ""
        if len(models) > 1:
            return [], f"mismatched_model: a batch file takes one model, got {sorted(models)}", ""
        if len(lines) > OPENAI_MAX_LINES:
            return [], f"too_many_requests: {len(lines)} requests, at most {OPENAI_MAX_LINES}", ""
        return lines, None, models.pop()

    def _openai_state(self, batch: _Batch) -> str:
        now = _now()
        self._settle(batch)
        if batch.rejected is not None or batch.refused:
            return "validating" if now < batch.created + 0.1 else "failed"
        if batch.settled:
            if batch.cancel_at is not None:
                return "cancelled"
            return "expired" if batch.expire else "completed"
        if batch.cancel_at is not None:
            return "cancelling"
        elapsed = (now - batch.created) / batch.delay
        return "validating" if elapsed < 0.1 else "in_progress" if elapsed < 0.9 else "finalizing"

    def _openai_files(self, batch: _Batch) -> None:
        """Write the output and error files of a settled batch (once)."""
        if batch.output_file_id is not None or batch.error_file_id is not None or not batch.settled:
            return
        out, err = [], []
        for r in batch.results:
            rid = "batch_req_" + uuid.uuid4().hex[:24]
            fate = r["fate"]
            if fate == "ok":
                resp = {"status_code": 200, "request_id": uuid.uuid4().hex, "body": r["answer"]}
                out.append({"id": rid, "custom_id": r["cid"], "response": resp, "error": None})
            elif fate in ("error500", "error429", "invalid"):
                status, kind, msg = {
                    "error500": (500, "server_error", "The server had an error processing your request."),
                    "error429": (429, "rate_limit_exceeded", "Rate limit reached for requests."),
                    "invalid": (400, "invalid_request_error", "emulator: 'messages' is invalid for this model."),
                }[fate]
                body = {"error": {"message": msg, "type": kind, "param": None, "code": None}}
                resp = {"status_code": status, "request_id": uuid.uuid4().hex, "body": body}
                err.append({"id": rid, "custom_id": r["cid"], "response": resp, "error": None})
            elif fate == "expired":
                error = {
                    "code": "batch_expired",
                    "message": "This request could not be executed before the completion window expired.",
                }
                err.append({"id": rid, "custom_id": r["cid"], "response": None, "error": error})
            # cancelled lines that never ran appear in no file
        rng = random.Random(f"{self.faults.seed}:{batch.id}:files")
        for rows, attr in ((out, "output_file_id"), (err, "error_file_id")):
            if not rows:
                continue
            rng.shuffle(rows)
            fid = "file-" + uuid.uuid4().hex[:22]
            data = b"".join(json.dumps(x).encode() + b"\n" for x in rows)
            self._files[fid] = {
                "purpose": "batch_output",
                "data": data,
                "filename": f"{batch.id}_{attr}.jsonl",
                "created": int(_now()),
            }
            setattr(batch, attr, fid)
        ok = sum(1 for r in batch.results if r["fate"] == "ok")
        failed = sum(1 for r in batch.results if r["fate"] in ("error500", "error429", "invalid", "expired"))
        batch.counts = {"total": len(batch.lines), "completed": ok, "failed": failed}

    def _openai_batch(self, batch: _Batch) -> dict[str, Any]:
        state = self._openai_state(batch)
        self._openai_files(batch)
        created = int(batch.created)
        errors = None
        if state == "failed":
            if batch.refused:
                code, message = (
                    "token_limit_exceeded",
                    (
                        f"Enqueued token limit reached for {batch.model} in organization org-emulator. "
                        f"Limit: {self.faults.enqueued_token_limit:,} enqueued tokens. Please try again once some "
                        "in_progress batches have been completed."
                    ),
                )
            else:
                code, _, message = (batch.rejected or "failed: ").partition(": ")
            errors = {"object": "list", "data": [{"code": code, "message": message, "param": None, "line": None}]}
        finished = state in ("completed", "expired", "cancelled", "failed")
        counts = batch.counts if batch.settled else {"total": len(batch.lines), "completed": 0, "failed": 0}
        end = int(batch.ended_at or _now())
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.endpoint,
            "model": batch.model or None,
            "errors": errors,
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": state,
            "output_file_id": batch.output_file_id if finished else None,
            "error_file_id": batch.error_file_id if finished else None,
            "created_at": created,
            "in_progress_at": created if state not in ("validating", "failed") else None,
            "expires_at": created + 86400,
            "finalizing_at": end if state in ("completed", "expired") else None,
            "completed_at": end if state == "completed" else None,
            "failed_at": end if state == "failed" else None,
            "expired_at": end if state == "expired" else None,
            "cancelling_at": int(batch.cancel_at) if batch.cancel_at is not None else None,
            "cancelled_at": end if state == "cancelled" else None,
            "request_counts": counts,
            "metadata": batch.metadata,
        }

    def _openai_of(self, request: web.Request) -> _Batch | web.Response:
        batch = self._batches.get(request.match_info["id"])
        if batch is None or batch.provider != "openai":
            return _openai_error(404, "invalid_request_error", f"No batch found with id '{request.match_info['id']}'.")
        return batch

    async def _openai_get(self, request: web.Request) -> web.Response:
        if (denied := self._openai_auth(request)) is not None:
            return denied
        if self._poll_fails():
            return _openai_error(500, "server_error", "The server had an error while processing your request.")
        batch = self._openai_of(request)
        if isinstance(batch, web.Response):
            return batch
        self._event("poll", batch_id=batch.id)
        return web.json_response(self._openai_batch(batch))

    async def _openai_cancel(self, request: web.Request) -> web.Response:
        if (denied := self._openai_auth(request)) is not None:
            return denied
        batch = self._openai_of(request)
        if isinstance(batch, web.Response):
            return batch
        state = self._openai_state(batch)
        if state in ("completed", "failed", "expired", "cancelled"):
            return _openai_error(400, "invalid_request_error", f"Cannot cancel a batch with status '{state}'.")
        if batch.cancel_at is None:
            batch.cancel_at = _now() + 0.2
        return web.json_response(self._openai_batch(batch))

    def _list_fails(self) -> bool:
        self.seen.lists += 1
        return self.seen.lists <= self.faults.fail_first_lists

    async def _openai_list(self, request: web.Request) -> web.Response:
        if (denied := self._openai_auth(request)) is not None:
            return denied
        if self._list_fails():
            return _openai_error(500, "server_error", "The server had an error while processing your request.")
        try:
            limit = int(request.query.get("limit", "20"))
        except ValueError:
            return _openai_error(400, "invalid_request_error", "Invalid 'limit'.")
        if not 1 <= limit <= 100:
            return _openai_error(400, "invalid_request_error", "'limit' must be between 1 and 100.")
        ids = [i for i in reversed(self._order) if self._batches[i].provider == "openai"]
        after = request.query.get("after")
        if after:
            if after not in ids:
                return _openai_error(400, "invalid_request_error", f"Invalid 'after': {after!r}.")
            ids = ids[ids.index(after) + 1 :]
        page = ids[:limit]
        data = [self._openai_batch(self._batches[i]) for i in page]
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "first_id": page[0] if page else None,
                "last_id": page[-1] if page else None,
                "has_more": len(ids) > limit,
            }
        )

    async def _openai_realtime(self, request: web.Request) -> web.Response:
        if (denied := self._openai_auth(request)) is not None:
            return denied
        body = await request.json()
        if not body.get("model") or not body.get("messages"):
            return _openai_error(400, "invalid_request_error", "Missing required parameter: 'messages'.")
        return self._realtime("openai", body)

    # --- Anthropic -------------------------------------------------------------------------------

    async def _anthropic_create(self, request: web.Request) -> web.Response:
        if (denied := self._anthropic_auth(request)) is not None:
            return denied
        raw = await request.read()
        if len(raw) > ANTHROPIC_MAX_BYTES:
            return _anthropic_error(413, "request_too_large", "Request exceeds the maximum allowed number of bytes.")
        try:
            payload = json.loads(raw)
        except json.JSONDecodeError:
            return _anthropic_error(400, "invalid_request_error", "The request body is not valid JSON.")
        requests = payload.get("requests") if isinstance(payload, dict) else None
        if not isinstance(requests, list) or not requests:
            return _anthropic_error(400, "invalid_request_error", "requests: Field required (a non-empty list)")
        if len(requests) > ANTHROPIC_MAX_LINES:
            return _anthropic_error(400, "invalid_request_error", f"requests: at most {ANTHROPIC_MAX_LINES:,} requests")
        seen: set[str] = set()
        for n, item in enumerate(requests):
            cid = item.get("custom_id") if isinstance(item, dict) else None
            if not isinstance(cid, str) or not ANTHROPIC_ID.match(cid):
                return _anthropic_error(
                    400,
                    "invalid_request_error",
                    f"requests.{n}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'",
                )
            if cid in seen:
                return _anthropic_error(
                    400, "invalid_request_error", f"requests.{n}.custom_id: duplicate custom_id {cid!r}"
                )
            seen.add(cid)
            params = item.get("params")
            if not isinstance(params, dict):
                return _anthropic_error(400, "invalid_request_error", f"requests.{n}.params: Field required")
            for key in ("model", "max_tokens", "messages"):
                if key not in params:
                    return _anthropic_error(400, "invalid_request_error", f"requests.{n}.params.{key}: Field required")
            if params.get("stream"):
                return _anthropic_error(
                    400, "invalid_request_error", f"requests.{n}.params.stream: not allowed in a batch"
                )
        failure = self._create_fails()
        if failure == "before":
            return _anthropic_error(500, "api_error", "Internal server error")
        tokens = sum(_tokens_in(item["params"]) for item in requests)
        for b in list(self._batches.values()):
            self._settle(b)
        limit = self.faults.enqueued_token_limit
        if limit is not None and self._enqueued("anthropic", "") + tokens > limit:
            self.seen.refused_creates += 1
            for item in requests:
                self._record(item["custom_id"], "refused")
            return _anthropic_error(
                429,
                "rate_limit_error",
                "Number of request tokens in the batch queue exceeds your rate limit.",
                headers={"retry-after": "1"},
            )
        batch = _Batch(
            id="msgbatch_" + uuid.uuid4().hex[:24],
            provider="anthropic",
            lines=requests,
            created=_now(),
            delay=self._rng.uniform(*self.faults.delay),
            model=str(requests[0]["params"]["model"]),
            tokens=tokens,
        )
        batch.expire = self._rng.random() < self.faults.expire_batches
        for item in requests:
            self.seen.bodies[_canonical(item["params"])] = item["custom_id"]
        self._batches[batch.id] = batch
        self._order.append(batch.id)
        self.seen.batches_created += 1
        self._event("create", batch_id=batch.id)
        if failure == "after":
            return _anthropic_error(500, "api_error", "Internal server error")
        return web.json_response(self._anthropic_batch(batch))

    def _anthropic_batch(self, batch: _Batch) -> dict[str, Any]:
        self._settle(batch)
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if batch.settled:
            for r in batch.results:
                key = {"ok": "succeeded", "expired": "expired", "cancelled": "canceled"}.get(r["fate"], "errored")
                counts[key] += 1
            state = "ended"
        else:
            counts["processing"] = len(batch.lines)
            state = "canceling" if batch.cancel_at is not None else "in_progress"
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": state,
            "request_counts": counts,
            "ended_at": _rfc3339(batch.ended_at) if batch.ended_at else None,
            "created_at": _rfc3339(batch.created),
            "expires_at": _rfc3339(batch.created + 86400),
            "archived_at": None,
            "cancel_initiated_at": _rfc3339(batch.cancel_at - 0.2) if batch.cancel_at else None,
            "results_url": f"{self.url}/v1/messages/batches/{batch.id}/results" if batch.settled else None,
        }

    def _anthropic_of(self, request: web.Request) -> _Batch | web.Response:
        batch = self._batches.get(request.match_info["id"])
        if batch is None or batch.provider != "anthropic":
            return _anthropic_error(404, "not_found_error", f"No message batch with id {request.match_info['id']!r}")
        return batch

    async def _anthropic_get(self, request: web.Request) -> web.Response:
        if (denied := self._anthropic_auth(request)) is not None:
            return denied
        if self._poll_fails():
            return _anthropic_error(500, "api_error", "Internal server error")
        batch = self._anthropic_of(request)
        if isinstance(batch, web.Response):
            return batch
        self._event("poll", batch_id=batch.id)
        return web.json_response(self._anthropic_batch(batch))

    async def _anthropic_cancel(self, request: web.Request) -> web.Response:
        if (denied := self._anthropic_auth(request)) is not None:
            return denied
        batch = self._anthropic_of(request)
        if isinstance(batch, web.Response):
            return batch
        self._settle(batch)
        if not batch.settled and batch.cancel_at is None:
            batch.cancel_at = _now() + 0.2
        return web.json_response(self._anthropic_batch(batch))

    async def _anthropic_results(self, request: web.Request) -> web.StreamResponse:
        if (denied := self._anthropic_auth(request)) is not None:
            return denied
        batch = self._anthropic_of(request)
        if isinstance(batch, web.Response):
            return batch
        self._settle(batch)
        if not batch.settled:
            return _anthropic_error(400, "invalid_request_error", f"Message Batch {batch.id} has not yet ended.")
        resp = web.StreamResponse(headers={"content-type": "application/binary"})
        await resp.prepare(request)
        rows = list(batch.results)
        random.Random(f"{self.faults.seed}:{batch.id}:results").shuffle(rows)
        lines = [json.dumps({"custom_id": r["cid"], "result": _anthropic_result(r)}).encode() + b"\n" for r in rows]
        return await self._send_lines(request, resp, lines, batch_id=batch.id)

    async def _anthropic_list(self, request: web.Request) -> web.Response:
        if (denied := self._anthropic_auth(request)) is not None:
            return denied
        if self._list_fails():
            return _anthropic_error(500, "api_error", "Internal server error")
        try:
            limit = int(request.query.get("limit", "20"))
        except ValueError:
            return _anthropic_error(400, "invalid_request_error", "limit: Input should be a valid integer")
        if not 1 <= limit <= 1000:
            return _anthropic_error(400, "invalid_request_error", "limit: Input should be between 1 and 1000")
        ids = [i for i in reversed(self._order) if self._batches[i].provider == "anthropic"]  # newest first
        after_id, before_id = request.query.get("after_id"), request.query.get("before_id")
        if after_id and before_id:
            return _anthropic_error(400, "invalid_request_error", "after_id and before_id cannot both be set")
        if after_id:
            if after_id not in ids:
                return _anthropic_error(400, "invalid_request_error", f"after_id: unknown id {after_id!r}")
            ids = ids[ids.index(after_id) + 1 :]
            page, more = ids[:limit], len(ids) > limit
        elif before_id:
            if before_id not in ids:
                return _anthropic_error(400, "invalid_request_error", f"before_id: unknown id {before_id!r}")
            ids = ids[: ids.index(before_id)]
            page, more = ids[-limit:], len(ids) > limit
        else:
            page, more = ids[:limit], len(ids) > limit
        return web.json_response(
            {
                "data": [self._anthropic_batch(self._batches[i]) for i in page],
                "has_more": more,
                "first_id": page[0] if page else None,
                "last_id": page[-1] if page else None,
            }
        )

    async def _anthropic_realtime(self, request: web.Request) -> web.Response:
        if (denied := self._anthropic_auth(request)) is not None:
            return denied
        body = await request.json()
        for key in ("model", "max_tokens", "messages"):
            if key not in body:
                return _anthropic_error(400, "invalid_request_error", f"{key}: Field required")
        return self._realtime("anthropic", body)

    # --- for tests -------------------------------------------------------------------------------

    def batches(self, provider: str | None = None) -> Iterator[dict[str, Any]]:
        for i in self._order:
            b = self._batches[i]
            if provider is None or b.provider == provider:
                yield {
                    "id": b.id,
                    "lines": len(b.lines),
                    "refused": b.refused,
                    "expire": b.expire,
                    "cancelled": b.cancel_at is not None,
                    "rejected": b.rejected,
                }


def _anthropic_result(r: dict[str, Any]) -> dict[str, Any]:
    fate = r["fate"]
    if fate == "ok":
        return {"type": "succeeded", "message": r["answer"]}
    if fate == "expired":
        return {"type": "expired"}
    if fate == "cancelled":
        return {"type": "canceled"}
    kind, message = {
        "error500": ("api_error", "Internal server error"),
        "error429": ("overloaded_error", "Overloaded"),
        "invalid": ("invalid_request_error", "emulator: messages.0.content: the request is invalid"),
    }[fate]
    return {"type": "errored", "error": {"type": "error", "error": {"type": kind, "message": message}}}


def _file_object(fid: str, f: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": fid,
        "object": "file",
        "bytes": len(f["data"]),
        "created_at": f["created"],
        "filename": f["filename"],
        "purpose": f["purpose"],
        "status": "processed",
        "status_details": None,
        "expires_at": None,
    }


def _openai_error(
    status: int, kind: str, message: str, code: str | None = None, param: str | None = None
) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "param": param, "code": code}}, status=status)


def _anthropic_error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(
        {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_" + uuid.uuid4().hex[:20]},
        status=status,
        headers=headers,
    )
