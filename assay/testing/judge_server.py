"""A stand-in LLM judge server: a real aiohttp server on loopback speaking the OpenAI
(``/v1/chat/completions``), Azure OpenAI (``/openai/deployments/{deployment}/chat/completions``,
``api-version`` required, key in ``api-key``), Anthropic (``/v1/messages``), Gemini
(``/v1beta/models/{model}:generateContent``, key in ``x-goog-api-key``; a wrong key is a 400
``API_KEY_INVALID`` and a missing one a 403, as Google answers; a 429 carries its wait in the
body's ``RetryInfo``; a ``responseSchema`` key Gemini does not know is a 400) and Ollama
(``/api/chat``) wire formats; errors come in each provider's own body shape.

Verdicts come from a user-supplied ``rule`` (``callable(request_json) -> dict | str | Reply``,
sync or async), from ``responses`` (canned answers, cycled), or by default from the prompt itself:
a deterministic verdict that fills the requested JSON schema (booleans and numbers derived from
a hash of the prompt, ``reasoning`` a short sentence). Dicts come back in the requested
structured shape (OpenAI, Azure and Ollama: JSON in ``message.content``; Anthropic: a ``tool_use``
block when a tool is forced; Gemini: JSON text in the candidate's parts); strings come back as
plain text (to exercise verdict salvage).

Misbehaviour on demand, deterministic for a given ``seed`` and arrival order: ``latency`` (seconds,
fixed or a ``(low, high)`` range), ``rps`` (a token bucket of ``rps`` requests per second holding
``burst``; beyond it 429 with ``Retry-After``, ``retry-after-ms`` and ``x-ratelimit-reset-
requests``, or only an integer ``Retry-After`` with ``retry_after_ms=False``, or no hint at all
(nginx's ``limit_req``) with ``retry_hints=False``;
``limit_kind="window"`` counts accepted requests in a sliding one-second window instead,
``"spacing"`` refuses any request closer than ``1/rps`` to the previous accepted one,
``"spacing-any"`` to the previous request accepted or not, ``"minute"`` allows ``60·rps`` per fixed
minute, ``"second"`` ``rps`` per fixed second: Envoy's local rate limit, a Redis INCR + EXPIRE),
``error_rate`` (answered ``fail_status``: 500 by default; 401
or 403 for a wrong key; 500 with ``error_rate=1`` for a reachable but failing endpoint), ``api_key``
(401 for any other key) and ``hang_rate`` (requests never answered until the server stops).
``stats`` (also ``GET /stats``) counts requests, 200s, 429s, 500s and hangs.

>>> import anyio, aiohttp
>>> async def demo():
...     async with JudgeServer(latency=0.01) as server:
...         async with aiohttp.ClientSession() as http:
...             body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
...             async with http.post(server.url + "/v1/chat/completions", json=body) as resp:
...                 return resp.status, server.stats.ok
>>> anyio.run(demo)
(200, 1)

Command line (runs until interrupted)::

    python -m assay.testing.judge_server --port 8787 --latency 0.2-0.6 --rps 5 \\
        --error-rate 0.05 --hang-rate 0.01 --rule mypkg.rules:grade
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import importlib
import inspect
import itertools
import math
import random
import time
import uuid
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from aiohttp import web

from assay.testing.threaded import LoopbackServer, ServerThread, parse_range

Verdict = dict[str, Any] | str


@dataclass(slots=True)
class Reply:
    """A rule's custom HTTP answer (e.g. a 400 with a provider-style error body)."""

    status: int
    body: dict[str, Any] | str
    headers: dict[str, str] = field(default_factory=dict)


Rule = Callable[[dict[str, Any]], "Verdict | Reply | Awaitable[Verdict | Reply]"]


