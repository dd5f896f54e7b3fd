"""Kafka connectors without a broker: which partitions ``assignment: manual`` reads (per shard), the
timeouts handed to aiokafka, and the sink handing complete (closed) record batches to the producer."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

pytest.importorskip("aiokafka")

from aiokafka import TopicPartition

from assay.connectors.kafka import KafkaSinkConfig, KafkaSourceConfig, client_kwargs
from assay.connectors.kafka_sink import KafkaSink
from assay.connectors.kafka_source import KafkaSource

PARTITIONS = {"a": 3, "b": 2, "__consumer_offsets": 50, "other": 1}


class FakeConsumer:
    """The two metadata calls ``_manual_partitions`` makes."""

    async def topics(self) -> set[str]:
        return set(PARTITIONS)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        n = PARTITIONS.get(topic)
        return None if n is None else set(range(n))


def manual(shard: tuple[int, int] | None = None, **kw: Any) -> list[tuple[str, int]]:
    cfg = KafkaSourceConfig(bootstrap_servers="b:9092", group_id="g", assignment="manual", **kw)
    source = KafkaSource(cfg, shard=shard)
    tps: list[TopicPartition] = anyio.run(source._manual_partitions, FakeConsumer())
    return [(tp.topic, tp.partition) for tp in tps]


def test_manual_assignment_reads_every_partition_of_the_topics() -> None:
    assert manual(topics=["b", "a"]) == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]


def test_a_pattern_matches_topics_at_open_without_internal_ones() -> None:
    assert manual(topic_pattern=".*") == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("other", 0)]


def test_shards_split_the_partitions_disjointly_and_completely() -> None:
    every = manual(topics=["a", "b"])
    for n in (1, 2, 3, 7):
        parts = [manual((i, n), topics=["a", "b"]) for i in range(n)]
        assert sorted(tp for part in parts for tp in part) == sorted(every), n
        assert max(map(len, parts)) - min(map(len, parts)) <= 1, n  # balanced across topics


def test_group_is_the_default_and_timeouts_reach_the_client() -> None:
    cfg = KafkaSourceConfig(bootstrap_servers="b:9092", topics=["t"], group_id="g")
    assert cfg.assignment == "group" and cfg.rebalance_timeout_ms is None
    assert client_kwargs(cfg)["request_timeout_ms"] == 40_000
    long = cfg.model_copy(update={"rebalance_timeout_ms": 120_000})
    # the broker may hold a JoinGroup for up to the rebalance timeout: the request must outlast it
    assert client_kwargs(long)["request_timeout_ms"] == 130_000
    assert client_kwargs(KafkaSinkConfig(bootstrap_servers="b:9092", topic="t"))["request_timeout_ms"] == 40_000


class FakeProducer:
    """Records what ``send_batch`` receives; batches are aiokafka's real BatchBuilder."""

    def __init__(self) -> None:
        from aiokafka.producer.message_accumulator import BatchBuilder

        self.builder = BatchBuilder
        self.sent: list[tuple[int, int, bool]] = []  # partition, records, closed

    async def partitions_for(self, topic: str) -> set[int]:
        return {0, 1, 2}

    def create_batch(self) -> Any:
        return self.builder(600, 0)

    async def send_batch(self, batch: Any, topic: str, *, partition: int) -> Any:
        self.sent.append((partition, batch.record_count(), batch.closed()))
        fut: anyio.Event = anyio.Event()
        return fut


def test_sink_hands_over_closed_batches_so_the_producer_does_not_linger() -> None:
    sink = KafkaSink(KafkaSinkConfig(bootstrap_servers="b:9092", topic="scores"))
    producer = FakeProducer()
    sink._producer = producer  # type: ignore[assignment]
    rows = [b'{"trace_id": "t%d", "score": 1.0}' % i for i in range(40)]
    anyio.run(sink.write_batch, rows, [f"t{i}" for i in range(40)])
    assert producer.sent and all(closed for _, _, closed in producer.sent)
    assert sum(n for _, n, _ in producer.sent) == 40
    assert len(producer.sent) > 3  # 600-byte batches: full ones are sent on the way


def test_a_run_that_owns_its_output_takes_a_fixed_share_and_resumes_from_its_checkpoint() -> None:
    """Issue 17: writers of a run writing files/S3 never rebalance among themselves (each reads a
    fixed share, as with ``assignment: manual``), and the offsets their checkpoints hold, merged
    per partition across any number of writers, are where a resume starts."""
    from assay.connectors.kafka import CONNECTOR, offsets_state, resume_offsets
    from assay.connectors.registry import SourceContext

    cfg = KafkaSourceConfig(bootstrap_servers="localhost:1", topics=["a"], group_id="g")
    state = offsets_state({("a", 0): 10, ("a", 2): 7})
    owned = CONNECTOR.build_source(cfg, SourceContext(shard=(1, 3), resume_state=state, owns_input=True))
    assert owned.fixed_share and owned._static and owned._resume == {("a", 0): 10, ("a", 2): 7}
    shared = CONNECTOR.build_source(cfg, SourceContext(shard=(1, 3), resume_state=state))
    assert not shared._static and shared._resume == {}  # group members: the committed offsets decide
    assert shared.snapshot() is None

    # before reading anything, a writer's snapshot keeps the resume offsets (it does not read them all)
    assert resume_offsets(owned.snapshot()) == {("a", 0): 10, ("a", 2): 7}
    owned._watermarks.start("a", 1, 4)
    owned._watermarks.ack("a", 1, 4)
    owned._watermarks.ack("a", 1, 6)  # not contiguous: 5 is not durable yet
    assert resume_offsets(owned.snapshot()) == {("a", 0): 10, ("a", 1): 5, ("a", 2): 7}

    merged = CONNECTOR.merge_resume_states(
        [offsets_state({("a", 0): 10, ("a", 1): 3}), None, offsets_state({("a", 1): 5, ("a", 2): 7}), {"offsets": []}]
    )
    assert resume_offsets(merged) == {("a", 0): 10, ("a", 1): 5, ("a", 2): 7}
    assert CONNECTOR.merge_resume_states([None, None]) is None


