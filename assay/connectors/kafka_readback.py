"""Reading a results topic back (what ``assay push`` does with a Kafka sink's output): every message
of every partition from the earliest offset up to the end each partition had when the read
started, without a consumer group (nothing committed, no other consumer disturbed).

The end is the high watermark the fetch responses report (the offset after the last message):
ListOffsets answers differ between brokers (tansu answers the last batch's base offset), the
fetch's high watermark does not. A partition is done once the consumer's position reaches the
high watermark it first saw; messages produced after that are not read (a later push reads them).
A partition no fetch has reported on for a few seconds is taken as empty only when ListOffsets
says it is (its end 0).

:func:`iter_topic_values` is a plain iterator for a caller on a worker thread (the push reads rows
that way): the consumer runs on an event loop of its own in a daemon thread and hands the values
over through a bounded queue, so memory holds a few thousand messages at most.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

from assay.connectors.kafka_config import KafkaConnection, client_kwargs, require_aiokafka, unreachable
from assay.exceptions import ConnectorError

__all__ = ["iter_topic_values"]

_END = object()
QUEUE_MESSAGES = 4096
#: How long a fetch waits for data before the partitions' positions are looked at.
POLL_MS = 300


def iter_topic_values(cfg: KafkaConnection, topic: str, *, deadline_s: float = 600.0) -> Iterator[bytes]:
    """The values of ``topic``'s messages, partition by partition as they are fetched (module docs)."""
    require_aiokafka()
    out: queue.Queue[Any] = queue.Queue(QUEUE_MESSAGES)
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    async def consume() -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(enable_auto_commit=False, auto_offset_reset="earliest", **client_kwargs(cfg))
        try:
            await asyncio.wait_for(consumer.start(), cfg.connect_timeout_s)
        except (TimeoutError, OSError, Exception) as exc:  # aiokafka raises its own KafkaError kinds
            await consumer.stop()
            raise unreachable(cfg, f"reading {topic} back", exc) from exc
        try:
            parts = consumer.partitions_for_topic(topic)
            for _ in range(50):
                if parts:
                    break
                await consumer.topics()  # refreshes the metadata
                parts = consumer.partitions_for_topic(topic)
                await asyncio.sleep(0.1)
            if not parts:
                raise ConnectorError(f"kafka: topic {topic!r} does not exist (nothing to read back)")
            tps = [TopicPartition(topic, p) for p in sorted(parts)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            ends: dict[Any, int] = {}
            limit = time.monotonic() + deadline_s
            idle = 0
            while not stop.is_set():
                if time.monotonic() > limit:
                    raise ConnectorError(f"kafka: reading {topic} back did not reach its end in {deadline_s:g} s")
                data = await consumer.getmany(*tps, timeout_ms=POLL_MS, max_records=1000)
                for tp, msgs in data.items():
                    end = ends.get(tp)
                    if end is None and consumer.highwater(tp) is not None:
                        end = ends[tp] = consumer.highwater(tp)
                    for m in msgs:
                        if (end is None or m.offset < end) and m.value is not None and not put(m.value):
                            return
                idle = 0 if data else idle + 1
                for tp in tps:
                    if tp not in ends and consumer.highwater(tp) is not None:
                        ends[tp] = consumer.highwater(tp) or 0
                if idle >= 10 and len(ends) < len(tps):
                    # no fetch said where these end: ListOffsets can tell an empty partition (0), not
                    # always the end of another (tansu answers the last batch's base offset)
                    missing = [tp for tp in tps if tp not in ends]
                    ends.update((tp, 0) for tp, end in (await consumer.end_offsets(missing)).items() if end == 0)
                if len(ends) == len(tps):
                    positions = [await consumer.position(tp) for tp in tps]
                    if all(pos >= ends[tp] for pos, tp in zip(positions, tps, strict=True)):
                        return
        finally:
            await consumer.stop()

    def run() -> None:
        try:
            asyncio.run(consume())
        except BaseException as exc:  # handed to the reading thread
            put(exc)
            return
        put(_END)

    thread = threading.Thread(target=run, name=f"assay-readback-{topic}", daemon=True)
    thread.start()
    try:
        while True:
            item = out.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