@dataclass(slots=True)
class ServerStats:
    """What the server saw (reset with ``server.stats.reset()`` or ``DELETE /stats``)."""

    requests: int = 0
    ok: int = 0
    rate_limited: int = 0
    server_errors: int = 0
    hangs: int = 0
    client_errors: int = 0
    by_path: Counter[str] = field(default_factory=Counter)
    arrivals: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=100_000))
    """(time.monotonic() at arrival, status answered) of recent requests; 0 for a hang."""

    def reset(self) -> None:
        self.requests = self.ok = self.rate_limited = self.server_errors = 0
        self.hangs = self.client_errors = 0
        self.by_path.clear()
        self.arrivals.clear()

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "ok": self.ok,
            "rate_limited": self.rate_limited,
            "server_errors": self.server_errors,
            "hangs": self.hangs,
            "client_errors": self.client_errors,
            "by_path": dict(self.by_path),
        }


class TokenBucket:
    """``rate`` tokens per second, holding at most ``capacity`` (starts full)."""

    def __init__(self, rate: float, capacity: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self.updated = time.monotonic()

    def take(self) -> float:
        """0.0 when a token was taken, else the seconds until one is available."""
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class SlidingWindow:
    """At most ``rate`` accepted requests in any one-second window (a stricter kind of limit)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.accepted: deque[float] = deque()

    def take(self) -> float:
        now = time.monotonic()
        while self.accepted and self.accepted[0] <= now - 1.0:
            self.accepted.popleft()
        if len(self.accepted) < self.rate:
            self.accepted.append(now)
            return 0.0
        return max(self.accepted[0] + 1.0 - now, 0.001)


class StrictSpacing:
    """Refuses any request closer than ``1/rate`` seconds to the previous accepted one (a bucket
    that holds one request: the strictest kind of limit); with ``count_refused``, to the previous
    request whatever its answer (a naive limiter that restarts its clock on every request)."""

    def __init__(self, rate: float, *, count_refused: bool = False) -> None:
        self.rate = rate
        self.count_refused = count_refused
        self.last = -math.inf

    def take(self) -> float:
        now = time.monotonic()
        gap = 1.0 / self.rate
        if now - self.last >= gap:
            self.last = now
            return 0.0
        wait = self.last + gap - now
        if self.count_refused:
            self.last = now
            wait = gap
        return wait


class FixedWindow:
    """At most ``rate * period`` accepted requests per fixed window of ``period`` seconds (the
    per-minute limits providers publish: ``rpm`` requests, counted per calendar minute)."""

    def __init__(self, rate: float, period: float = 60.0) -> None:
        self.rate = rate
        self.period = period
        self.allowed = max(1, math.floor(rate * period))
        self.start = time.monotonic()
        self.count = 0

    def take(self) -> float:
        now = time.monotonic()
        if now - self.start >= self.period:
            self.start += self.period * math.floor((now - self.start) / self.period)
            self.count = 0
        if self.count < self.allowed:
            self.count += 1
            return 0.0
        return self.start + self.period - now


LimitKind = Literal["bucket", "window", "spacing", "spacing-any", "minute", "second"]
LIMIT_KINDS: tuple[str, ...] = ("bucket", "window", "spacing", "spacing-any", "minute", "second")
Limiter = TokenBucket | SlidingWindow | StrictSpacing | FixedWindow


class JudgeServer(LoopbackServer):
    """The stand-in judge; ``async with JudgeServer(...) as server:`` then use ``server.url``.

    ``server.url`` is the server root: OpenAI clients use ``server.url + "/v1"``, Anthropic clients
    ``server.url + "/v1"`` and Ollama clients ``server.url``.
    """

    def __init__(
        self,
        *,
        rule: Rule | None = None,
        responses: Sequence[Verdict | Reply] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float | tuple[float, float] = 0.0,
        rps: float | None = None,
        burst: float | None = None,
        error_rate: float = 0.0,
        hang_rate: float = 0.0,
        seed: int = 0,
        model: str = "stand-in-judge",
        api_key: str | None = None,
        retry_after_ms: bool = True,
        retry_hints: bool = True,
        limit_kind: LimitKind = "bucket",
        fail_status: int = 500,
        announce_limits: bool = False,
    ) -> None:
        self.rule = rule
        self._responses = itertools.cycle(list(responses)) if responses else None
        super().__init__(host, port)
        self.latency = latency
        self.error_rate = error_rate
        self.hang_rate = hang_rate
        self.model = model
        self.api_key = api_key
        self.retry_after_ms = retry_after_ms
        self.retry_hints = retry_hints
        self.stats = ServerStats()
        self._rng = random.Random(seed)
        self.limit_kind = limit_kind
        self.fail_status = fail_status
        self.announce_limits = announce_limits
        self._bucket: Limiter | None = None
        self.set_rate_limit(rps, burst)
        self._stopping: asyncio.Event | None = None

    def set_rate_limit(self, rps: float | None, burst: float | None = None) -> None:
        """Change (or remove) the rate limit while running."""
        if not rps:
            self._bucket = None
        elif self.limit_kind == "window":
            self._bucket = SlidingWindow(rps)
        elif self.limit_kind in ("spacing", "spacing-any"):
            self._bucket = StrictSpacing(rps, count_refused=self.limit_kind == "spacing-any")
        elif self.limit_kind == "minute":
            self._bucket = FixedWindow(rps)
        elif self.limit_kind == "second":
            self._bucket = FixedWindow(rps, period=1.0)
        else:
            self._bucket = TokenBucket(rps, burst if burst is not None else max(1.0, rps))

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        self.add_routes(app)
        app.router.add_get("/stats", self._get_stats)
        app.router.add_delete("/stats", self._reset_stats)
        await self.serve(app)

    def add_routes(self, app: web.Application) -> None:
        """Mount the chat endpoints on ``app`` (the stand-in batch server serves them too)."""
        self._stopping = asyncio.Event()
        for path in ("/v1/chat/completions", "/chat/completions", "/v1/embeddings", "/embeddings"):
            app.router.add_post(path, self._openai)
        for path in ("/v1/messages", "/messages"):
            app.router.add_post(path, self._anthropic)
        app.router.add_post("/api/chat", self._ollama)
        app.router.add_post("/openai/deployments/{deployment}/chat/completions", self._azure)
        app.router.add_post(r"/{version:v1beta|v1}/models/{model:[^/:]+}:generateContent", self._gemini)

    async def answer(self, provider: str, body: Any) -> tuple[int, dict[str, Any]]:
        """What the server would answer ``body`` (status, JSON body), without HTTP, limits or
        injected failures: the answer of one batch line (openai, azure_openai, anthropic)."""
        problem = _body_problem(provider, body)
        if problem is not None:
            return 400, _error_body(provider, "invalid_request_error", problem)
        verdict = await self._verdict(body, provider)
        if isinstance(verdict, Reply):
            payload = verdict.body if isinstance(verdict.body, dict) else {"error": {"message": verdict.body}}
            return verdict.status, payload
        return 200, self._format(provider, body, verdict)

    async def stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()  # wake the hung handlers so shutdown does not wait for them
        await super().stop()

    # --- handlers ------------------------------------------------------------------------------

    async def _get_stats(self, request: web.Request) -> web.Response:
        stats = self.stats.to_dict()
        if request.query.get("arrivals"):  # for benchmarks: when each request arrived, and its status
            stats["arrivals"] = list(self.stats.arrivals)
        return web.json_response(stats)

    async def _reset_stats(self, request: web.Request) -> web.Response:
        self.stats.reset()
        return web.json_response(self.stats.to_dict())

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "openai")

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "anthropic")

    async def _ollama(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "ollama")

    async def _azure(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "azure_openai")

    async def _gemini(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "google_genai")

    async def _handle(self, request: web.Request, provider: str) -> web.StreamResponse:
        arrived = time.monotonic()
        response = await self._answer(request, provider)
        self.stats.arrivals.append((arrived, response.status if response.status != 503 else 0))
        return response

    async def _answer(self, request: web.Request, provider: str) -> web.StreamResponse:
        self.stats.requests += 1
        self.stats.by_path[request.path] += 1
        hang, fail, delay = self._draw()
        if self._bucket is not None and (wait := self._bucket.take()) > 0:
            self.stats.rate_limited += 1
            return self._rate_limited(provider, wait)
        if hang:
            self.stats.hangs += 1
            assert self._stopping is not None
            await self._stopping.wait()
            return web.Response(status=503)
        if delay > 0:
            await asyncio.sleep(delay)
        if fail:
            if self.fail_status >= 500:
                self.stats.server_errors += 1
                return _error(provider, self.fail_status, "server_error", "stand-in judge: injected server error")
            return self._client_error(provider, self.fail_status, "stand-in judge: injected client error")
        try:
            body = await request.json(loads=orjson.loads)
        except ConnectionResetError:  # the client gave up on this request (a hedged copy, cancelled)
            return web.Response(status=499)
        except (ValueError, orjson.JSONDecodeError):
            return self._client_error(provider, 400, "request body is not JSON")
        problem = self._check(request, provider, body)
        if problem is not None:
            return problem
        if request.path.endswith("/embeddings"):
            self.stats.ok += 1
            return web.json_response(embeddings_answer(body), dumps=_dumps, headers=self._limit_headers())
        verdict = await self._verdict(body, provider)
        if isinstance(verdict, Reply):
            if verdict.status >= 400:
                self.stats.client_errors += verdict.status < 500
                self.stats.server_errors += verdict.status >= 500
            else:
                self.stats.ok += 1
            if isinstance(verdict.body, str):
                return web.Response(status=verdict.status, text=verdict.body, headers=verdict.headers)
            return web.json_response(verdict.body, status=verdict.status, headers=verdict.headers)
        self.stats.ok += 1
        model = request.match_info.get("model") or request.match_info.get("deployment")
        answer = self._format(provider, body, verdict, model)
        return web.json_response(answer, dumps=_dumps, headers=self._limit_headers())

    def _limit_headers(self) -> dict[str, str] | None:
        """With ``announce_limits``: the request limit per minute, in OpenAI's and Anthropic's
        headers, on every answer (as those providers send it)."""
        if not self.announce_limits or self._bucket is None:
            return None
        rpm = f"{self._bucket.rate * 60.0:g}"
        return {"x-ratelimit-limit-requests": rpm, "anthropic-ratelimit-requests-limit": rpm}

    def _draw(self) -> tuple[bool, bool, float]:
        """Three draws per request, always, so the sequence depends only on the seed and arrival order."""
        rng = self._rng
        hang = rng.random() < self.hang_rate
        fail = rng.random() < self.error_rate
        if isinstance(self.latency, tuple):
            delay = rng.uniform(*self.latency)
        else:
            rng.random()
            delay = float(self.latency)
        return hang, fail, delay

    def _rate_limited(self, provider: str, wait: float) -> web.Response:
        # retry_after_ms=False is the coarse server many gateways are: an integer Retry-After only.
        # retry_hints=False: a bare 429, as nginx's limit_req sends it.
        if provider == "google_genai":  # Gemini says how long to wait in the body only
            return _google_error(429, "stand-in judge: quota exceeded", wait if self.retry_hints else None)
        headers = {"Retry-After": str(max(1, math.ceil(wait)))} if self.retry_hints else {}
        if self.retry_after_ms and self.retry_hints:
            headers["retry-after-ms"] = str(max(1, round(wait * 1000)))
            headers["x-ratelimit-remaining-requests"] = "0"
            headers["x-ratelimit-reset-requests"] = f"{max(1, round(wait * 1000))}ms"
        headers.update(self._limit_headers() or {})
        return _error(provider, 429, "rate_limit_error", "stand-in judge: rate limit exceeded", headers)

    def _client_error(self, provider: str, status: int, message: str) -> web.Response:
        self.stats.client_errors += 1
        return _error(provider, status, "invalid_request_error", message)

    def _check(self, request: web.Request, provider: str, body: Any) -> web.Response | None:
        if provider == "azure_openai":
            return self._check_azure(request, body)
        if provider == "google_genai":
            return self._check_gemini(request, body)
        if self.api_key is not None:
            given = request.headers.get("x-api-key") or request.headers.get("api-key") or ""
            auth = request.headers.get("Authorization", "")
            if auth.startswith("Bearer "):
                given = given or auth[len("Bearer ") :]
            if given != self.api_key:
                return self._client_error(provider, 401, f"Incorrect API key provided: {given}")
        if not isinstance(body, dict) or not body.get("model"):
            return self._client_error(provider, 400, "model: field required")
        if request.path.endswith("/embeddings"):
            texts = body.get("input")
            if not (isinstance(texts, str) or (isinstance(texts, list) and all(isinstance(t, str) for t in texts))):
                return self._client_error(provider, 400, "input: a string or a list of strings is required")
            return None
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return self._client_error(provider, 400, "messages: at least one message is required")
        if provider == "anthropic":
            if not isinstance(body.get("max_tokens"), int):
                return self._client_error(provider, 400, "max_tokens: field required")
            if "anthropic-version" not in request.headers:
                return self._client_error(provider, 400, "anthropic-version: header is required")
            if any(m.get("role") == "system" for m in body["messages"]):
                return self._client_error(provider, 400, "messages: system is a top-level field")
        if provider == "ollama" and body.get("stream", True):
            return self._client_error(provider, 400, "stand-in judge: only stream=false is supported")
        return None

    def _check_azure(self, request: web.Request, body: Any) -> web.Response | None:
        if not request.query.get("api-version"):
            return self._client_error("azure_openai", 404, "Resource not found")
        if self.api_key is not None:
            given = request.headers.get("api-key") or ""
            auth = request.headers.get("Authorization", "")
            if not given and auth.startswith("Bearer "):
                given = auth[len("Bearer ") :]
            if given != self.api_key:
                return self._client_error(
                    "azure_openai",
                    401,
                    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide "
                    "a valid key for an active subscription and use a correct regional API endpoint for your resource.",
                )
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return self._client_error("azure_openai", 400, "messages: at least one message is required")
        return None

    def _check_gemini(self, request: web.Request, body: Any) -> web.Response | None:
        if self.api_key is not None:
            given = request.headers.get("x-goog-api-key") or request.query.get("key")
            if not given:
                self.stats.client_errors += 1
                return _google_error(
                    403, "Method doesn't allow unregistered callers (callers without established identity)."
                )
            if given != self.api_key:
                self.stats.client_errors += 1
                return _google_error(400, "API key not valid. Please pass a valid API key.", reason="API_KEY_INVALID")
        problem: str | None = None
        if not isinstance(body, dict) or not isinstance(body.get("contents"), list) or not body["contents"]:
            problem = "* GenerateContentRequest.contents: contents is not specified"
        elif unknown := sorted(set(body) - _GEMINI_REQUEST_KEYS):
            problem = f'Invalid JSON payload received. Unknown name "{unknown[0]}": Cannot find field.'
        elif any(c.get("role") not in (None, "user", "model") for c in body["contents"] if isinstance(c, dict)):
            problem = "Please use a valid role: user, model."
        else:
            schema = (body.get("generationConfig") or {}).get("responseSchema")
            bad = _unknown_schema_key(schema) if isinstance(schema, dict) else None
            if bad is not None:
                problem = (
                    f'Invalid JSON payload received. Unknown name "{bad}" at '
                    "'generation_config.response_schema': Cannot find field."
                )
        if problem is not None:
            self.stats.client_errors += 1
            return _google_error(400, problem)
        return None

    async def _verdict(self, body: dict[str, Any], provider: str) -> Verdict | Reply:
        if self.rule is not None:
            result = self.rule(body)
            if inspect.isawaitable(result):
                result = await result
            return result
        if self._responses is not None:
            return next(self._responses)
        return default_verdict(prompt_text(body), requested_schema(body, provider))

    def _format(
        self, provider: str, body: dict[str, Any], verdict: Verdict, path_model: str | None = None
    ) -> dict[str, Any]:
        text = verdict if isinstance(verdict, str) else orjson.dumps(verdict).decode()
        prompt_tokens = len(orjson.dumps(body.get("messages") or body.get("contents"))) // 4 + 1
        output_tokens = len(text) // 4 + 1
        model = str(body.get("model") or path_model or self.model)
        if provider == "google_genai":
            return {
                "candidates": [
                    {
                        "content": {"parts": [{"text": text}], "role": "model"},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": prompt_tokens,
                    "candidatesTokenCount": output_tokens,
                    "totalTokenCount": prompt_tokens + output_tokens,
                },
                "modelVersion": model,
                "responseId": uuid.uuid4().hex[:22],
            }
        if provider == "anthropic":
            tool = _forced_tool(body)
            if isinstance(verdict, dict) and tool is not None:
                content: list[dict[str, Any]] = [
                    {
                        "type": "tool_use",
                        "id": f"toolu_{uuid.uuid4().hex[:20]}",
                        "name": tool,
                        "input": verdict,
                    }
                ]
                stop = "tool_use"
            else:
                content, stop = [{"type": "text", "text": text}], "end_turn"
            return {
                "id": f"msg_{uuid.uuid4().hex[:20]}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": stop,
                "usage": {"input_tokens": prompt_tokens, "output_tokens": output_tokens},
            }
        if provider == "ollama":
            return {
                "model": model,
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "message": {"role": "assistant", "content": text},
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": prompt_tokens,
                "eval_count": output_tokens,
            }
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:20]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": output_tokens,
                "total_tokens": prompt_tokens + output_tokens,
            },
        }


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


EMBEDDING_DIMENSIONS = 64


def stand_in_embedding(text: str) -> list[float]:
    """A deterministic unit vector for ``text``: a hashed bag of its lowercased words, so texts that
    share words are similar (cosine > 0) and equal texts identical, as a real embedding model would."""
    vector = [0.0] * EMBEDDING_DIMENSIONS
    for word in text.lower().split() or [""]:
        digest = hashlib.sha256(word.encode()).digest()
        vector[digest[0] % EMBEDDING_DIMENSIONS] += 1.0 + digest[1] / 255.0
    norm = sum(v * v for v in vector) ** 0.5
    return [round(v / norm, 6) for v in vector]


def embeddings_answer(body: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's ``/v1/embeddings`` answer for ``body`` (``input``: a text or a list of texts)."""
    texts = [body["input"]] if isinstance(body["input"], str) else list(body["input"])
    tokens = sum(max(1, len(t.split())) for t in texts)
    return {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": stand_in_embedding(t)} for i, t in enumerate(texts)],
        "model": body.get("model"),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _body_problem(provider: str, body: Any) -> str | None:
    """What is wrong with a chat request body, as the provider would say it (None: nothing)."""
    if not isinstance(body, dict) or (provider != "azure_openai" and not body.get("model")):
        return "model: field required"
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        return "messages: at least one message is required"
    if provider == "anthropic":
        if not isinstance(body.get("max_tokens"), int):
            return "max_tokens: field required"
        if any(m.get("role") == "system" for m in body["messages"]):
            return "messages: system is a top-level field"
    return None


def _error_body(provider: str, kind: str, message: str) -> dict[str, Any]:
    if provider == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "code": None}}


