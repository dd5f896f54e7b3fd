"""What the strict platform stand-ins share (:mod:`assay.testing.langsmith_server`,
:mod:`assay.testing.langfuse_server`, :mod:`assay.testing.otlp_receiver`): counters, scripted
429s with ``Retry-After``, an optional requests-per-minute window, and an aiohttp app that
serves the routes under every prefix a client may use."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from assay.testing.judge_server import SlidingWindow
from assay.testing.threaded import LoopbackServer

__all__ = ["PlatformServer", "PlatformStats"]


@dataclass
class PlatformStats:
    """What a stand-in saw."""

    requests: int = 0
    """Write requests answered (any status)."""
    items: int = 0
    """Items received in write requests (before de-duplication)."""
    duplicates: int = 0
    """Items whose id the server held already (a client that pushed twice)."""
    rate_limited: int = 0
    unauthorized: int = 0
    rejected: int = 0
    """Items refused one by one (unknown trace, invalid field)."""
    invalid: int = 0
    """Requests refused as a whole (400/413/422)."""
    reads: int = 0
    """Read requests answered (any status): the API sources' listings and fetches."""
    read_rate_limited: int = 0
    log: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "log"}


class PlatformServer(LoopbackServer):
    """A stand-in for a platform's write API.

    ``rate_limit_first``: answer the first N write requests 429 with ``Retry-After: retry_after``;
    ``rpm``: refuse write requests above this rate (a sliding one-second window of ``rpm/60``),
    answering 429 with the time to wait; ``fail_first``: answer the first N write requests 503.
    Reads have their own: ``read_rate_limit_first`` (429s) and ``read_fail_first`` (503s) count
    down over read requests, ``read_rpm`` limits their rate (:meth:`read_gate`)."""

    def __init__(
        self,
        *,
        rpm: float | None = None,
        rate_limit_first: int = 0,
        retry_after: float = 0.2,
        fail_first: int = 0,
        read_rpm: float | None = None,
        read_rate_limit_first: int = 0,
        read_fail_first: int = 0,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(host, port)
        self.stats = PlatformStats()
        self.rate_limit_first = rate_limit_first
        self.retry_after = retry_after
        self.fail_first = fail_first
        self._window = SlidingWindow(rpm / 60.0) if rpm else None
        self.read_rate_limit_first = read_rate_limit_first
        self.read_fail_first = read_fail_first
        self._read_window = SlidingWindow(read_rpm / 60.0) if read_rpm else None
        self.lock = asyncio.Lock()

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        self.add_routes(app)
        await self.serve(app)

    def add_routes(self, app: web.Application) -> None:
        raise NotImplementedError

    def gate(self) -> web.Response | None:
        """429/503 for a write request when the script or the rate says so."""
        self.stats.requests += 1
        if self.fail_first > 0:
            self.fail_first -= 1
            return web.json_response({"error": "unavailable"}, status=503)
        if self.rate_limit_first > 0:
            self.rate_limit_first -= 1
            self.stats.rate_limited += 1
            return web.json_response(
                {"error": "rate limited"}, status=429, headers={"Retry-After": f"{self.retry_after:g}"}
            )
        if self._window is not None:
            wait = self._window.take()
            if wait > 0:
                self.stats.rate_limited += 1
                return web.json_response({"error": "rate limited"}, status=429, headers={"Retry-After": f"{wait:.3f}"})
        return None

    def read_gate(self) -> web.Response | None:
        """429/503 for a read request when the script or the read rate says so."""
        self.stats.reads += 1
        if self.read_fail_first > 0:
            self.read_fail_first -= 1
            return web.json_response({"error": "unavailable"}, status=503)
        wait = 0.0
        if self.read_rate_limit_first > 0:
            self.read_rate_limit_first -= 1
            wait = self.retry_after
        elif self._read_window is not None:
            wait = self._read_window.take()
        if wait > 0:
            self.stats.read_rate_limited += 1
            return web.json_response({"error": "rate limited"}, status=429, headers={"Retry-After": f"{wait:.3f}"})
        return None

    def refuse_auth(self) -> web.Response:
        self.stats.unauthorized += 1
        return web.json_response({"error": "unauthorized"}, status=401)
