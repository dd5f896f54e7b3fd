"""One judge endpoint over HTTP: the :class:`~assay.judges.base.Judge` the evaluators call.

``complete(request)`` builds the provider's body, answers from the cache when it can, checks the
budget, then sends under the endpoint's limits with retries, and accounts tokens, cost, latency
and every failure kind in :attr:`JudgeEndpoint.stats`.

Failures are loud and cheap: a 401/403 raises :class:`~assay.exceptions.JudgeAuthError` (and every
later call fails at once), an endpoint that cannot be reached trips the
:class:`~assay.judges.guard.CircuitBreaker` (:class:`~assay.exceptions.JudgeUnavailableError`).
Nothing the provider sends back can hurt: replies are read streaming up to ``max_response_bytes``,
every configured secret is redacted from what is returned, raised and cached, and only answers
that carry a verdict are cached.

One aiohttp session per endpoint (connection pool as large as the in-flight cap can grow), created lazily inside
the running event loop and replaced when the loop changes. Inside ``async with endpoint`` (or a
:class:`~assay.judges.pool.JudgePool`) the session lives until the block ends; outside one (the
library's sync ``evaluate()``) it is closed as soon as the last call in flight finishes, so no
session outlives its loop.

>>> import anyio
>>> from assay.judges.base import JudgeRequest
>>> from assay.testing.judge_server import JudgeServer
>>> schema = {"type": "object", "properties": {"score": {"type": "boolean"}}}
>>> request = JudgeRequest([{"role": "user", "content": "Is 2+2 4?"}], schema=schema)
>>> async def demo():
...     async with JudgeServer() as server:
...         async with JudgeEndpoint("j", {"base_url": server.url + "/v1", "model": "m"}) as judge:
...             reply = await judge.complete(request)
...     return sorted(reply.data)
>>> anyio.run(demo)
['score']
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import sqlite3
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from assay.exceptions import (
    ConfigError,
    JudgeAuthError,
    JudgeError,
    JudgeRequestError,
    JudgeRetryableError,
)
from assay.judges.base import JudgeRequest, JudgeResponse, JudgeUsage
from assay.judges.budget import Budget
from assay.judges.cache import JudgeCache, cache_key
from assay.judges.config import JudgeConfig, parse_judge_config
from assay.judges.guard import CircuitBreaker, Secrets
from assay.judges.hedge import HedgePolicy
from assay.judges.pacing import Limits
from assay.judges.providers import get_provider_class
from assay.judges.retry import wait_for
from assay.judges.turns import FIRST, RETRY
from assay.judges.verdict import usable_answer
from assay.judges.warm import open_connections, warm_count
from assay.judges.wire import WireReply, estimate_input_tokens
from assay.resources import AsyncResource

if TYPE_CHECKING:
    import aiohttp
    from anyio.streams.memory import MemoryObjectSendStream
    from tenacity import RetryCallState

    from assay.judges.batch.api import BatchAPI

log = logging.getLogger(__name__)

#: A request refused with 429 is tried again up to this many times ``max_retries + 1`` (a 429 is
#: pacing, not a failure: it does not count against ``max_retries``).
RATE_LIMITED_BUDGET = 3
#: Output tokens assumed by estimates: a structured verdict, or a free-text answer.
EXPECTED_VERDICT_TOKENS = 200
EXPECTED_TEXT_TOKENS = 400
_LATENCY_SAMPLES = 20_000


@dataclass(slots=True)
class EndpointStats:
    """Counters of one endpoint (what ``pool.stats()`` and the run summary report)."""

    calls: int = 0
    """complete() calls that needed the network (cache misses)."""
    requests: int = 0
    """HTTP attempts sent (retries included)."""
    ok: int = 0
    errors: int = 0
    """Calls that failed for good (retries exhausted, or a 4xx)."""
    abandoned: int = 0
    """Calls cancelled unanswered because the run stopped (redone when it resumes)."""
    http_429: int = 0
    http_5xx: int = 0
    http_4xx: int = 0
    timeouts: int = 0
    connection_errors: int = 0
    retries: int = 0
    cached: int = 0
    budget_refusals: int = 0
    hedges: int = 0
    """Attempts sent again while the first copy was still unanswered (see assay/judges/hedge.py)."""
    usage: JudgeUsage = field(default_factory=JudgeUsage)
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=_LATENCY_SAMPLES))
    """Seconds from send to answer of successful attempts (the most recent 20,000)."""

    def percentile(self, q: float) -> float | None:
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    def to_dict(self) -> dict[str, Any]:
        p50, p99 = self.percentile(0.5), self.percentile(0.99)
        return {
            "calls": self.calls,
            "requests": self.requests,
            "ok": self.ok,
            "errors": self.errors,
            "abandoned": self.abandoned,
            "http_429": self.http_429,
            "http_5xx": self.http_5xx,
            "http_4xx": self.http_4xx,
            "timeouts": self.timeouts,
            "connection_errors": self.connection_errors,
            "retries": self.retries,
            "cached": self.cached,
            "budget_refusals": self.budget_refusals,
            "hedges": self.hedges,
            "input_tokens": self.usage.input_tokens,
            "output_tokens": self.usage.output_tokens,
            "cost_usd": round(self.usage.cost_usd, 8),
            "latency_p50_s": None if p50 is None else round(p50, 4),
            "latency_p99_s": None if p99 is None else round(p99, 4),
        }


class JudgeEndpoint(AsyncResource):
    """A named judge endpoint (implements :class:`~assay.judges.base.Judge`)."""

    def __init__(
        self,
        name: str,
        config: JudgeConfig | dict[str, Any],
        *,
        cache: JudgeCache | None = None,
        budget: Budget | None = None,
        secrets: Secrets | None = None,
    ) -> None:
        self.name = name
        self.config = parse_judge_config(name, config)
        self.cache = cache
        self.budget = budget
        self.stats = EndpointStats()
        self.secrets = secrets if secrets is not None else Secrets()
        """Every secret to redact (a pool shares one set between its endpoints)."""
        cfg = self.config
        self.provider = get_provider_class(cfg.provider)(cfg)
        """The provider's wire format, auth and retry policy (see assay/judges/providers/)."""
        self.limits = Limits(
            max_concurrency=cfg.max_concurrency,
            rps=cfg.requests_per_second(),
            tpm=cfg.tpm,
            adaptive=cfg.adaptive,
            limit_share=cfg.limit_share if cfg.announced_limits else 0.0,
        )
        if cfg.shared_limit is not None:
            from assay.judges.shared_limit import SharedRate

            scope = f"{cfg.resolved_base_url()}|{cfg.model}"
            self.limits.shared = SharedRate(cfg.shared_limit, name, rpm=cfg.rpm, tpm=cfg.tpm, scope=scope)
        self.breaker = CircuitBreaker(name, budget=cfg.max_retries + 1)
        self.hedge = HedgePolicy(cfg.timeout, enabled=cfg.hedge)
        self._auth_error: JudgeAuthError | None = None
        self._url = self.provider.url()
        self._api_key: str | None = None
        self._key_read = False
        self._headers: dict[str, str] = {}
        self._opened = False
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None
        self._session_users = 0
        self._warm: tuple[aiohttp.ClientSession, anyio.Event] | None = None

    def __repr__(self) -> str:
        cfg = self.config
        return (
            f"JudgeEndpoint(name={self.name!r}, provider={cfg.provider!r}, model={cfg.model!r}, "
            f"base_url={cfg.resolved_base_url()!r})"
        )

    # --- lifecycle -----------------------------------------------------------------------------

    async def open(self) -> None:
        """Read the API key and keep the HTTP session open until :meth:`aclose`."""
        self._read_key()
        self._opened = True

    async def aclose(self) -> None:
        self._opened = False
        if self.limits.shared is not None:
            await self.limits.shared.aclose()
        session, self._session = self._session, None
        if session is not None and not session.closed:
            with anyio.CancelScope(shield=True):
                await session.close()

    def _read_key(self) -> None:
        if self._key_read:
            return
        env = self.config.resolved_key_env()
        value = os.environ.get(env) if env else None
        if env and not value and self.config.api_key_env is not None:
            raise ConfigError(f"judges.{self.name}.api_key_env: environment variable {env} is not set (or empty)")
        self._api_key = value or None
        self.secrets.add(self._api_key)
        self._headers = self.provider.headers(self._api_key)
        self._key_read = True

    def batcher(self) -> BatchAPI:
        """The client of this judge's batch API, made by its provider with its key and secrets
        (ConfigError when the provider has none)."""
        self._read_key()
        return self.provider.batcher(self.name, self._api_key, self.secrets)

    def redact(self, text: str) -> str:
        """``text`` with every configured secret blanked out."""
        return self.secrets.redact(text)

    def _new_session(self) -> aiohttp.ClientSession:
        import aiohttp

        limit = self.limits.cap.ceiling
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=limit, limit_per_host=limit),
            timeout=aiohttp.ClientTimeout(total=self.config.timeout),
        )

    def _acquire_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            # A session bound to another (finished) loop cannot be used or awaited here: replace it.
            self._session = self._new_session()
            self._session_loop = loop
            self._session_users = 0
        self._session_users += 1
        return self._session

    async def _release_session(self, session: aiohttp.ClientSession) -> None:
        if session is not self._session:
            return
        self._session_users -= 1
        if not self._opened and self._session_users <= 0:
            self._session = None
            with anyio.CancelScope(shield=True):
                await session.close()

    # --- the Judge protocol --------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        """Calls in flight this endpoint can use at most (the ceiling of its in-flight cap): the
        engine keeps about twice as many traces in flight so the endpoint never idles."""
        return int(self.limits.cap.ceiling)

    def body_and_key(self, request: JudgeRequest) -> tuple[dict[str, Any], str]:
        """The body sent for ``request`` and its judge-cache key (a batch line's ``custom_id``)."""
        cfg = self.config
        body = self.provider.build_body(request)
        key = cache_key(
            cfg.provider, cfg.model, body, temperature=cfg.temperature, seed=cfg.seed, sample=request.sample
        )
        return body, key

    def estimate(self, request: JudgeRequest) -> JudgeUsage:
        """Estimated tokens and cost of one request, without calling (``--dry-run``)."""
        input_tokens = estimate_input_tokens(request)
        output_tokens = self._expected_output_tokens(request)
        return JudgeUsage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=self.config.cost(input_tokens, output_tokens),
            calls=1,
        )

    def _cost_ceiling(self, request: JudgeRequest, est: JudgeUsage) -> float | None:
        """What a call can cost at most when its output is capped (``max_tokens``): twice the
        estimated input (the estimate counts four characters a token) and the whole cap."""
        cap = request.max_tokens or self.config.max_tokens
        return self.config.cost(2 * est.input_tokens, cap) if cap else None

    def _expected_output_tokens(self, request: JudgeRequest) -> int:
        cap = request.max_tokens or self.config.max_tokens
        typical = EXPECTED_VERDICT_TOKENS if request.schema is not None else EXPECTED_TEXT_TOKENS
        return min(cap, typical) if cap else typical

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        """Answer one request: from the cache, or from the provider under limits and retries.

        Raises JudgeRequestError (a 4xx other than 429, or content the provider cannot take),
        JudgeError (retries exhausted, or a reply over ``max_response_bytes``), BudgetExceeded
        (the run's budget is spent), JudgeAuthError (401/403) or JudgeUnavailableError (the
        circuit breaker is open). The last two stop the run.
        """
        self._read_key()
        cfg = self.config
        body, cache_id = self.request_body(request)
        key = None
        if self.cache is not None:
            key = cache_id
            hit = await self._cache_get(key)
            if hit is not None and usable_answer(str(hit.get("text", "")), hit.get("data"), request.schema):
                return self.replay(hit)
        self._fail_fast()
        estimated = estimate_input_tokens(request) + self._expected_output_tokens(request)
        reserved = 0.0
        if self.budget is not None:
            try:
                est = self.estimate(request)
                reserved = await self.budget.acquire(self.name, est.cost_usd, self._cost_ceiling(request, est))
            except Exception:
                self.stats.budget_refusals += 1
                raise
        self.stats.calls += 1
        started = time.monotonic()
        try:
            reply, latency = await self._send_with_retries(body, estimated)
        except BaseException as exc:
            if self.budget is not None:
                self.budget.release(reserved)
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                self.stats.abandoned += 1  # the run stopped (a signal's grace ran out): no failure
            else:
                self.stats.errors += 1
            raise
        usage = JudgeUsage(
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            cost_usd=cfg.cost(reply.input_tokens, reply.output_tokens),
            calls=1,
        )
        self.stats.usage.add(usage)
        if self.budget is not None:
            self.budget.charge(usage.cost_usd, reserved)
        if key is not None and _has_verdict(reply, request):
            await self._cache_put(key, reply)
        return JudgeResponse(
            text=reply.text,
            data=reply.data,
            usage=usage,
            model=reply.model or cfg.model,
            cached=False,
            latency_s=latency if latency else time.monotonic() - started,
        )

    async def embed(self, texts: list[str], *, batch_size: int = 256) -> list[list[float]]:
        """Embed ``texts`` with the provider's embeddings API (``embedding_similarity`` with a
        hosted model): cached per text like judge answers, sent ``batch_size`` texts a request
        under the same rate limits, retries, budget and statistics as judge calls."""
        self._read_key()
        cfg, provider = self.config, self.provider
        url = provider.embeddings_url()
        vectors: dict[str, list[float]] = {}
        keys = {
            t: cache_key(cfg.provider, cfg.model, {"embeddings": t}, temperature=0.0, seed=None)
            for t in dict.fromkeys(texts)
        }
        if self.cache is not None:
            for text, key in keys.items():
                hit = await self._cache_get(key)
                if hit is not None and isinstance(hit.get("data"), dict):
                    vectors[text] = hit["data"]["embedding"]
                    self.stats.cached += 1
                    self.stats.usage.cached_calls += 1
        missing = [t for t in keys if t not in vectors]
        for start in range(0, len(missing), batch_size):
            chunk = missing[start : start + batch_size]
            self._fail_fast()
            estimated = sum(len(t) for t in chunk) // 4 + len(chunk)
            reserved = await self.budget.acquire(self.name, cfg.cost(estimated, 0)) if self.budget is not None else 0.0
            self.stats.calls += 1
            try:
                reply, _ = await self._send_with_retries(
                    provider.embeddings_body(chunk), estimated, url, provider.parse_embeddings_response
                )
            except BaseException as exc:
                if self.budget is not None:
                    self.budget.release(reserved)
                if isinstance(exc, anyio.get_cancelled_exc_class()):
                    self.stats.abandoned += 1
                else:
                    self.stats.errors += 1
                raise
            got = (reply.data or {}).get("embeddings") or []
            if len(got) != len(chunk):
                raise JudgeError(f"judge {self.name!r}: {len(got)} embeddings for {len(chunk)} texts")
            usage = JudgeUsage(input_tokens=reply.input_tokens, cost_usd=cfg.cost(reply.input_tokens, 0), calls=1)
            self.stats.usage.add(usage)
            if self.budget is not None:
                self.budget.charge(usage.cost_usd, reserved)
            for text, vector in zip(chunk, got, strict=True):
                vectors[text] = vector
                if self.cache is not None:
                    await self._cache_put(keys[text], WireReply("", {"embedding": vector}, 0, 0, reply.model))
        return [vectors[t] for t in texts]

    def request_body(self, request: JudgeRequest) -> tuple[dict[str, Any], str]:
        """:meth:`body_and_key`, its refusal counted as an error and named after this judge."""
        try:
            return self.body_and_key(request)
        except JudgeRequestError as exc:
            self.stats.errors += 1
            raise JudgeRequestError(f"judge {self.name!r}: {exc}") from exc

    def replay(self, hit: dict[str, Any]) -> JudgeResponse:
        """A cached answer as this call's response (counted as cached, costing nothing)."""
        self.stats.cached += 1
        self.stats.usage.cached_calls += 1
        return JudgeResponse(
            text=str(hit.get("text", "")),
            data=hit.get("data"),
            usage=JudgeUsage(cached_calls=1),
            model=str(hit.get("model", "")),
            cached=True,
        )

    async def _cache_get(self, key: str) -> dict[str, Any] | None:
        assert self.cache is not None
        try:
            return await self.cache.get(key)
        except sqlite3.Error as exc:  # a broken cache must not fail the run: call the judge instead
            log.warning("judge cache read failed (%s); calling the judge", exc)
            return None

    async def _cache_put(self, key: str, reply: WireReply) -> None:
        assert self.cache is not None
        try:
            await self.cache.put(key, reply.cache_value())
        except sqlite3.Error as exc:
            log.warning("judge cache write failed (%s)", exc)

    # --- transport -----------------------------------------------------------------------------

    async def _send_with_retries(
        self,
        body: dict[str, Any],
        estimated: int,
        url: str | None = None,
        parse: Callable[[Any], WireReply] | None = None,
    ) -> tuple[WireReply, float]:
        from tenacity import AsyncRetrying, retry_if_exception_type

        payload = orjson.dumps(body)
        attempts = self.config.max_retries + 1
        refused = 0

        def stop(state: RetryCallState) -> bool:
            # A 429 is the endpoint pacing us, not a failure of this request: refusals have a
            # budget of their own (RATE_LIMITED_BUDGET times the retries), so a slow convergence
            # to an unknown limit costs no row; every other failure counts against max_retries.
            nonlocal refused
            exc = state.outcome.exception() if state.outcome is not None else None
            if isinstance(exc, JudgeRetryableError) and exc.status == 429:
                refused += 1
            failed = state.attempt_number - refused
            return failed >= attempts or refused >= RATE_LIMITED_BUDGET * attempts

        retrying = AsyncRetrying(
            stop=stop,
            wait=wait_for,
            retry=retry_if_exception_type(JudgeRetryableError),
            sleep=anyio.sleep,
            before_sleep=self._count_retry,
            reraise=True,
        )
        result: tuple[WireReply, float] | None = None
        try:
            async for attempt in retrying:
                with attempt:
                    first = attempt.retry_state.attempt_number == 1
                    result = await self._hedged(payload, estimated, url, parse, FIRST if first else RETRY)
        except JudgeRetryableError as exc:
            self.breaker.check()  # an outage: one error for the run, not one per trace
            tries = f"{retrying.statistics.get('attempt_number', attempts)} attempt(s)"
            if refused:
                tries += f", {refused} of them refused with 429"
            raise JudgeError(f"judge {self.name!r}: gave up after {tries}; last error: {exc}") from exc
        assert result is not None
        return result

    async def _hedged(
        self,
        payload: bytes,
        estimated: int,
        url: str | None,
        parse: Callable[[Any], WireReply] | None,
        priority: int = FIRST,
    ) -> tuple[WireReply, float]:
        """One attempt, sent a second time when it is still unanswered :meth:`HedgePolicy.delay`
        after it left (a hung request): the first outcome wins, answer or error, and the other
        copy is cancelled (an error is retried by the caller at once, with a new hedge)."""
        send, recv = anyio.create_memory_object_stream[tuple[WireReply, float] | Exception](2)
        sent = anyio.Event()
        outcome: tuple[WireReply, float] | Exception | None = None
        with send, recv:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._attempt_into, send.clone(), sent, payload, estimated, url, parse, priority)
                await sent.wait()  # the hedge delay counts from the send, not from the queue for a slot
                self.hedge.earn()  # per send, not per call: calls queued at the start earn nothing yet
                delay = self.hedge.delay()  # known by now even when the call came before any answer
                with anyio.move_on_after(math.inf if delay is None else delay):
                    outcome = await recv.receive()
                if outcome is None:
                    hedged = self.hedge.allow()
                    if hedged:
                        self.stats.hedges += 1
                        copy = anyio.Event()
                        tg.start_soon(self._attempt_into, send.clone(), copy, payload, estimated, url, parse, RETRY)
                    # the first outcome decides: an error of either copy is retried at once (the
                    # other is cancelled), not after the hung copy's timeout
                    outcome = await recv.receive()
                tg.cancel_scope.cancel()  # the copy still open, if any
        assert outcome is not None
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def _attempt_into(
        self,
        send: MemoryObjectSendStream[tuple[WireReply, float] | Exception],
        sent: anyio.Event,
        payload: bytes,
        estimated: int,
        url: str | None,
        parse: Callable[[Any], WireReply] | None,
        priority: int,
    ) -> None:
        """:meth:`_attempt`, its answer or error put into ``send``; ``sent`` is set once it left."""
        with send:
            try:
                result: tuple[WireReply, float] | Exception = await self._attempt(
                    payload, estimated, url, parse, sent, priority
                )
            except Exception as exc:  # handed to the waiting call, which raises it
                result = exc
            finally:
                sent.set()
            await send.send(result)

    def _count_retry(self, state: RetryCallState) -> None:
        self.stats.retries += 1

    def _fail_fast(self) -> None:
        """Raise at once when the endpoint already proved it cannot answer (bad key, outage)."""
        if self._auth_error is not None:
            raise self._auth_error
        self.breaker.check()

    async def _attempt(
        self,
        payload: bytes,
        estimated: int,
        url: str | None = None,
        parse: Callable[[Any], WireReply] | None = None,
        sent: anyio.Event | None = None,
        priority: int = FIRST,
    ) -> tuple[WireReply, float]:
        import aiohttp

        self._fail_fast()
        session = self._acquire_session()
        try:
            await self._warm_up(session)
            async with self.limits.slot(estimated, priority) as sent_at:
                self._fail_fast()  # the breaker may have opened while this call waited its turn
                self.stats.requests += 1
                if sent is not None:
                    sent.set()
                try:
                    async with session.post(url or self._url, data=payload, headers=self._headers) as resp:
                        status = resp.status
                        headers = resp.headers
                        raw, too_large = await self._read_capped(resp)
                except TimeoutError as exc:
                    self.stats.timeouts += 1
                    reason = f"judge {self.name!r}: no answer within {self.config.timeout}s"
                    self.breaker.failure(reason)
                    raise JudgeRetryableError(reason) from exc
                except aiohttp.ClientError as exc:
                    self.stats.connection_errors += 1
                    reason = self.redact(f"judge {self.name!r}: connection error: {type(exc).__name__}: {exc}")
                    self.breaker.failure(reason)
                    raise JudgeRetryableError(reason) from exc
                latency = time.monotonic() - sent_at
                provider = self.provider
                if self.limits.limit_share and (rpm := provider.announced_rpm(headers)) is not None:
                    self.limits.announce(rpm)
                out_of_quota = provider.is_out_of_quota(status, raw)
                if status == 429:
                    self.stats.http_429 += 1
                if provider.is_rate_limited(status, raw):
                    self.breaker.success()
                    hint = provider.retry_after(headers, raw)
                    wait = self.limits.on_rate_limited(sent_at=sent_at, delay=hint)
                    raise JudgeRetryableError(self._failure_text(status, raw), status=429, retry_after=wait)
                self.limits.on_answer(latency, sent_at)
        finally:
            await self._release_session(session)
        if status >= 500:
            self.stats.http_5xx += 1
            self.breaker.failure(self._failure_text(status, raw), answered=True)
        else:
            self.breaker.success()
        auth_failure = provider.is_auth_failure(status, raw)
        if auth_failure or out_of_quota:  # the key or the account: every later call fails too
            if not out_of_quota:
                self.stats.http_4xx += 1
            if self._auth_error is None:
                key = self.config.resolved_key_env() or "the endpoint config"
                why = f"the account behind {key} is out of quota" if out_of_quota else f"check the key in {key}"
                self._auth_error = JudgeAuthError(f"{self._failure_text(status, raw)} ({why}); the run stops")
            raise self._auth_error
        if status >= 400:
            if provider.should_retry(status, raw):
                raise JudgeRetryableError(self._failure_text(status, raw), status=status)
            self.stats.http_4xx += 1
            raise JudgeRequestError(self._failure_text(status, raw))
        if too_large:
            raise JudgeError(
                f"judge {self.name!r}: the reply is larger than max_response_bytes "
                f"({self.config.max_response_bytes} bytes); not read further"
            )
        try:
            reply = (parse or provider.parse_response)(orjson.loads(raw))
        except orjson.JSONDecodeError as exc:
            raise JudgeRetryableError(
                self.redact(f"judge {self.name!r}: HTTP {status} with a body that is not JSON: {raw[:200]!r}")
            ) from exc
        except JudgeRequestError as exc:
            raise JudgeRequestError(self.redact(f"judge {self.name!r}: {exc}")) from exc
        if self.secrets:
            reply.text = self.secrets.redact(reply.text)
            reply.data = self.secrets.redact_value(reply.data)
        self.stats.ok += 1
        self.stats.latencies.append(latency)
        self.hedge.observe(latency)
        self.limits.settle_tokens(estimated, reply.input_tokens + reply.output_tokens)
        return reply, latency

    async def _warm_up(self, session: aiohttp.ClientSession) -> None:
        """Before a paced endpoint's first request, open the connections its first second needs
        (see :mod:`assay.judges.warm`); the other first callers wait for it. Once per endpoint:
        the library's sync face runs each call on a new event loop, hence a new session, and one
        call needs no more than one connection."""
        warm = self._warm
        if warm is not None:
            if warm[0] is session:
                await warm[1].wait()
            return
        done = anyio.Event()
        self._warm = (session, done)
        try:
            count = warm_count(self.limits.configured_rps, self.limits.cap.value)
            if count is not None:
                await open_connections(session, self._url, count)
        finally:
            done.set()

    async def _read_capped(self, resp: aiohttp.ClientResponse) -> tuple[bytes, bool]:
        """The body, read in chunks up to ``max_response_bytes``; (what was read, whether it was cut)."""
        cap = self.config.max_response_bytes
        if resp.content_length is not None and resp.content_length > cap:
            return b"", True
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_chunked(64 * 1024):
            size += len(chunk)
            if size > cap:
                return b"".join(chunks)[:4096], True
            chunks.append(chunk)
        return b"".join(chunks), False

    def _failure_text(self, status: int, raw: bytes) -> str:
        text = raw.decode("utf-8", errors="replace")
        try:
            payload: Any = orjson.loads(raw)
        except orjson.JSONDecodeError:
            payload = None
        message = self.provider.error_message(payload, text)[:2000]
        return self.redact(f"judge {self.name!r}: HTTP {status}: {message}")

    def snapshot(self) -> dict[str, Any]:
        """Counters, usage, latency percentiles and the current adaptive rate."""
        cfg = self.config
        return {
            "provider": cfg.provider,
            "model": cfg.model,
            **self.stats.to_dict(),
            **self.limits.snapshot(),
        }


def _has_verdict(reply: WireReply, request: JudgeRequest) -> bool:
    """Whether an answer is worth caching: an object that fits the schema asked for (one without
    its score is asked again next time, never replayed), any text otherwise."""
    return usable_answer(reply.text, reply.data, request.schema)