def _error(provider: str, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    if provider == "google_genai":
        return _google_error(status, message, headers=headers)
    if provider == "azure_openai" and status in (401, 403, 404, 429):  # Azure's gateway errors: a code, a message
        body: dict[str, Any] = {"error": {"code": str(status), "message": message}}
        return web.json_response(body, status=status, headers=headers, dumps=_dumps)
    if provider == "anthropic":
        body = {"type": "error", "error": {"type": kind, "message": message}}
    elif provider == "ollama":
        body = {"error": message}
    else:
        body = {"error": {"message": message, "type": kind, "code": None}}
    return web.json_response(body, status=status, headers=headers, dumps=_dumps)


_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_GEMINI_REQUEST_KEYS = {
    "contents",
    "systemInstruction",
    "generationConfig",
    "safetySettings",
    "tools",
    "toolConfig",
    "cachedContent",
    "labels",
}
#: The keys of Gemini's ``responseSchema`` (an OpenAPI 3.0 subset); any other is a 400.
_GEMINI_SCHEMA_KEYS = {
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
}


def _google_error(
    status: int,
    message: str,
    retry_delay: float | None = None,
    *,
    reason: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    """An error in Google's shape (``google.rpc.Status``), with ``RetryInfo`` / ``ErrorInfo`` details."""
    details: list[dict[str, Any]] = []
    if reason is not None:
        details.append(
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "googleapis.com"}
        )
    if retry_delay is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_delay:.3f}s"})
    error: dict[str, Any] = {"code": status, "message": message, "status": _GOOGLE_STATUS.get(status, "UNKNOWN")}
    if details:
        error["details"] = details
    return web.json_response({"error": error}, status=status, headers=headers, dumps=_dumps)


