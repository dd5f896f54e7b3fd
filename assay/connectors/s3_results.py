"""Results under an ``s3://`` prefix, read and written synchronously: ``assay report`` reads them
and ``assay merge`` reads and writes the shard summaries (extra ``assay[s3]``: aiobotocore).

The report and the merge are synchronous; the S3 client is async. :class:`S3Reader` owns one
:class:`~assay.connectors.s3_client.S3Client` (endpoint, region and credentials from the standard
AWS chain, or an :class:`~assay.connectors.s3_client.S3Config`) on an event loop in a daemon
thread, and the report's calls cross over through an anyio blocking portal. Objects are streamed
in 1 MiB reads, never held whole. One reader serves every location of a report (a month of
``dt=*`` partitions shares one connection pool); :func:`close_shared_reader` closes it.

::

    store = S3Store("s3://lake/scores/dt=2026-11-21/")
    store.list("part-*.jsonl.gz")      # ['part-00000-00000.jsonl.gz', ...]
    expand_s3("s3://lake/scores/dt=*/")  # ['s3://lake/scores/dt=2026-11-20/', ...]
"""

from __future__ import annotations

import fnmatch
import io
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import IO, Any, TypeVar

import anyio
from anyio.from_thread import BlockingPortal

from assay.connectors.s3_client import S3Client, S3Config, parse_s3_url
from assay.exceptions import ConfigError, ConnectorError

__all__ = ["S3Reader", "S3ResultsFS", "S3Store", "close_shared_reader", "expand_s3", "shared_reader"]

T = TypeVar("T")
CHUNK = 1 << 20


class S3Reader:
    """A synchronous face over one async S3 client (see the module docstring).

    Nothing happens in ``__init__``; :meth:`open` starts the loop thread and the client,
    :meth:`close` stops both (idempotent). Errors are ConnectorErrors naming the URL.
    """

    def __init__(self, config: S3Config | None = None) -> None:
        self.config = config or S3Config()
        self.client = S3Client(self.config)
        self._portal: BlockingPortal | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> S3Reader:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        with self._lock:
            if self._portal is not None:
                return
            ready: Future[BlockingPortal] = Future()
            # a daemon thread: a reader nobody closed never holds the interpreter's exit
            thread = threading.Thread(target=anyio.run, args=(_serve, ready), name="assay-s3-report", daemon=True)
            thread.start()
            portal = ready.result(timeout=60)
            try:
                portal.call(self.client.open)
            except BaseException:
                portal.call(portal.stop)
                thread.join()
                raise
            self._portal, self._thread = portal, thread

    @property
    def is_open(self) -> bool:
        return self._portal is not None

    def close(self) -> None:
        with self._lock:
            portal, thread = self._portal, self._thread
            self._portal = self._thread = None
        if portal is None or thread is None:
            return
        try:
            portal.call(self.client.aclose)
        finally:
            portal.call(portal.stop)
            thread.join()

    def call(self, fn: Callable[..., Awaitable[T]], /, *args: Any) -> T:
        """Run ``await fn(*args)`` on the reader's loop and return its result (opens on first use)."""
        if self._portal is None:
            self.open()
        assert self._portal is not None
        return self._portal.call(fn, *args)

    def list(self, bucket: str, prefix: str) -> list[tuple[str, int]]:
        """``(key, size)`` of every object under ``prefix``, in key order."""

        async def collect() -> list[tuple[str, int]]:
            return [(o["Key"], int(o.get("Size", 0))) async for o in self.client.list_objects(bucket, prefix)]

        return self.call(collect)

    def open_object(self, bucket: str, key: str) -> IO[bytes]:
        """A buffered binary stream of the object's bytes (read 1 MiB at a time)."""
        url = f"s3://{bucket}/{key}"

        async def get() -> Any:
            resp = await self.client.call(url, self.client.raw.get_object, Bucket=bucket, Key=key)
            return resp["Body"]

        body = self.call(get)
        return io.BufferedReader(_Body(self, body, url), CHUNK)


async def _serve(ready: Future[BlockingPortal]) -> None:
    try:
        async with BlockingPortal() as portal:
            ready.set_result(portal)
            await portal.sleep_until_stopped()
    except BaseException as exc:
        if not ready.done():  # the opener waits for the portal: tell it why there is none
            ready.set_exception(exc)
        raise


