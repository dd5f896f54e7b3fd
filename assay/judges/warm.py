"""Connections opened before a paced run's first request.

A strict limiter measures the time between the requests it receives. The first requests of a
run each open a new connection (nothing is in flight yet to reuse), and a new connection's first
request reaches the server later than one on an open connection: the server accepts it and builds
its protocol first (measured against the stand-in at 30 req/s: the first request 13–50 ms late,
the next one, on time, refused for coming too soon after it; 5–8 refusals in the first second).
Opening the connections the first second will need before the first send makes those requests
arrive on time. No HTTP request is sent: the server's rate limit is not touched.

>>> warm_count(rate=30.0, cap=92)
17
>>> warm_count(rate=None, cap=16) is None
True
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    import aiohttp

#: The requests in flight while the first answers are awaited are about rate × this (seconds).
WARM_LATENCY_S = 0.5
#: At most this many connections are opened ahead (a few are always enough for the first answers
#: to come back; the pool grows from there as it would have).
WARM_MAX = 32
#: How long the warm-up may delay the first request (an unreachable endpoint is then reported by
#: the request itself).
WARM_TIMEOUT_S = 2.0


def warm_count(rate: float | None, cap: int) -> int | None:
    """Connections to open ahead for a configured ``rate`` (requests/s) under the in-flight ``cap``;
    None: no warm-up (no rate configured, nothing is paced)."""
    if rate is None:
        return None
    return max(1, min(cap, math.ceil(rate * WARM_LATENCY_S) + 2, WARM_MAX))


async def open_connections(session: aiohttp.ClientSession, url: str, count: int) -> int:
    """Open ``count`` connections to ``url``'s host in ``session``'s pool (returns how many were
    opened). Failures are left to the first request to report."""
    import aiohttp
    from yarl import URL

    connector = session.connector
    if connector is None:
        return 0
    loop = asyncio.get_running_loop()
    target = URL(url)
    opened: list[aiohttp.connector.Connection] = []

    async def one() -> None:
        with contextlib.suppress(Exception):
            request = aiohttp.ClientRequest("POST", target, loop=loop)
            opened.append(await connector.connect(request, [], aiohttp.ClientTimeout(total=WARM_TIMEOUT_S)))

    try:
        with anyio.move_on_after(WARM_TIMEOUT_S):
            async with anyio.create_task_group() as tg:
                for _ in range(count):
                    tg.start_soon(one)
    finally:
        for connection in opened:
            connection.release()  # back into the pool, open and idle
    return len(opened)