def _unknown_schema_key(schema: dict[str, Any]) -> str | None:
    """The first key of a ``responseSchema`` (at any depth) Gemini would refuse, else None."""
    for key, value in schema.items():
        if key not in _GEMINI_SCHEMA_KEYS:
            return key
        children: list[Any] = []
        if key == "properties" and isinstance(value, dict):
            children = list(value.values())
        elif key == "items":
            children = [value]
        elif key == "anyOf" and isinstance(value, list):
            children = value
        for child in children:
            if isinstance(child, dict) and (bad := _unknown_schema_key(child)) is not None:
                return bad
    return None


def _from_gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A Gemini ``responseSchema`` as the JSON schema the default verdict fills (lower-case types)."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            out[key] = value.lower()
        elif key == "properties" and isinstance(value, dict):
            out[key] = {k: _from_gemini_schema(v) for k, v in value.items() if isinstance(v, dict)}
        elif key == "items" and isinstance(value, dict):
            out[key] = _from_gemini_schema(value)
        elif key == "anyOf" and isinstance(value, list):
            out[key] = [_from_gemini_schema(v) for v in value if isinstance(v, dict)]
        else:
            out[key] = value
    return out


def _forced_tool(body: dict[str, Any]) -> str | None:
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool":
        return str(choice.get("name"))
    tools = body.get("tools") or []
    if isinstance(choice, dict) and choice.get("type") == "any" and tools:
        return str(tools[0].get("name"))
    return None


