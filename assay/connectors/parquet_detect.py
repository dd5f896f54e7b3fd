"""Parquet or JSON under an ``s3://`` prefix, decided when the source opens.

A local path is told apart when the run file is read (suffix, or the ``PAR1`` magic of the first
bytes); an ``s3://`` prefix can only be listed once the run starts. :class:`DetectedSource` lists
it then: when every object it selects ends in ``.parquet`` (or, with no telling suffix, the first
object starts with ``PAR1``), the Parquet source reads it, otherwise the JSON source. Everything
else is delegated to the chosen source. Listing needs the ``s3`` extra; reading Parquet the
``lake`` extra (the error says which).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from assay.connectors.base import Source
from assay.exceptions import ConnectorError
from assay.records import Envelope, Position

PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")
JSON_SUFFIXES = (".jsonl", ".ndjson", ".json", ".gz", ".zst")


async def s3_holds_parquet(urls: Sequence[str], options: Any) -> bool:
    """Whether the objects the URLs select are Parquet (see the module docs)."""
    from assay.connectors.s3_client import S3Client, is_hidden, parse_s3_url, s3_config

    async with S3Client(s3_config(options)) as client:
        keys: list[tuple[str, str]] = []
        for url in urls:
            t = parse_s3_url(url)
            async for obj in client.list_objects(t.bucket, t.list_prefix):
                key = obj["Key"]
                if key.endswith("/") or not t.matches(key) or is_hidden(key[len(t.list_prefix) :]):
                    continue
                keys.append((t.bucket, key))
                if len(keys) >= 1000:
                    break
        if not keys:
            return False  # the JSON source names the empty prefix
        names = [k.lower() for _, k in keys]
        if all(n.endswith(PARQUET_SUFFIXES) for n in names):
            return True
        if any(n.endswith(JSON_SUFFIXES) for n in names):
            return False
        bucket, key = keys[0]
        resp = await client.call(
            f"s3://{bucket}/{key}", client.raw.get_object, Bucket=bucket, Key=key, Range="bytes=0-3"
        )
        body = resp["Body"]
        try:
            head = await body.read()
        finally:
            body.close()
        return bool(head == b"PAR1")


class DetectedSource(Source):
    """The Parquet or the JSON source of an ``s3://`` section, chosen at :meth:`open`."""

    def __init__(self, config: Any, ctx: Any, *, json_source: Callable[[], Source]) -> None:
        super().__init__()
        self.config = config
        self.ctx = ctx
        self._json_source = json_source
        self.inner: Source | None = None

    def _chosen(self) -> Source:
        if self.inner is None:
            raise ConnectorError("source used before open()")
        return self.inner

    async def open(self) -> None:
        if self.inner is not None:
            return
        if await s3_holds_parquet(self.config.paths, getattr(self.ctx, "options", None)):
            from assay.connectors.builtin import make_parquet_source

            inner = make_parquet_source(self.config, self.ctx)
        else:
            inner = self._json_source()
        await inner.open()
        self.inner = inner
        self.read_errors = inner.read_errors

    def batches(self) -> AsyncIterator[list[Envelope]]:
        return self._chosen().batches()

    async def ack(self, positions: Sequence[Position]) -> None:
        await self._chosen().ack(positions)

    def snapshot(self) -> Any:
        return self.inner.snapshot() if self.inner is not None else self.ctx.resume_state

    def stop(self) -> None:
        if self.inner is not None:
            self.inner.stop()

    def size_hint(self) -> int | None:
        return self.inner.size_hint() if self.inner is not None else None

    @property
    def size_unit(self) -> str:  # type: ignore[override]
        return self.inner.size_unit if self.inner is not None else "records"

    def size_done(self) -> int | None:
        return self.inner.size_done() if self.inner is not None else None

    def describe(self) -> str:
        return self.inner.describe() if self.inner is not None else ", ".join(self.config.paths)

    async def aclose(self) -> None:
        if self.inner is not None:
            await self.inner.aclose()


__all__ = ["DetectedSource", "s3_holds_parquet"]
