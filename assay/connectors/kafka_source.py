"""The Kafka source: a consumer group whose committed offsets are the checkpoint.

::

    poller task ──getmany──▶ bounded queue (max_buffered_batches) ──batches()──▶ engine
         │  queue full: pause the partitions, keep calling getmany(0) so the group keeps us
         ▼
    ack(positions) ──Watermarks──▶ commit {partition: next offset} up to the contiguous watermark

* Auto-commit is off. ``ack`` receives durable positions in any order; per partition only the
  contiguous prefix is committed (at-least-once: a crash re-reads what was not committed).
* Rebalances: a revoked partition is no longer dispatched (queued records of it are dropped); the
  records of it the engine already holds are waited for (at most half the rebalance timeout) and
  committed as they become durable, then its watermark is forgotten so a later ``ack`` never
  commits it. An assigned partition resumes from the group's committed offset.
* With the engine's checkpoints (``commit_after_checkpoint``), offsets are committed to the group
  only after the checkpoint covering them is saved (:meth:`KafkaSource.checkpointed`), never
  before: a stop can re-read records (the instant between the two), never skip one. A commit a
  rebalance defers is retried at the next checkpoint and at close.
* A run that owns its output (files, S3: ``fixed_share``) does not let the group move partitions
  between its writers: writer i of N reads every N-th partition (as ``assignment: manual``), its
  checkpoint holds the offsets its rows cover (``snapshot``: the contiguous prefix, and the
  offsets written beyond it while an earlier batch was still being evaluated), and a resume starts
  each partition there and skips those, whatever the group committed: the rows kept and the
  records read again meet exactly, whatever the order batches finished in.
* Closing leaves the group (``LeaveGroup``), also as a member of generation 0, which aiokafka
  skips (:mod:`assay.connectors.kafka_group`): the next run of the group id joins without waiting
  for this member's session, and an ``assignment: manual`` run may commit to the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import anyio
from anyio.abc import TaskGroup

from assay.connectors.base import Source, Watermarks
from assay.connectors.kafka_config import (
    ClusterUnreachable,
    KafkaSourceConfig,
    client_kwargs,
    continues,
    gone,
    offsets_state,
    quiet_client_logs,
    reachable_again,
    require_aiokafka,
    resume_done,
    resume_offsets,
    to_millis,
    unreachable,
)
from assay.connectors.kafka_group import leave_from_any_generation
from assay.exceptions import ConnectorError
from assay.records import Envelope, Position

require_aiokafka()

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition  # noqa: E402
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError  # noqa: E402
from aiokafka.structs import OffsetAndMetadata  # noqa: E402

__all__ = ["KafkaSource"]

log = logging.getLogger(__name__)

_Chunk = tuple[TopicPartition, int, list[Envelope]]  # partition, assignment generation, records


#: Bytes a consumer's connection takes from its socket per turn of the event loop (asyncio reads
#: 256 KiB a turn). A fetch response is megabytes, and between two turns the engine scores a batch:
#: at 256 KiB a turn, the source's queue ran dry 26 times in a 20,000-trace run (1.0-1.2 s of a
#: 2.1 s run spent waiting for records); at 4 MiB, 5-9 times (0.2-0.6 s).
READ_CHUNK = 4 << 20


def _widen_reads(consumer: AIOKafkaConsumer) -> None:
    """Let each plain-TCP connection of the consumer read up to READ_CHUNK bytes a turn (a
    transport without ``max_size``, TLS for one, is left as it is). aiokafka opens connections
    lazily and again after a loss, so the poll loop calls this after every poll."""
    conns = getattr(getattr(consumer, "_client", None), "_conns", None)
    if not isinstance(conns, dict):
        return
    for conn in conns.values():
        transport = getattr(getattr(conn, "_writer", None), "transport", None)
        if transport is not None and getattr(transport, "max_size", READ_CHUNK) < READ_CHUNK:
            transport.max_size = READ_CHUNK


def _connected(consumer: AIOKafkaConsumer) -> bool:
    """Whether the consumer's client holds an open connection to some broker (aiokafka closes a
    connection whose broker went away, and keeps reconnecting in vain)."""
    conns = getattr(getattr(consumer, "_client", None), "_conns", None)
    return isinstance(conns, dict) and any(conn.connected() for conn in conns.values())


async def _finish_stop(consumer: AIOKafkaConsumer) -> None:
    """What ``AIOKafkaConsumer.stop`` leaves undone when a fetch task's cancellation escapes it:
    the fetcher's other requests and the client's connections."""
    fetcher = getattr(consumer, "_fetcher", None)
    tasks = [t for t in list(getattr(fetcher, "_pending_tasks", ()) or ()) if not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
    client = getattr(consumer, "_client", None)
    if client is not None:
        with contextlib.suppress(KafkaError, OSError, asyncio.CancelledError):
            await client.close()


def _partitions(consumer: AIOKafkaConsumer, topics: list[str]) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, source: KafkaSource) -> None:
        self.source = source

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.source._on_revoked(list(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.source._on_assigned(list(assigned))


class KafkaSource(Source):
    """Reads envelopes (payload = message value, key = message key) from a consumer group.

    ``batch_size`` bounds the envelopes per batch. ``fixed_share`` (a run that owns its output) or
    ``assignment: manual``: no group join; ``shard`` (index, count) picks every count-th partition.
    ``resume_state`` (the offsets of a checkpoint, :meth:`snapshot`) starts those partitions there
    instead of at the group's committed offsets. ``on_revoke``, when set by the engine, is awaited
    before a rebalance takes partitions away so it can flush and acknowledge what is in flight.
    """

    size_unit = "records"

    def __init__(
        self,
        config: KafkaSourceConfig,
        *,
        batch_size: int = 256,
        resume_state: Any = None,
        shard: tuple[int, int] | None = None,
        fixed_share: bool = False,
    ) -> None:
        super().__init__()
        self.config = config
        self.batch_size = max(1, batch_size)
        self.shard = shard
        self.fixed_share = fixed_share
        self._static = fixed_share or config.assignment == "manual"
        self._resume = resume_offsets(resume_state)
        """Per partition the offset a checkpoint's rows end at: reading resumes there."""
        self._resume_done = resume_done(resume_state)
        """Per partition the offsets after ``_resume`` a checkpoint's rows hold too: not read again."""
        self._continue = continues(resume_state)
        """Partitions without a resume offset start at the group's committed offsets (a rerun)."""
        self._origin = resume_offsets(resume_state, "origin")
        """Per partition the offset this run began reading at (a start-over reads from there)."""
        self.on_revoke: Callable[[], Awaitable[None]] | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._tg: TaskGroup | None = None
        self._queue: deque[_Chunk] = deque()
        self._queued = 0
        self._capacity = config.max_buffered_batches * self.batch_size
        self._ready = anyio.Event()
        self._space = anyio.Event()
        self._lock = anyio.Lock()
        self._watermarks = Watermarks()
        self._checkpointed: dict[tuple[str, int], int] = {}
        """Offsets a saved checkpoint covers whose commit a rebalance deferred."""
        self._gen: dict[TopicPartition, int] = {}  # owned partitions → assignment generation
        self._revoking: set[TopicPartition] = set()  # revoked, their dispatched records still awaited
        self._dispatched: dict[TopicPartition, int] = {}  # next offset after the last one handed out
        self._generation = 0
        self._pending: set[TopicPartition] = set()  # assigned, start offset not resolved yet
        self._first_assignment: set[TopicPartition] | None = None
        self._next: dict[TopicPartition, int] = {}  # next offset to dispatch
        self._end: dict[TopicPartition, int] = {}  # ListOffsets end when first seen
        self._stop_offset: dict[TopicPartition, int] = {}  # end corrected by the first fetch's high watermark
        self._done: set[TopicPartition] = set()
        self._paused = False
        self._starts: dict[TopicPartition, int] = {}  # start offsets estimated at open (size_hint)
        self._error: BaseException | None = None
        self._last_contact = 0.0  # time.monotonic() of the cluster's last answer (the poller's)
        self._finished = False
        self._stopping = False
        self._closed = False
        self._until_ms = to_millis(config.until_time) if config.until_time else None
        self._from_ms = to_millis(config.from_time) if config.from_time else None

    def describe(self) -> str:
        what = ",".join(self.config.topics or []) or f"/{self.config.topic_pattern}/"
        return f"kafka {what} (group {self.config.group_id})"

    # ---------------------------------------------------------------- lifecycle

    async def open(self) -> None:
        cfg = self.config
        quiet_client_logs(False)
        reachable_again(cfg)
        consumer = AIOKafkaConsumer(
            **client_kwargs(cfg),
            group_id=cfg.group_id,
            enable_auto_commit=False,
            auto_offset_reset="latest" if cfg.start == "latest" else "earliest",
            max_poll_records=cfg.max_poll_records,
            session_timeout_ms=cfg.session_timeout_ms,
            rebalance_timeout_ms=cfg.rebalance_timeout_ms,
            heartbeat_interval_ms=max(cfg.session_timeout_ms // 10, 100),
            max_poll_interval_ms=cfg.max_poll_interval_ms,
            fetch_max_bytes=cfg.fetch_max_bytes,
            max_partition_fetch_bytes=cfg.max_partition_fetch_bytes,
        )
        self._consumer = consumer
        try:
            with anyio.fail_after(cfg.connect_timeout_s):
                await consumer.start()
                if not self._static:  # a member of generation 0 leaves the group on close too
                    leave_from_any_generation(consumer, self._unreachable)
                if cfg.topics:
                    present = await consumer.topics()
                    missing = [t for t in cfg.topics if t not in present]
                    if missing:
                        raise ConnectorError(
                            f"kafka source: topic(s) {', '.join(missing)} not found on {','.join(cfg.servers())}"
                        )
                manual = await self._manual_partitions(consumer) if self._static else None
                if manual:
                    # find the group coordinator now: the fetcher's first lookup of the committed
                    # offsets would otherwise fail and retry after retry_backoff_ms
                    await consumer.committed(manual[0])
        except TimeoutError as e:
            await self._stop_consumer()
            raise unreachable(cfg, "source") from e
        except KafkaError as e:
            await self._stop_consumer()
            raise unreachable(cfg, "source", e) from e
        except BaseException:
            await self._stop_consumer()
            raise
        estimate: list[TopicPartition] | None = None
        if manual is not None:
            estimate = manual
            consumer.assign(manual)
            self._on_assigned(manual)
        elif cfg.topics:
            # the group join runs in aiokafka's coordinator task from here on; nothing below waits for it
            consumer.subscribe(topics=cfg.topics, listener=_Listener(self))
            estimate = _partitions(consumer, cfg.topics)
        else:
            consumer.subscribe(pattern=cfg.topic_pattern, listener=_Listener(self))
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._poll_loop)
        if estimate and cfg.stop_at == "end":
            # in the background: the group's committed offsets are answered only after the join
            self._tg.start_soon(self._estimate_size, estimate)

    async def _manual_partitions(self, consumer: AIOKafkaConsumer) -> list[TopicPartition]:
        """Every partition of the topics (sorted), or this shard's share: every N-th one."""
        cfg = self.config
        if cfg.topics:
            topics = sorted(cfg.topics)
        else:
            pattern = re.compile(cfg.topic_pattern or "")
            topics = sorted(t for t in await consumer.topics() if pattern.match(t) and not t.startswith("__"))
        tps = _partitions(consumer, topics)
        if self.shard is None:
            return tps
        index, count = self.shard
        return tps[index::count]

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stopping = True
        try:
            if self._checkpointed and not self._unreachable() and self._error is None:
                with anyio.CancelScope(shield=True):
                    await self._commit_checkpointed()
            if self._tg is not None:
                self._tg.cancel_scope.cancel()
                await self._tg.__aexit__(None, None, None)
        finally:
            self._tg = None
            await self._stop_consumer()

    async def _stop_consumer(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        if self._unreachable():  # it said which cluster; closing makes aiokafka log each abandoned request
            quiet_client_logs()
        with anyio.CancelScope(shield=True), anyio.move_on_after(10) as scope:
            try:
                await consumer.stop()
            except asyncio.CancelledError:
                if scope.cancel_called:
                    raise
                # aiokafka (0.14) re-raises the cancellation of a fetch caught in its retry backoff
                # (a broker that went away) out of stop(): finish closing what it left open
                await _finish_stop(consumer)

    def _unreachable(self) -> bool:
        """Whether the cluster is known to be out of reach (found by this source, or by a sink of
        this process on the same servers): nothing more waits for it."""
        if not isinstance(self._error, ClusterUnreachable):
            self._error = gone(self.config) or self._error
        return isinstance(self._error, ClusterUnreachable)

    def stop(self) -> None:
        self._stopping = True
        self._ready.set()

    def size_hint(self) -> int | None:
        if not self._starts:
            return None
        # the end offsets corrected by the fetch high watermarks, once they are known
        return sum(max(0, self._stop_offset.get(tp, end) - self._starts.get(tp, 0)) for tp, end in self._end.items())

    def snapshot(self) -> Any:
        """With ``fixed_share``: per partition the next offset after what is durable (the
        acknowledged prefix) and the offsets acknowledged beyond it (``done``: batches are
        evaluated side by side and written as they finish, so rows after a batch still in flight
        are durable too), beside the resume state of partitions this writer does not read
        (several writers' states merge per partition), and where the run began reading each
        (``origin``). Otherwise None: the group's committed offsets are the checkpoint."""
        if not self.fixed_share:
            return None
        positions = self._watermarks.positions()
        done = {k: v for k, v in self._resume_done.items() if k not in positions}
        done.update(self._watermarks.beyond())
        return offsets_state({**self._resume, **positions}, self._origin, done, cont=self._continue)

    # ---------------------------------------------------------------- engine side

    async def batches(self) -> AsyncIterator[list[Envelope]]:
        while True:
            if self._stopping:  # buffered records are not acknowledged: the group reads them again
                return
            batch = self._take()
            if batch:
                yield batch
                continue
            if isinstance(self._error, ConnectorError):
                raise self._error
            if self._error is not None:
                raise ConnectorError(f"kafka source: {type(self._error).__name__}: {self._error}") from self._error
            if self._finished or self._stopping or self._closed:
                return
            self._ready = anyio.Event()
            await self._ready.wait()

    def _take(self) -> list[Envelope]:
        out: list[Envelope] = []
        while self._queue and len(out) < self.batch_size:
            tp, gen, envs = self._queue[0]
            room = self.batch_size - len(out)
            if len(envs) > room:
                self._queue[0] = (tp, gen, envs[room:])
                envs = envs[:room]
            else:
                self._queue.popleft()
            self._queued -= len(envs)
            if self._gen.get(tp) == gen and envs:  # a revoked partition is not dispatched any more
                out.extend(envs)
                self._dispatched[tp] = (envs[-1].position.offset or 0) + 1
        if out or not self._queue:
            self._space.set()
        return out

    async def ack(self, positions: Sequence[Position]) -> None:
        """Commit, per partition, up to the contiguous watermark of the durable positions."""
        async with self._lock:
            self._watermarks.ack_all(positions)
            if not self.commit_after_checkpoint:
                await self._commit(self._watermarks.committable())

    async def checkpointed(self) -> None:
        """The engine saved the checkpoint holding these offsets: commit them to the group now
        (a commit a rebalance defers is retried at the next one, and at close). Once the cluster
        is known to be unreachable, its error at once (not another timeout): the checkpoint holds
        them, and the next run commits them."""
        if self._unreachable():
            assert self._error is not None
            raise self._error
        async with self._lock:
            self._checkpointed = self._watermarks.committable()
            if await self._commit(self._checkpointed):
                self._checkpointed = {}

    async def _commit_checkpointed(self) -> None:
        """At close: commit what the last checkpoint covers if a rebalance deferred it (the poll
        loop still runs, so the consumer rejoins meanwhile); never more than that."""
        for _ in range(20):
            async with self._lock:
                if not self._checkpointed or await self._commit(self._checkpointed):
                    self._checkpointed = {}
                    return
            await anyio.sleep(0.5)

    async def _commit(self, offsets: dict[tuple[str, int], int]) -> bool:
        """Commit the offsets of partitions still owned; False when a rebalance deferred it."""
        consumer = self._consumer
        owned = {(tp.topic, tp.partition) for tp in (*self._gen, *self._revoking)}
        offsets = {k: v for k, v in offsets.items() if k in owned}
        if not offsets or consumer is None:
            return True
        if self._unreachable():  # a sink of this run found the servers gone: no commit waits for them
            assert self._error is not None
            raise self._error
        try:
            with anyio.fail_after(self.config.connect_timeout_s):
                await consumer.commit({TopicPartition(t, p): OffsetAndMetadata(o, "") for (t, p), o in offsets.items()})
        except TimeoutError as e:
            err = unreachable(self.config, "source")
            self._error = self._error or err  # no further commit waits for this cluster (close, checkpoints)
            quiet_client_logs()
            raise err from e
        except (CommitFailedError, IllegalStateError) as e:
            if self._static:
                why = "a run writing files or S3" if self.fixed_share else "assignment: manual"
                raise ConnectorError(
                    f"kafka source: commit to group {self.config.group_id!r} refused ({type(e).__name__}); "
                    f"while {why} reads the topics no other consumer may be a member of the group"
                ) from e
            # a rebalance is under way: retried on the next commit, and at close
            log.warning("kafka source: commit deferred (%s)", e)
            return False
        except KafkaError as e:
            raise ConnectorError(f"kafka source: commit failed: {type(e).__name__}: {e}") from e
        self._watermarks.committed(offsets)
        return True

    # ---------------------------------------------------------------- rebalances

    def _on_assigned(self, assigned: list[TopicPartition]) -> None:
        first = self._first_assignment is None
        if first:
            self._first_assignment = set(assigned)
        for tp in assigned:
            self._generation += 1
            self._gen[tp] = self._generation
            self._pending.add(tp)
            self._done.discard(tp)
            self._stop_offset.pop(tp, None)
        self._paused = False
        self._ready.set()

    async def _on_revoked(self, revoked: list[TopicPartition]) -> None:
        owned = [tp for tp in revoked if self._gen.pop(tp, None) is not None]  # nothing more dispatched
        self._revoking.update(owned)
        try:
            if self.on_revoke is not None:
                await self.on_revoke()
                await self._drain(owned)
            async with self._lock:
                keys = {(tp.topic, tp.partition) for tp in revoked}
                await self._commit({k: v for k, v in self._watermarks.committable().items() if k in keys})
        finally:
            for tp in revoked:
                self._revoking.discard(tp)
                self._pending.discard(tp)
                self._dispatched.pop(tp, None)
                self._watermarks.forget(tp.topic, tp.partition)

    def _in_flight(self, tps: list[TopicPartition]) -> bool:
        """Whether records of these partitions were handed to the engine and not acknowledged yet."""
        positions = self._watermarks.positions()
        return any(positions.get((tp.topic, tp.partition), 0) < end for tp in tps if (end := self._dispatched.get(tp)))

    async def _drain(self, revoked: list[TopicPartition]) -> None:
        """Before the group hands revoked partitions on, wait for the records of them the engine
        holds, committing (``on_revoke``: flush, acknowledge, commit) as they become durable, so
        the next owner does not read them again; at most half the rebalance timeout, after which
        the rest is read again (at least once). Without this a member whose reading was done when
        another member left lost the acknowledgements of its last batches (the rows written, the
        offsets never committed: read again by the next run)."""
        cfg = self.config
        limit = (cfg.rebalance_timeout_ms or cfg.session_timeout_ms) / 2000
        deadline = time.monotonic() + limit
        while self._in_flight(revoked) and time.monotonic() < deadline and self.on_revoke is not None:
            await anyio.sleep(0.05)
            await self.on_revoke()

    async def _init_pending(self, consumer: AIOKafkaConsumer) -> None:
        """Resolve where newly assigned partitions start (seek for ``start``/``from_time``)."""
        cfg = self.config
        tps = [tp for tp in self._pending if tp in self._gen]
        resumed = [tp for tp in tps if (tp.topic, tp.partition) in self._resume]
        for tp in resumed:  # a checkpoint's rows end here: neither the group nor ``start`` decides
            consumer.seek(tp, self._resume[(tp.topic, tp.partition)])
        seek = [
            tp
            for tp in tps
            if self._first_assignment is not None
            and tp in self._first_assignment
            and tp not in resumed
            and not self._continue
        ]
        if seek and cfg.from_time is not None:
            found = await consumer.offsets_for_times({tp: to_millis(cfg.from_time) for tp in seek})
            for tp in seek:
                hit = found.get(tp)
                if hit is not None:
                    consumer.seek(tp, hit.offset)
                else:
                    await consumer.seek_to_end(tp)
        elif seek and cfg.start == "earliest":
            await consumer.seek_to_beginning(*seek)
        elif seek and cfg.start == "latest":
            await consumer.seek_to_end(*seek)
        if self._first_assignment is not None:
            self._first_assignment -= {*seek, *resumed}
        if cfg.stop_at == "end":
            unknown = [tp for tp in tps if tp not in self._end]
            if unknown:
                self._end.update(await consumer.end_offsets(unknown))
        for tp in tps:
            try:
                pos = await consumer.position(tp)
            except IllegalStateError:  # revoked meanwhile
                continue
            if tp in self._pending and tp in self._gen:
                key = (tp.topic, tp.partition)
                self._pending.discard(tp)
                self._next[tp] = pos
                # a checkpoint's offsets may be ahead of the group's (a stop between saving it and
                # committing): committed at the next checkpoint, so a rerun starts where rows end
                self._watermarks.start(
                    tp.topic, tp.partition, pos, self._resume_done.get(key, ()), committed=tp not in resumed
                )
                self._origin.setdefault(key, pos)

    # ---------------------------------------------------------------- poller

    async def _check_alive(self, consumer: AIOKafkaConsumer, fetched: bool) -> None:
        """After a poll: records fetched, or a connection to a broker still open, prove the cluster
        is there. With neither for a while, ask for the cluster's metadata (which reconnects);
        ConnectorError once the cluster has not been reachable for ``connect_timeout_s``. (A busy
        broker holding a group join is still connected: it is never taken for a dead one.)"""
        now = time.monotonic()
        if fetched or _connected(consumer):
            self._last_contact = now
            return
        limit = self.config.connect_timeout_s
        if now - self._last_contact < min(limit / 3, 5.0):
            return
        try:
            with anyio.fail_after(max(0.1, limit - (now - self._last_contact))):
                await consumer.topics()
        except (TimeoutError, KafkaError) as e:
            if time.monotonic() - self._last_contact >= limit:
                raise unreachable(self.config, "source") from e
            await anyio.sleep(min(0.5, limit / 10))  # refused at once: look again shortly
            return
        self._last_contact = time.monotonic()

    async def _poll_loop(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        cfg = self.config
        self._last_contact = time.monotonic()
        try:
            while True:
                if self._stopping or self._finished:
                    # nothing more to dispatch, but the engine may still be draining and will
                    # commit: keep polling (everything paused) so the group keeps this consumer
                    consumer.pause(*consumer.assignment())
                    await consumer.getmany(timeout_ms=1000)
                    await self._check_alive(consumer, False)
                    continue
                if self._pending:
                    try:
                        with anyio.fail_after(cfg.connect_timeout_s + cfg.session_timeout_ms / 1000):
                            await self._init_pending(consumer)
                    except TimeoutError as e:
                        raise unreachable(cfg, "source") from e
                room = self._capacity - self._queued
                if room <= 0:
                    self._space = anyio.Event()
                    with anyio.move_on_after(1.0):
                        await self._space.wait()
                    if self._queued < self._capacity:
                        continue
                    # the pipeline is slow: pause (the fetcher keeps at most one response per
                    # partition meanwhile) and poll, which keeps this consumer in its group
                    self._pause(consumer, True)
                    data = await consumer.getmany(timeout_ms=0)
                else:
                    self._pause(consumer, False)
                    data = await consumer.getmany(
                        timeout_ms=cfg.poll_timeout_ms, max_records=min(cfg.max_poll_records, room)
                    )
                _widen_reads(consumer)
                self._accept(consumer, data)
                self._check_finished(consumer)
                await self._check_alive(consumer, any(data.values()))
        except Exception as e:  # surfaced by batches(); never cancels the task that opened the source
            self._error = e
            if isinstance(e, ClusterUnreachable):  # said once, in the run's error line
                quiet_client_logs()
        finally:
            self._ready.set()

    def _pause(self, consumer: AIOKafkaConsumer, pause: bool) -> None:
        if pause == self._paused:
            return
        tps = [tp for tp in consumer.assignment() if tp not in self._done]
        if pause:
            consumer.pause(*tps)
        else:
            consumer.resume(*tps)
        self._paused = pause

    def _partition_stop(self, consumer: AIOKafkaConsumer, tp: TopicPartition) -> int | None:
        """The offset this partition stops at (None: unknown yet, or never)."""
        if self.config.stop_at != "end":
            return None
        stop = self._stop_offset.get(tp)
        if stop is None:
            hw = consumer.highwater(tp)
            if hw is None or tp not in self._end:
                return None
            stop = self._stop_offset[tp] = max(self._end[tp], hw)
        return stop

    def _accept(self, consumer: AIOKafkaConsumer, data: dict[TopicPartition, list[Any]]) -> None:
        until, since = self._until_ms, self._from_ms
        for tp, msgs in data.items():
            if not msgs:
                continue
            gen = self._gen.get(tp)
            if tp in self._pending:  # fetched before its start was resolved: read again after
                consumer.seek(tp, msgs[0].offset)
                continue
            if gen is None or tp in self._done:
                continue
            stop = self._partition_stop(consumer, tp)
            envs: list[Envelope] = []
            topic, partition = tp.topic, tp.partition
            last = -1
            is_done = self._watermarks.is_done
            for m in msgs:
                if (stop is not None and m.offset >= stop) or (until is not None and m.timestamp > until):
                    self._mark_done(consumer, tp)
                    break
                last = m.offset
                if is_done(topic, partition, m.offset):  # its row is in the output already
                    continue
                if since is not None and m.timestamp < since:
                    # before from_time (a broker whose offsets_for_times is coarse): nothing to write
                    self._watermarks.ack(topic, partition, m.offset)
                    continue
                envs.append(Envelope(m.value or b"", Position(topic, partition=partition, offset=m.offset), m.key))
            if last >= 0:
                self._next[tp] = last + 1
            if envs:
                self._queue.append((tp, gen, envs))
                self._queued += len(envs)
        if self._queue:
            self._ready.set()

    def _mark_done(self, consumer: AIOKafkaConsumer, tp: TopicPartition) -> None:
        self._done.add(tp)
        consumer.pause(tp)

    def _check_finished(self, consumer: AIOKafkaConsumer) -> None:
        if self.config.stop_at != "end" and self._until_ms is None:
            return
        if self._first_assignment is None or self._pending or self._revoking:
            return  # (during a revoke the partitions are not this consumer's, nor anyone else's yet)
        for tp in list(self._gen):
            if tp in self._done:
                continue
            stop = self._partition_stop(consumer, tp)
            if stop is not None and self._next.get(tp, 0) >= stop:
                self._mark_done(consumer, tp)
            else:
                return
        self._finished = True
        self._ready.set()

    async def _estimate_size(self, tps: list[TopicPartition]) -> None:
        """Records between the start and end offsets of the partitions (best effort, for the ETA)."""
        consumer = self._consumer
        if consumer is None:
            return
        try:
            with anyio.fail_after(self.config.connect_timeout_s + self.config.session_timeout_ms / 1000):
                ends = await consumer.end_offsets(tps)
                starts = await consumer.beginning_offsets(tps)
                if self.config.start == "committed" and self.config.from_time is None:
                    for tp in tps:
                        committed = await consumer.committed(tp)
                        if committed is not None:
                            starts[tp] = committed
                elif self.config.start == "latest":
                    starts = dict(ends)
                for tp in tps:
                    if (tp.topic, tp.partition) in self._resume:
                        starts[tp] = self._resume[(tp.topic, tp.partition)]
        except (TimeoutError, KafkaError, IllegalStateError) as e:
            log.warning("kafka source: no size estimate (%r)", e)
            return
        for tp, end in ends.items():  # a partition already started keeps the end it started with
            self._end.setdefault(tp, end)
        self._starts = {tp: starts.get(tp, 0) for tp in tps}
