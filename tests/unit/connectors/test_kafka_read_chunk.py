"""The Kafka source widens its consumer's socket reads (asyncio's 256 KiB a turn starved the
pipeline while batches were scored); a transport without ``max_size`` (TLS) is left alone."""

from __future__ import annotations

import asyncio
import socket
from types import SimpleNamespace
from typing import Any

from assay.connectors.kafka_source import READ_CHUNK, _widen_reads


def test_widen_reads_sets_plain_transports_and_leaves_others() -> None:
    async def main() -> None:
        a, b = socket.socketpair()
        try:
            loop = asyncio.get_running_loop()
            transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, a)
            assert transport.max_size < READ_CHUNK  # type: ignore[attr-defined]
            tls_like = SimpleNamespace()  # no max_size: not touched
            conns: dict[Any, Any] = {
                "plain": SimpleNamespace(_writer=SimpleNamespace(transport=transport)),
                "tls": SimpleNamespace(_writer=SimpleNamespace(transport=tls_like)),
                "closed": SimpleNamespace(_writer=None),
            }
            consumer: Any = SimpleNamespace(_client=SimpleNamespace(_conns=conns))
            _widen_reads(consumer)
            assert transport.max_size == READ_CHUNK  # type: ignore[attr-defined]
            assert not hasattr(tls_like, "max_size")
            _widen_reads(SimpleNamespace())  # a consumer not started yet: nothing to do
            transport.close()
        finally:
            b.close()

    asyncio.run(main())
