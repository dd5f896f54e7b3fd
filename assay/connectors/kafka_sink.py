"""The Kafka sink: one message per result row, keyed by the trace id; also the dead-letter sink.

``write_batch`` hands rows to the producer (which batches, compresses and sends them in the
background); ``flush`` returns once every message sent so far is acknowledged by all in-sync
replicas (``acks=all``), which is when they are durable and the engine may acknowledge the source.
While it waits, the producer's connections are watched: with none open to any broker for
``connect_timeout_s`` (the cluster went away), ``flush`` raises the one error naming the servers,
instead of waiting out the producer's request timeout (40 s, twice); the source and the other sink
of the run then give up on those servers at once, and closing abandons what was not delivered.
In the dead-letter role (:meth:`KafkaSink.write_failures`) the message is the record's original
bytes, with the failure in headers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
from collections.abc import Sequence
from typing import Any

import anyio

from assay.connectors.base import Sink
from assay.connectors.kafka_config import (
    KafkaSinkConfig,
    client_kwargs,
    gone,
    quiet_client_logs,
    reachable_again,
    require_aiokafka,
    unreachable,
)
from assay.exceptions import ConnectorError
from assay.records import Failure

require_aiokafka()

from aiokafka import AIOKafkaProducer  # noqa: E402
from aiokafka.errors import KafkaError, UnknownError, UnsupportedVersionError  # noqa: E402

__all__ = ["KafkaSink", "failure_headers"]

log = logging.getLogger(__name__)

#: How often a flush looks at the producer's connections while it waits for acknowledgements.
WATCH_S = 0.25

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_WORDS: dict[int, struct.Struct] = {}


def murmur2(data: bytes) -> int:
    """The Java client's ``Utils.murmur2`` of ``data`` (what its default partitioner hashes keys
    with): the same value as ``aiokafka.partitioner.murmur2``, in about a third of its time (the
    4-byte words read by one ``struct`` call, no redundant masking). Called once per keyed row.

    >>> murmur2(b"21"), murmur2(b"")
    (3321034988, 275646681)
    """
    n = len(data)
    h = 0x9747B28C ^ n
    n4 = n >> 2
    words = _WORDS.get(n4)
    if words is None:
        words = _WORDS[n4] = struct.Struct(f"<{n4}I")
    for k in words.unpack_from(data):
        k = (k * _M) & _MASK
        k = ((k ^ (k >> 24)) * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = n & 3
    if tail:
        base = n - tail
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h = ((h ^ data[base]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


def failure_headers(f: Failure) -> list[tuple[str, bytes]]:
    """Dead-letter headers: stage, error type, error, severity and where the record came from."""
    headers = [
        ("assay.stage", f.stage.encode()),
        ("assay.error_type", f.error_type.encode()),
        ("assay.error", f.message.encode("utf-8", "replace")),
        ("assay.severity", f.severity.encode()),
    ]
    p = f.position
    if p.partition is not None:
        headers += [
            ("assay.source_topic", p.source.encode()),
            ("assay.source_partition", str(p.partition).encode()),
            ("assay.source_offset", str(p.offset).encode()),
        ]
    else:
        headers.append(("assay.source_file", p.source.encode()))
        if p.line is not None:
            headers.append(("assay.source_line", str(p.line).encode()))
    return headers


class KafkaSink(Sink):
    """Produces each row to ``config.topic`` (key = trace id) with an ``acks=all`` producer.

    ``publish`` returns None: a Kafka sink has no directory, so the engine writes the run's
    summary to a local summary path.
    """

    def __init__(self, config: KafkaSinkConfig, *, connect: bool = True) -> None:
        self.config = config
        self._connect = connect
        """False: the sink the engine opens only to publish (a Kafka sink has nothing to publish):
        no producer, so a run whose cluster went away still writes its summary."""
        self._producer: AIOKafkaProducer | None = None
        self._pending: list[asyncio.Future[Any]] = []
        self._partitions: list[int] | None = None
        self._round_robin = 0
        self._closed = False
        self.sent = 0

    def describe(self) -> str:
        return f"kafka topic {self.config.topic}"

    def _new_producer(self, idempotent: bool) -> AIOKafkaProducer:
        cfg = self.config
        return AIOKafkaProducer(
            **client_kwargs(cfg),
            acks="all",
            enable_idempotence=idempotent,
            compression_type=None if cfg.compression == "none" else cfg.compression,
            linger_ms=cfg.linger_ms,
            max_batch_size=cfg.max_batch_bytes,
            max_request_size=cfg.max_request_size,
        )

    async def open(self) -> None:
        cfg = self.config
        if not self._connect:
            return
        reachable_again(cfg)
        idempotent = cfg.enable_idempotence is not False
        try:
            with anyio.fail_after(cfg.connect_timeout_s):
                try:
                    self._producer = await self._start(idempotent)
                except (UnknownError, UnsupportedVersionError) as e:
                    if cfg.enable_idempotence is not True and idempotent:
                        log.warning(
                            "kafka sink: the broker rejected the idempotent producer (%s); "
                            "producing without idempotence (acks=all, at-least-once)",
                            type(e).__name__,
                        )
                        self._producer = await self._start(False)
                    else:
                        raise
                await self._producer.partitions_for(cfg.topic)  # the topic exists (or the broker auto-creates it)
        except TimeoutError as e:
            await self.aclose()
            raise unreachable(cfg, f"sink (topic {cfg.topic})") from e
        except KafkaError as e:
            await self.aclose()
            raise unreachable(cfg, f"sink (topic {cfg.topic})", e) from e
        self._closed = False

    async def _start(self, idempotent: bool) -> AIOKafkaProducer:
        producer = self._new_producer(idempotent)
        try:
            await producer.start()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await producer.stop()
            raise
        return producer

    def _live(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise ConnectorError(f"kafka sink (topic {self.config.topic}) is not open")
        error = gone(self.config)
        if error is not None:  # found out of reach (here, or by the run's source): no more waiting on it
            raise error
        return self._producer

    async def write_batch(self, rows: Sequence[bytes], keys: Sequence[str | None] | None = None) -> None:
        """Send rows, one record batch per partition (a keyed row goes where the Java client's
        murmur2 partitioner puts its key; unkeyed rows of one call share a partition)."""
        producer = self._live()
        topic = self.config.topic
        try:
            if self._partitions is None:
                self._partitions = sorted(await producer.partitions_for(topic))
            parts = self._partitions
            n = len(parts)
            spread = parts[self._round_robin % n]
            self._round_robin += 1
            builders: dict[int, Any] = {}
            for i, row in enumerate(rows):
                key = keys[i] if keys is not None else None
                kb = None if key is None else key.encode()
                p = spread if kb is None else parts[(murmur2(kb) & 0x7FFFFFFF) % n]
                b = builders.get(p)
                if b is None:
                    b = builders[p] = producer.create_batch()
                if b.append(timestamp=None, key=kb, value=row) is None:  # full: send it, start another
                    b.close()
                    self._pending.append(await producer.send_batch(b, topic, partition=p))
                    b = builders[p] = producer.create_batch()
                    if b.append(timestamp=None, key=kb, value=row) is None:
                        raise ConnectorError(
                            f"kafka sink (topic {topic}): a row of {len(row)} bytes exceeds max_batch_bytes"
                        )
            for p, b in builders.items():
                if b.record_count():
                    b.close()  # complete: the producer sends it without lingering
                    self._pending.append(await producer.send_batch(b, topic, partition=p))
        except KafkaError as e:
            raise ConnectorError(f"kafka sink (topic {topic} on {self._servers()}): {type(e).__name__}: {e}") from e
        self.sent += len(rows)

    async def write_failures(self, failures: Sequence[Failure]) -> None:
        """The original bytes as the value, the failure in ``assay.*`` headers."""
        producer = self._live()
        topic = self.config.topic
        try:
            for f in failures:
                key = f"{f.position}".encode()
                self._pending.append(await producer.send(topic, f.payload, key=key, headers=failure_headers(f)))
        except KafkaError as e:
            raise ConnectorError(
                f"kafka dead-letter sink (topic {topic} on {self._servers()}): {type(e).__name__}: {e}"
            ) from e
        self.sent += len(failures)

    async def flush(self) -> None:
        """Wait until every message sent so far is acknowledged (acks=all); raise if one failed."""
        if self._producer is None or not self._pending:
            return
        producer = self._live()
        pending, self._pending = self._pending, []
        try:
            await self._delivered(producer)
            for fut in pending:
                if not fut.done():
                    await fut
                elif fut.exception() is not None:
                    raise fut.exception()  # type: ignore[misc]
        except KafkaError as e:
            raise ConnectorError(
                f"kafka sink (topic {self.config.topic} on {self._servers()}): delivery failed: {e}"
            ) from e

    async def _delivered(self, producer: AIOKafkaProducer) -> None:
        """``producer.flush()``, watching the cluster (:class:`_Watch`): ClusterUnreachable once
        it is out of reach for ``connect_timeout_s``; a busy broker is waited for."""
        cfg = self.config
        done = anyio.Event()
        failed: list[BaseException] = []

        async def flush() -> None:
            try:
                await producer.flush()
            except Exception as exc:  # raised below, unwrapped
                failed.append(exc)
            done.set()

        watch = _Watch(producer, cfg.connect_timeout_s)
        lost = False
        async with anyio.create_task_group() as tg:
            tg.start_soon(flush)
            while not done.is_set():
                with anyio.move_on_after(WATCH_S):
                    await done.wait()
                if not done.is_set() and (gone(cfg) is not None or not await watch.alive()):
                    lost = True
                    tg.cancel_scope.cancel()
                    break
        if lost:
            quiet_client_logs()  # said in the run's one error line
            raise gone(cfg) or unreachable(cfg, f"sink (topic {cfg.topic})")
        if failed:
            raise failed[0]

    def _servers(self) -> str:
        return ",".join(self.config.servers())

    async def aclose(self) -> None:
        """Stop the producer (sends what is buffered; idempotent). Unflushed rows are not durable."""
        if self._closed:
            return
        self._closed = True
        producer, self._producer = self._producer, None
        self._pending = []
        if producer is None:
            return
        with anyio.CancelScope(shield=True):
            if gone(self.config) is not None:  # nothing can be delivered: stop without flushing
                await _abandon(producer)
                return
            with anyio.move_on_after(max(self.config.connect_timeout_s, 10)):
                await producer.stop()


class _Watch:
    """Whether a producer's cluster is still there while a flush waits. A connection open to some
    broker says yes. Without one, after a third of ``limit_s`` (at most 5 s) of silence seen here,
    a metadata request (which reconnects) asks; the cluster is gone once two requests in a row
    failed and the silence lasted ``limit_s``. Silence counts from when it is first seen, and one
    request cannot decide alone: an event loop held up by a slow evaluator is no silence of the
    cluster's."""

    def __init__(self, producer: AIOKafkaProducer, limit_s: float) -> None:
        self.producer = producer
        self.limit_s = limit_s
        self.silent_since: float | None = None
        self.failures = 0

    async def alive(self) -> bool:
        if _connected(self.producer):
            self.silent_since, self.failures = None, 0
            return True
        now = time.monotonic()
        if self.silent_since is None:
            self.silent_since = now
        silent = now - self.silent_since
        if silent < min(self.limit_s / 3, 5.0):
            return True
        try:
            with anyio.fail_after(max(1.0, self.limit_s - silent)):
                await self.producer.client.fetch_all_metadata()
        except (TimeoutError, KafkaError):
            self.failures += 1
            if self.failures >= 2 and time.monotonic() - self.silent_since >= self.limit_s:
                return False
            await anyio.sleep(min(0.5, self.limit_s / 10))  # refused at once: ask again shortly
            return True
        self.silent_since, self.failures = None, 0
        return True


def _connected(producer: AIOKafkaProducer) -> bool:
    """Whether the producer's client holds an open connection to some broker (aiokafka closes a
    connection whose broker went away, and keeps reconnecting in vain)."""
    conns = getattr(getattr(producer, "client", None), "_conns", None)
    return isinstance(conns, dict) and any(conn.connected() for conn in conns.values())


async def _abandon(producer: AIOKafkaProducer) -> None:
    """Stop a producer whose cluster is gone without waiting for its batches: its sender task is
    cancelled and its connections closed (``stop()`` would first wait for every batch)."""
    producer._closed = True  # its stop() does nothing more
    sender = getattr(producer, "_sender", None)
    with contextlib.suppress(Exception, asyncio.CancelledError):
        if sender is not None:
            await sender.close()
    with contextlib.suppress(Exception, asyncio.CancelledError), anyio.move_on_after(5):
        await producer.client.close()
