"""The HTTP side of the platform API sources (:mod:`assay.connectors.api_source`): one JSON request
at a time, paced to a requests-per-minute limit, retried on 429 (waiting what ``Retry-After`` says;
up to :data:`MAX_RATE_LIMITED` times, apart from ``retries``), 5xx and connection errors (``retries``
times, backing off), and stopped at once on 401/403 (a wrong key does not get better).

A source reads its pages one after the other, so the pacing is a spacing of request starts
(``60 / rpm`` seconds apart; a 429's wait moves the next start too), not a pool.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Mapping
from typing import Any

import orjson

from assay.events import log_event
from assay.exceptions import ConnectorError

__all__ = ["MAX_RATE_LIMITED", "ApiClient", "ApiStats"]

#: 429s one request may meet before the source gives up (they slow it down, not its retries).
MAX_RATE_LIMITED = 50


class ApiStats:
    """What a source's client did: requests sent, 429s answered, retries."""

    def __init__(self) -> None:
        self.requests = 0
        self.rate_limited = 0
        self.retries = 0

    def to_dict(self) -> dict[str, int]:
        return {"requests": self.requests, "rate_limited": self.rate_limited, "retries": self.retries}


class ApiClient:
    """JSON over HTTP for one source (module docs). ``label`` names the source in errors;
    ``key_hint`` says where the key comes from (``LANGSMITH_API_KEY``), never the key."""

    def __init__(
        self,
        base_url: str,
        *,
        label: str,
        headers: Mapping[str, str] | None = None,
        rpm: float | None = None,
        retries: int = 6,
        timeout_s: float = 30.0,
        key_hint: str = "",
        max_wait_s: float = 120.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.label = label
        self.headers = dict(headers or {})
        self.interval = 60.0 / rpm if rpm else 0.0
        self.retries = retries
        self.timeout_s = timeout_s
        self.key_hint = key_hint
        self.max_wait_s = max_wait_s
        self.stats = ApiStats()
        self._next_at = 0.0
        self._session: Any = None

    async def __aenter__(self) -> ApiClient:
        import aiohttp

        self._session = aiohttp.ClientSession(headers=self.headers, timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def get(self, path: str, params: Mapping[str, Any] | list[tuple[str, str]] | None = None) -> Any:
        return await self.request("GET", path, params=params)

    async def post(self, path: str, body: Any) -> Any:
        return await self.request("POST", path, body=orjson.dumps(body))

    async def _pace(self) -> None:
        now = time.monotonic()
        wait = self._next_at - now
        if wait > 0:
            await asyncio.sleep(wait)
        self._next_at = max(now, self._next_at) + self.interval

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | list[tuple[str, str]] | None = None,
        body: bytes | None = None,
    ) -> Any:
        """The decoded JSON answer of a 2xx (module docs for the rest)."""
        import aiohttp

        assert self._session is not None, "ApiClient used outside 'async with'"
        url = self.base_url + path
        last = ""
        failures = limited = 0
        while True:
            await self._pace()
            self.stats.requests += 1
            wait: float | None = None
            try:
                headers = {"content-type": "application/json"} if body is not None else None
                async with self._session.request(method, url, params=params, data=body, headers=headers) as resp:
                    status = resp.status
                    raw = await resp.read()
                    retry_after = resp.headers.get("Retry-After")
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                status, raw, retry_after = 0, b"", None
                last = f"{type(exc).__name__}: {exc}"
            if 200 <= status < 300:
                try:
                    return orjson.loads(raw) if raw else None
                except orjson.JSONDecodeError as exc:
                    msg = f"source ({self.label}): {method} {url} answered text that is not JSON"
                    raise ConnectorError(msg) from exc
            if status in (401, 403):
                hint = f" (check {self.key_hint})" if self.key_hint else ""
                raise ConnectorError(f"source ({self.label}): {method} {url} answered {status} unauthorized{hint}")
            if status == 429:  # the platform's limit: waited out, not a failure (its own cap)
                self.stats.rate_limited += 1
                limited += 1
                if limited > MAX_RATE_LIMITED:
                    raise ConnectorError(
                        f"source ({self.label}): {method} {url} still rate limited after {limited} tries; "
                        "lower the source's rpm"
                    )
                wait = _seconds(retry_after)
                last = "429 rate limited"
                if wait is None:
                    wait = min(self.max_wait_s, self.interval or 1.0) * (1 + random.random())
            elif status >= 500 or status == 0:
                if status:
                    last = f"{status} {_text(raw)}"
                failures += 1
                if failures > self.retries:
                    raise ConnectorError(
                        f"source ({self.label}): {method} {url} failed after {self.retries} retries: {last}"
                    )
                wait = min(self.max_wait_s, 0.5 * 2 ** (failures - 1)) * (0.5 + random.random() / 2)
            else:
                raise ConnectorError(f"source ({self.label}): {method} {url} answered {status}: {_text(raw)}")
            wait = min(wait, self.max_wait_s)
            self.stats.retries += 1
            log_event(
                "source_retry",
                logging.WARNING,
                f"source ({self.label}): {last}; retrying in {wait:.1f}s",
                source=self.label,
                attempt=failures + limited,
            )
            self._next_at = max(self._next_at, time.monotonic() + wait)


def _seconds(value: str | None) -> float | None:
    """``Retry-After`` in seconds (a number; an HTTP date is not used by these platforms)."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _text(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").strip().replace("\n", " ")
    return text[:300] or "(empty body)"