def requested_schema(body: dict[str, Any], provider: str) -> dict[str, Any] | None:
    """The JSON schema the client asked the verdict to follow, if any."""
    if provider == "anthropic":
        name = _forced_tool(body)
        for tool in body.get("tools") or []:
            if tool.get("name") == name and isinstance(tool.get("input_schema"), dict):
                return dict(tool["input_schema"])
        return None
    if provider == "ollama":
        fmt = body.get("format")
        return fmt if isinstance(fmt, dict) else None
    if provider == "google_genai":
        schema = (body.get("generationConfig") or {}).get("responseSchema")
        return _from_gemini_schema(schema) if isinstance(schema, dict) else None
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
        return schema if isinstance(schema, dict) else None
    return None


def prompt_text(body: dict[str, Any]) -> str:
    """Every text of the request (system and messages), joined."""
    parts: list[str] = []
    if isinstance(body.get("system"), str):
        parts.append(body["system"])
    for content in [body.get("systemInstruction") or {}, *(body.get("contents") or [])]:  # Gemini
        if isinstance(content, dict):
            parts.extend(str(p.get("text", "")) for p in content.get("parts") or [] if isinstance(p, dict))
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return "\n".join(parts)


def default_verdict(prompt: str, schema: dict[str, Any] | None) -> Verdict:
    """A deterministic verdict for ``prompt``: fills ``schema`` (or a reasoning+score object)."""
    digest = hashlib.sha256(prompt.encode()).digest()
    if schema is None:
        score = digest[0] % 2 == 0
        return f"The stand-in judge looked at the prompt. Thus, the score should be: {str(score).lower()}."
    bytes_ = itertools.cycle(digest)
    value = _fill(schema, "verdict", bytes_, digest.hex()[:8], 0)
    return value if isinstance(value, dict) else {"score": value}