class _Body(io.RawIOBase):
    """A sync view of an async response body, read through the reader's portal.

    Once the body said end of stream, further reads answer 0 without touching it: aiohttp logs a
    warning with a stack trace ("Multiple access to StreamReader in eof state") when a body at
    its end is read again, which buffered readers do (every ``read()``/``readline()`` at the end)."""

    def __init__(self, reader: S3Reader, body: Any, url: str) -> None:
        self.reader = reader
        self.body = body
        self.url = url
        self.eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self.eof or len(b) == 0:
            return 0

        async def read(n: int) -> bytes:
            try:
                return bytes(await self.body.read(n))
            except Exception as exc:
                raise ConnectorError(f"error reading {self.url}: {type(exc).__name__}: {exc}") from exc

        data = self.reader.call(read, len(b))
        if not data:
            self.eof = True
            return 0
        memoryview(b).cast("B")[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed and self.reader.is_open:
            body = self.body

            async def release() -> None:
                body.close()

            try:
                self.reader.call(release)
            finally:
                super().close()
        else:
            super().close()


class S3Store:
    """One results location under ``s3://bucket/prefix/`` (a :class:`~assay.report.store.ResultStore`).

    The prefix is listed once, on first use: a published results location does not change while
    it is read.
    """

    def __init__(self, location: str, *, reader: S3Reader | None = None) -> None:
        url = parse_s3_url(location)
        if url.pattern is not None:
            raise ConfigError(f"report: {location!r}: a pattern names several runs; expand it first (expand_s3)")
        self.location = location
        self.bucket = url.bucket
        self.prefix = url.key.rstrip("/") + "/" if url.key.strip("/") else ""
        self.reader = reader
        self._names: dict[str, int] | None = None

    def _reader(self) -> S3Reader:
        return self.reader or shared_reader()

    def _listing(self) -> dict[str, int]:
        if self._names is None:
            n = len(self.prefix)
            self._names = {key[n:]: size for key, size in self._reader().list(self.bucket, self.prefix)}
        return self._names

    def list(self, pattern: str) -> list[str]:
        """Names (relative to the prefix) matching ``pattern``; ``*`` does not cross ``/``."""
        parts = pattern.count("/")
        return sorted(
            name for name in self._listing() if name.count("/") == parts and fnmatch.fnmatchcase(name, pattern)
        )

    def open(self, name: str) -> IO[bytes]:
        """The bytes of ``name`` (as listed), streamed."""
        return self._reader().open_object(self.bucket, self.prefix + name)

    def exists(self, name: str) -> bool:
        """Whether the object ``name`` exists under the prefix."""
        return name in self._listing()


class S3ResultsFS:
    """An ``s3://bucket/prefix/`` of results that ``assay merge`` reads and writes
    (:class:`~assay.pipeline.merge.ResultsFS`): an :class:`S3Store` with its own :class:`S3Reader`
    (opened on first use; :meth:`close` closes it). A PutObject appears whole or not at all, so
    writes are atomic."""

    def __init__(self, location: str, s3: Any = None) -> None:
        from assay.connectors.builtin import s3_options

        self.reader = S3Reader(s3_options(s3))
        self.store = S3Store(location, reader=self.reader)

    def list(self) -> list[str]:
        return self.store.list("*")

    def read_bytes(self, name: str) -> bytes:
        with self.store.open(name) as f:
            return f.read()

    def write_bytes(self, name: str, data: bytes) -> None:
        client, bucket, key = self.reader.client, self.store.bucket, self.store.prefix + name

        async def put() -> None:
            await client.call(f"s3://{bucket}/{key}", client.raw.put_object, Bucket=bucket, Key=key, Body=data)

        self.reader.call(put)

    def remove(self, name: str) -> None:
        self.reader.call(self.reader.client.delete_keys, self.store.bucket, [self.store.prefix + name])

    def close(self) -> None:
        self.reader.close()


def expand_s3(location: str, *, reader: S3Reader | None = None) -> list[str]:
    """The result locations an ``s3://`` pattern selects (``s3://lake/scores/dt=*/``), as
    ``s3://bucket/dir/`` URLs in key order; a location without a pattern is returned as is.
    A pattern that selects nothing raises ConfigError."""
    url = parse_s3_url(location)
    if url.pattern is None:
        return [location]
    pattern = url.key.rstrip("/")
    depth = pattern.count("/") + 1
    found: set[str] = set()
    for key, _size in (reader or shared_reader()).list(url.bucket, url.list_prefix):
        parts = key.split("/")
        if len(parts) > depth:  # an object inside a directory the pattern names
            directory = "/".join(parts[:depth])
            if fnmatch.fnmatchcase(directory, pattern):
                found.add(directory)
    if not found:
        raise ConfigError(f"report: no results location matches {location!r}")
    return [url.url(d + "/") for d in sorted(found)]


_shared: list[S3Reader] = []
_shared_lock = threading.Lock()


def shared_reader() -> S3Reader:
    """The process's reader for ``s3://`` report locations (the AWS chain's settings)."""
    with _shared_lock:
        if not _shared:
            _shared.append(S3Reader())
        return _shared[0]


def close_shared_reader() -> None:
    """Close the shared reader, if one was opened (the next use opens a new one)."""
    with _shared_lock:
        readers = list(_shared)
        _shared.clear()
    for r in readers:
        r.close()
