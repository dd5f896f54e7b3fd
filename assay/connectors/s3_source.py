"""Read JSONL / JSON-array objects (plain, gzip or zstd) from an S3 prefix, object or glob.

Objects are streamed, never held whole: each is framed in a worker thread that pulls 1 MiB
chunks from the async response body (``anyio.from_thread.run``), and at most
``max_concurrent_objects`` objects are fetched at once. Batches still come out in key order:
every fetch feeds its own small bounded stream, drained one object after the other.

Resume state is a ledger like the file source's: completed ``(object, line)`` positions as
intervals, and the objects that are entirely done (those are not even fetched again)::

    {"done": {"s3://lake/t/a.jsonl.gz": [[1, 250], [300, 420]]}, "complete": ["s3://lake/t/0.jsonl.gz"]}
"""

from __future__ import annotations

import io
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from assay.connectors.base import Source
from assay.connectors.compression import open_stream
from assay.connectors.framing import ReadError, iter_records
from assay.connectors.ledger import LineLedger
from assay.connectors.s3_client import S3Client, S3Config, S3Url, is_hidden, parse_s3_url
from assay.exceptions import ConnectorError, InputMissingError
from assay.records import Envelope, Position

CHUNK = 1 << 20
_Item = list[Envelope] | BaseException


class _Ledger(LineLedger):
    """Completed positions per object (line intervals, :class:`LineLedger`) and the objects
    entirely done (their intervals dropped, so the snapshot stays small)."""

    def __init__(self, state: Any) -> None:
        state = state or {}
        super().__init__(state.get("done"))
        self.complete: set[str] = set(state.get("complete", []))

    def covers(self, name: str, line: int) -> bool:
        return self.is_done(name, line)

    def add(self, name: str, lines: list[int]) -> None:  # type: ignore[override]
        self.add_keys(name, lines)

    def finish(self, name: str) -> None:
        self.complete.add(name)
        self.done.pop(name, None)
        self._starts.pop(name, None)

    def snapshot(self) -> dict[str, Any]:
        return {"done": self.to_json(), "complete": sorted(self.complete)}


class _Body(io.RawIOBase):
    """A sync, readable view of an async response body, for framing code in a worker thread."""

    def __init__(self, body: Any, closed: threading.Event, counted: Any = None) -> None:
        self.body = body
        self.stopped = closed
        self.eof = False
        self.counted = counted  # called with the size of every chunk read (progress)

    def readable(self) -> bool:
        return True

    async def _fill(self, n: int) -> bytes:
        parts: list[bytes] = []
        got = 0
        while got < n:
            data = await self.body.read(n - got)
            if not data:
                break
            parts.append(data)
            got += len(data)
        return b"".join(parts)

    def readinto(self, b: Any) -> int:
        if self.stopped.is_set():
            raise ConnectorError("source stopped")
        if self.eof:
            return 0
        data = anyio.from_thread.run(self._fill, len(b))
        self.eof = not data
        memoryview(b).cast("B")[: len(data)] = data
        if self.counted is not None:
            self.counted(len(data))
        return len(data)