def _fill(schema: dict[str, Any], name: str, rnd: Iterator[int], tag: str, depth: int) -> Any:
    if schema.get("enum"):
        return schema["enum"][next(rnd) % len(schema["enum"])]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return _fill(schema[key][0], name, rnd, tag, depth)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        if depth > 6:
            return {}
        props = schema.get("properties") or {}
        return {k: _fill(v, k, rnd, tag, depth + 1) for k, v in props.items() if isinstance(v, dict)}
    if kind == "array":
        items: dict[str, Any] = schema["items"] if isinstance(schema.get("items"), dict) else {"type": "string"}
        count = max(1, int(schema.get("minItems", 1)))
        return [_fill(items, name, rnd, tag, depth + 1) for _ in range(count)] if depth <= 6 else []
    if kind == "boolean":
        return next(rnd) % 2 == 0
    if kind in ("number", "integer"):
        low = float(schema.get("minimum", 0.0))
        high = float(schema.get("maximum", 1.0 if kind == "number" else 10.0))
        value = low + (high - low) * next(rnd) / 255.0
        return round(value) if kind == "integer" else round(value, 2)
    if kind == "null":
        return None
    return f"Stand-in {name} for prompt {tag}."


class JudgeServerThread(ServerThread[JudgeServer]):
    """The same server on a background thread with its own loop (for sync tests and the CLI).

    >>> with JudgeServerThread() as server:
    ...     server.url.startswith("http://127.0.0.1:")
    True
    """

    server_class = JudgeServer
    label = "judge"

    @property
    def stats(self) -> ServerStats:
        return self.server.stats