def test_a_start_over_reads_again_from_where_the_run_began() -> None:
    """``--fresh`` (or a changed run file) in the middle of a run over a Kafka source: its records
    read so far are committed to the group, so the start-over seeks back to the run's origin."""
    from assay.connectors import registry
    from assay.connectors.kafka import CONNECTOR, offsets_state, resume_offsets

    cfg = KafkaSourceConfig(bootstrap_servers="localhost:1", topics=["a"], group_id="g")
    a = offsets_state({("a", 0): 50, ("a", 1): 9}, {("a", 0): 20, ("a", 1): 4})
    b = offsets_state({("a", 1): 30}, {("a", 1): 9})  # a later attempt resumed p1 at 9
    merged = CONNECTOR.merge_resume_states([a, b])
    assert resume_offsets(merged) == {("a", 0): 50, ("a", 1): 30}
    assert resume_offsets(merged, "origin") == {("a", 0): 20, ("a", 1): 4}
    restart = registry.restart_state(cfg, [a, None, b])
    assert resume_offsets(restart) == resume_offsets(restart, "origin") == {("a", 0): 20, ("a", 1): 4}
    assert registry.restart_state(cfg, [None]) is None
    # a source that can be read again from the start begins there, without merging its states
    from assay.connectors.path_config import SourceConfig

    assert registry.restart_state(SourceConfig(path="x.jsonl"), [{"x": 1}, {"y": 2}]) is None


def test_offsets_written_beyond_a_gap_survive_snapshots_merges_and_resumes_but_not_a_start_over() -> None:
    """Issue 26: batches finish out of order, so a checkpoint holds rows beyond the contiguous
    prefix (``done``). Every writer's snapshot keeps them (also for partitions it does not read),
    merges keep every writer's, a resume pre-acknowledges them (the prefix moves past them once the
    gap is written), and a start-over, which removes the rows, forgets them."""
    from assay.connectors import registry
    from assay.connectors.kafka import CONNECTOR, offsets_state, resume_done, resume_offsets
    from assay.connectors.registry import SourceContext

    cfg = KafkaSourceConfig(bootstrap_servers="localhost:1", topics=["a"], group_id="g")
    first = CONNECTOR.build_source(cfg, SourceContext(resume_state=None, owns_input=True))
    first._watermarks.start("a", 0, 0)
    for o in [*range(25, 153), 0, 1]:  # 2-24 still being judged
        first._watermarks.ack("a", 0, o)
    state = first.snapshot()
    assert resume_offsets(state) == {("a", 0): 2} and resume_done(state) == {("a", 0): list(range(25, 153))}
    assert state["done"] == [["a", 0, [[25, 153]]]]  # ranges, not every offset

    # two writers of a resume: the one that does not read partition 0 keeps its done offsets too
    other = CONNECTOR.build_source(cfg, SourceContext(shard=(1, 2), resume_state=state, owns_input=True))
    assert resume_done(other.snapshot()) == {("a", 0): list(range(25, 153))}
    reader = CONNECTOR.build_source(cfg, SourceContext(shard=(0, 2), resume_state=state, owns_input=True))
    reader._watermarks.start("a", 0, 2, reader._resume_done[("a", 0)], committed=False)
    assert reader._watermarks.is_done("a", 0, 30) and not reader._watermarks.is_done("a", 0, 2)
    assert reader._watermarks.committable() == {("a", 0): 2}  # the group gets the checkpoint's offset
    for o in range(2, 25):
        reader._watermarks.ack("a", 0, o)
    assert resume_offsets(reader.snapshot()) == {("a", 0): 153} and "done" not in reader.snapshot()

    merged = CONNECTOR.merge_resume_states([other.snapshot(), state, offsets_state({("a", 1): 7})])
    assert resume_offsets(merged) == {("a", 0): 2, ("a", 1): 7}
    assert resume_done(merged) == {("a", 0): list(range(25, 153))}
    assert resume_done(CONNECTOR.merge_resume_states([merged, reader.snapshot()])) == {}  # the prefix passed them
    assert resume_done(registry.restart_state(cfg, [merged])) == {}


def test_the_same_command_again_beside_a_whole_output_continues_from_the_group() -> None:
    """A rerun beside the whole output it completed starts at the group's committed offsets
    whatever ``start`` says (``rerun_state``), and keeps doing so through merges and start-overs."""
    from assay.connectors import registry
    from assay.connectors.kafka import CONNECTOR, continues, offsets_state
    from assay.connectors.registry import SourceContext

    cfg = KafkaSourceConfig(bootstrap_servers="localhost:1", topics=["a"], group_id="g", start="earliest")
    state = registry.rerun_state(cfg)
    assert continues(state)
    source = CONNECTOR.build_source(cfg, SourceContext(resume_state=state, owns_input=True))
    assert source._continue and continues(source.snapshot())
    assert continues(CONNECTOR.merge_resume_states([offsets_state({("a", 0): 3}), state]))
    assert continues(registry.restart_state(cfg, [state]))
    assert not continues(registry.restart_state(cfg, [offsets_state({("a", 0): 3}, {("a", 0): 0})]))
