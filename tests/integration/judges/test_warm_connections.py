"""Connections opened before a paced run's first request (assay.judges.warm): real sockets on
loopback, counts only."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import aiohttp
import anyio
import pytest

from assay.judges import JudgeEndpoint, JudgeRequest
from assay.judges.warm import open_connections, warm_count
from assay.testing.judge_server import JudgeServer


class CountingServer:
    """A TCP server on loopback that counts the connections it accepts and the bytes it receives."""

    def __init__(self) -> None:
        self.accepted = 0
        self.received = 0
        self.url = ""

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        while chunk := await reader.read(4096):
            self.received += len(chunk)
        writer.close()

    async def __aenter__(self) -> CountingServer:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1/chat/completions"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()


def test_connections_are_opened_into_the_pool_without_a_request() -> None:
    async def go() -> tuple[int, int, int]:
        async with CountingServer() as server, aiohttp.ClientSession() as session:
            opened = await open_connections(session, server.url, 5)
            for _ in range(50):  # the server's accept callbacks run on later turns of the loop
                if server.accepted >= 5:
                    break
                await asyncio.sleep(0.01)
            return opened, server.accepted, server.received

    opened, accepted, received = anyio.run(go)
    assert opened == 5 and accepted == 5
    assert received == 0  # no HTTP request: the server's rate limit is not touched


def test_an_unreachable_endpoint_is_left_to_the_first_request() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there

    async def go() -> int:
        async with aiohttp.ClientSession() as session:
            return await open_connections(session, f"http://127.0.0.1:{port}/v1", 3)

    assert anyio.run(go) == 0


def test_a_paced_endpoint_reuses_the_connections_it_opened_first() -> None:
    """rpm set: the first requests go over connections opened before the first of them (their
    number is warm_count's), and the warm-up itself sends no request."""

    async def rule(body: dict[str, Any]) -> dict[str, Any]:
        return {"score": True}

    async def go() -> tuple[int, int, int | None]:
        async with JudgeServer(rule=rule) as server:
            cfg = {"base_url": server.url + "/v1", "model": "m", "rpm": 600, "api_key_env": None}
            async with JudgeEndpoint("j", cfg) as judge:
                expected = warm_count(judge.limits.configured_rps, judge.limits.cap.value)
                await judge.complete(JudgeRequest([{"role": "user", "content": "Is 2+2=4?"}]))
                session = judge._session
                assert session is not None and session.connector is not None
                idle = sum(len(conns) for conns in session.connector._conns.values())
                return server.stats.requests, idle, expected

    requests, idle, expected = anyio.run(go)
    assert requests == 1
    assert expected == 7  # 10 req/s: rate x 0.5 s + 2
    assert idle == expected  # every connection opened ahead is open and idle, the answered one too


def test_the_warm_up_happens_once_per_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """The library's sync face runs each call on a new event loop, hence a new session: only the
    endpoint's first session opens connections ahead (one call needs one connection)."""
    import assay.judges.endpoint as endpoint_module

    counts: list[int] = []
    real = endpoint_module.open_connections

    async def counted(session: aiohttp.ClientSession, url: str, count: int) -> int:
        counts.append(count)
        return await real(session, url, count)

    monkeypatch.setattr(endpoint_module, "open_connections", counted)

    async def go() -> int:
        async with JudgeServer() as server:
            cfg = {"base_url": server.url + "/v1", "model": "m", "rpm": 600, "api_key_env": None}
            async with JudgeEndpoint("j", cfg) as judge:
                for i in range(3):
                    await judge.complete(JudgeRequest([{"role": "user", "content": f"Is {i}+{i}={2 * i}?"}]))
                    old, judge._session = judge._session, None  # as a call on a new event loop finds it
                    assert old is not None
                    await old.close()
            return server.stats.requests

    assert anyio.run(go) == 3
    assert counts == [7]