def _load_rule(spec: str) -> Rule:
    module, _, attr = spec.partition(":")
    if not attr:
        raise SystemExit(f"--rule must be module:function, got {spec!r}")
    rule = getattr(importlib.import_module(module), attr)
    if not callable(rule):
        raise SystemExit(f"--rule {spec!r} is not callable")
    return rule  # type: ignore[no-any-return]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m assay.testing.judge_server", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--rule", help="module:function returning a verdict dict or text for a request")
    parser.add_argument("--latency", type=parse_range, default=0.0, help="seconds, or a range LOW-HIGH")
    parser.add_argument("--rps", type=float, default=None, help="rate limit (requests per second)")
    parser.add_argument("--burst", type=float, default=None, help="token bucket size (default: rps)")
    parser.add_argument("--error-rate", type=float, default=0.0, help="fraction of requests answered 500")
    parser.add_argument("--hang-rate", type=float, default=0.0, help="fraction of requests never answered")
    parser.add_argument("--window", action="store_true", help="same as --limit window")
    parser.add_argument(
        "--limit",
        choices=LIMIT_KINDS,
        default=None,
        help="kind of rate limit: token bucket (default), sliding 1 s window, strict spacing of 1/rps "
        "(after the last accepted request; spacing-any: after any request), per-minute window of 60*rps, "
        "fixed one-second window of rps",
    )
    parser.add_argument("--fail-status", type=int, default=500, help="status of --error-rate answers (e.g. 401)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--api-key", default=None, help="require this key (Bearer, x-api-key, api-key or x-goog-api-key)"
    )
    parser.add_argument(
        "--coarse", action="store_true", help="a 429 carries only an integer Retry-After (no ms or reset headers)"
    )
    parser.add_argument("--bare", action="store_true", help="a 429 carries no hint at all (like nginx's limit_req)")
    parser.add_argument(
        "--announce",
        action="store_true",
        help="every answer announces the limit per minute (x-ratelimit-limit-requests)",
    )
    args = parser.parse_args(argv)

    async def serve() -> None:
        server = JudgeServer(
            rule=_load_rule(args.rule) if args.rule else None,
            host=args.host,
            port=args.port,
            latency=args.latency,
            rps=args.rps,
            burst=args.burst,
            error_rate=args.error_rate,
            hang_rate=args.hang_rate,
            seed=args.seed,
            api_key=args.api_key,
            limit_kind=args.limit or ("window" if args.window else "bucket"),
            fail_status=args.fail_status,
            retry_after_ms=not args.coarse,
            retry_hints=not args.bare,
            announce_limits=args.announce,
        )
        async with server:
            print(f"stand-in judge listening on {server.url}", flush=True)
            print(f"  openai: {server.url}/v1  anthropic: {server.url}/v1  ollama: {server.url}", flush=True)
            print(f"  azure_openai: {server.url}  google_genai: {server.url}", flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