class S3Source(Source):
    """Records of the objects under an ``s3://`` prefix, one object, or a key glob.

    * ``url`` (one or a list): ``s3://bucket/prefix/`` (every object below, recursively), ``s3://bucket/key`` (one
      object; a key that is not an object is read as the prefix ``key/``), or a glob such as
      ``s3://bucket/t/*.jsonl.gz`` (``fnmatch`` on the whole key). Keys are read in sorted order;
      keys with a ``_`` or ``.`` component (``_SUCCESS``, ``_dead_letter/``) are skipped.
    * ``input_format``: ``auto`` (a JSON array for ``.json`` keys starting with ``[``, JSON lines
      otherwise), ``jsonl`` or ``json``; gzip and zstd are recognized by their magic bytes.
    * ``shard=(i, n)``: objects whose index in the listing is ``i`` modulo ``n``.
    * ``resume_state``: a :meth:`snapshot` of an earlier run; its positions are skipped.

    Positions are ``Position("s3://bucket/key", line)``. ``size_hint`` is in bytes.

    >>> src = S3Source("s3://lake/traces/dt=2026-11-21/", shard=(0, 2))
    >>> src.describe()
    's3://lake/traces/dt=2026-11-21/'
    """

    size_unit = "bytes"

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        s3: S3Config | None = None,
        batch_size: int = 256,
        input_format: str = "auto",
        shard: tuple[int, int] | None = None,
        resume_state: Any = None,
        max_concurrent_objects: int = 4,
    ) -> None:
        super().__init__()
        self.urls = [url] if isinstance(url, str) else list(url)
        self.url = ", ".join(self.urls)
        self.targets = [parse_s3_url(u) for u in self.urls]
        self.config = s3 or S3Config()
        self.batch_size = batch_size
        self.input_format = input_format
        self.shard = shard
        self.max_concurrent_objects = max(1, max_concurrent_objects)
        self.ledger = _Ledger(resume_state)
        self._resume = _Ledger(resume_state)  # frozen: read by the framing threads
        self.objects: list[tuple[str, str, int]] = []  # (bucket, key, size) this shard reads, in order
        self._client = S3Client(self.config)
        self._opened = False
        self._tg: TaskGroup | None = None
        self._stopped = False
        self._closing = threading.Event()
        self._pending: dict[str, int] = {}  # positions yielded and not yet acknowledged
        self._read_to_end: set[str] = set()
        self._started = False
        self._receivers: set[MemoryObjectReceiveStream[_Item]] = set()  # not yet drained
        self._bytes_read = 0  # size_done(): bodies read (several framing threads add to it)
        self._bytes_lock = threading.Lock()
        self._skipped_bytes: int | None = None

    def describe(self) -> str:
        return self.url

    def size_hint(self) -> int | None:
        """Bytes of the objects this shard reads (known after ``open``)."""
        return sum(size for _, _, size in self.objects) if self.objects else None

    def size_done(self) -> int | None:
        """Bytes of this shard's objects read so far (objects an earlier attempt completed count
        as read); known after ``open``."""
        if not self.objects:
            return None
        if self._skipped_bytes is None:  # the resume ledger is frozen: computed once
            done = self._resume.complete
            self._skipped_bytes = sum(size for b, k, size in self.objects if self.name(b, k) in done)
        return self._skipped_bytes + self._bytes_read

    def _count(self, n: int) -> None:
        with self._bytes_lock:
            self._bytes_read += n

    def stop(self) -> None:
        self._stopped = True

    async def open(self) -> None:
        if self._opened:
            return
        await self._client.open()
        try:
            self.objects = await self._list()
        except BaseException:
            await self._client.aclose()
            raise
        # the fetch tasks live as long as the source (open → aclose), not inside the batches()
        # generator: a consumer may abandon that generator (break) without closing it
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self._opened = True

    async def _list(self) -> list[tuple[str, str, int]]:
        """The objects every URL selects (each URL's in key order, each object once), this shard's."""
        objects: list[tuple[str, str, int]] = []
        seen: set[tuple[str, str]] = set()
        for url, t in zip(self.urls, self.targets, strict=True):
            for key, size in await self._list_one(url, t):
                if (t.bucket, key) not in seen:
                    seen.add((t.bucket, key))
                    objects.append((t.bucket, key, size))
        if self.shard is not None:
            i, n = self.shard
            objects = [o for j, o in enumerate(objects) if j % n == i]
        return objects

    async def _list_one(self, url: str, t: S3Url) -> list[tuple[str, int]]:
        prefix = t.list_prefix
        listed = [(o["Key"], int(o.get("Size", 0))) async for o in self._client.list_objects(t.bucket, prefix)]
        if t.pattern is None and t.key and not t.key.endswith("/"):
            exact = [o for o in listed if o[0] == t.key]
            if exact:
                listed = exact
            else:  # not an object: the "folder" of that name
                listed = [o for o in listed if o[0].startswith(t.key + "/")]
                prefix = t.key + "/"
        keys = sorted(
            (k, size)
            for k, size in listed
            if t.matches(k) and not k.endswith("/") and (k == t.key or not is_hidden(k[len(prefix) :]))
        )
        if not keys:
            raise InputMissingError(f"{url}: no objects (not landed yet?)")
        return keys

    @staticmethod
    def name(bucket: str, key: str) -> str:
        """The position source of an object: its ``s3://bucket/key`` URL."""
        return f"s3://{bucket}/{key}"

    async def batches(self) -> AsyncIterator[list[Envelope]]:
        """Batches in key order; an object's read error is raised after its earlier records."""
        if self._tg is None:
            raise ConnectorError(f"{self.url}: batches() before open()")
        if self._started:
            raise ConnectorError(f"{self.url}: batches() can be iterated once")
        self._started = True
        todo = [(b, k) for b, k, _ in self.objects if self.name(b, k) not in self.ledger.complete]
        order_send, order_recv = anyio.create_memory_object_stream[tuple[str, MemoryObjectReceiveStream[_Item]]](
            self.max_concurrent_objects
        )
        self._tg.start_soon(self._launch, todo, order_send)
        async with order_recv:
            async for name, recv in order_recv:
                async with recv:
                    async for item in recv:
                        if isinstance(item, BaseException):
                            raise item
                        if self._stopped:
                            return
                        self._pending[name] = self._pending.get(name, 0) + len(item)
                        yield item
                self._receivers.discard(recv)
                self._read_to_end.add(name)
                self._maybe_finish(name)
                if self._stopped:
                    return

    async def _launch(
        self,
        todo: list[tuple[str, str]],
        order: MemoryObjectSendStream[tuple[str, MemoryObjectReceiveStream[_Item]]],
    ) -> None:
        slots = anyio.Semaphore(self.max_concurrent_objects)
        limiter = anyio.CapacityLimiter(self.max_concurrent_objects)
        async with order, anyio.create_task_group() as tg:
            for bucket, key in todo:
                if self._stopped:
                    return
                await slots.acquire()
                send, recv = anyio.create_memory_object_stream[_Item](2)
                self._receivers.add(recv)
                try:
                    await order.send((self.name(bucket, key), recv))
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    slots.release()
                    return
                tg.start_soon(self._fetch, bucket, key, send, slots, limiter)

    async def _fetch(
        self,
        bucket: str,
        key: str,
        send: MemoryObjectSendStream[_Item],
        slots: anyio.Semaphore,
        limiter: anyio.CapacityLimiter,
    ) -> None:
        name = self.name(bucket, key)
        try:
            async with send:
                try:
                    resp = await self._client.call(name, self._client.raw.get_object, Bucket=bucket, Key=key)
                    body = resp["Body"]
                    try:
                        await anyio.to_thread.run_sync(self._frame, name, body, send, limiter=limiter)
                    finally:
                        body.close()
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return  # the reader went away (stop, close)
                except ConnectorError as exc:
                    await send.send(exc)
                except Exception as exc:
                    await send.send(ConnectorError(f"error reading {name}: {type(exc).__name__}: {exc}"))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            slots.release()

    def _frame(self, name: str, body: Any, send: MemoryObjectSendStream[_Item]) -> None:
        """Worker thread: frame the object's records into batches sent to the event loop."""
        resume = self._resume
        skip = name in resume.done
        size = self.batch_size
        batch: list[Envelope] = []
        try:
            stream = open_stream(_Body(body, self._closing, self._count), name, suffix_name=name)
            for line, payload in iter_records(stream, name, self.input_format):
                if isinstance(payload, ReadError):
                    self.read_errors.append((Position(name, line), payload.message))
                    continue
                if skip and resume.covers(name, line):
                    continue
                batch.append(Envelope(payload, Position(name, line)))
                if len(batch) >= size:
                    anyio.from_thread.run(send.send, batch)
                    batch = []
        except ValueError as exc:  # a JSON array that stopped parsing: one dead letter
            self.read_errors.append((Position(name, None), str(exc)))
        except ConnectorError:
            if batch:  # the records read before the fault are still scored
                anyio.from_thread.run(send.send, batch)
            raise
        except (OSError, EOFError) as exc:
            if batch:
                anyio.from_thread.run(send.send, batch)
            raise ConnectorError(f"error reading {name}: {exc}") from exc
        if batch:
            anyio.from_thread.run(send.send, batch)

    async def ack(self, positions: Sequence[Position]) -> None:
        """Record durable positions (any order); an object read to its end whose every record is
        acknowledged becomes ``complete`` and its intervals are dropped (the snapshot stays small)."""
        per: dict[str, list[int]] = {}
        covers = self.ledger.covers
        for p in positions:
            per.setdefault(p.source, [])
            if p.line is not None and not covers(p.source, p.line):  # at most once, even if repeated
                per[p.source].append(p.line)
                if p.source in self._pending:
                    self._pending[p.source] -= 1
        for name, lines in per.items():
            if lines and name not in self.ledger.complete:
                self.ledger.add(name, lines)
            self._maybe_finish(name)

    def _maybe_finish(self, name: str) -> None:
        if name in self._read_to_end and self._pending.get(name, 0) <= 0:
            self.ledger.finish(name)
            self._pending.pop(name, None)

    def snapshot(self) -> dict[str, Any]:
        """The ledger (``{"done": {url: [[first, last], ...]}, "complete": [url, ...]}``)."""
        return self.ledger.snapshot()

    async def aclose(self) -> None:
        if not self._opened:
            return
        self._opened = False
        self._closing.set()
        for recv in self._receivers:
            recv.close()  # wakes framing threads blocked on a full stream
        tg, self._tg = self._tg, None
        try:
            if tg is not None:
                tg.cancel_scope.cancel()
                await tg.__aexit__(None, None, None)
        finally:
            with anyio.CancelScope(shield=True):
                await self._client.aclose()
