"""Write result rows (or dead letters) as deterministic JSON-lines parts under an S3 prefix.

Keys are ``{prefix}-{shard:05d}-{seq:05d}.jsonl[.gz|.zst]``, as the directory sink names its
files, so a rerun of the same run writes the same keys. A part becomes visible only once it is
complete: a small part is one PutObject, a large one a multipart upload in ``PART_SIZE`` pieces
(memory stays bounded by one piece). ``flush`` completes the current part: that is what makes
rows durable before their source positions are acknowledged.

Outputs of earlier attempts never mix with this run's:

* ``resume_state=None`` (start over): ``open`` deletes ``_SUCCESS`` first, then
  ``_SUMMARY.json``, then the earlier ``{prefix}-*`` parts, and aborts their unfinished uploads;
* ``resume_state=snapshot()`` of an interrupted run: ``open`` deletes this shard's parts that
  are not in the snapshot (completed after the last checkpoint) and continues at its ``seq``.

``publish`` writes ``_SUMMARY.json``, then ``_SUCCESS`` last and only on success.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import re
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.to_thread
import orjson

from assay.connectors.base import Sink
from assay.connectors.layout import DEAD_LETTER, DEAD_PREFIX, RESULTS_PREFIX, SUCCESS, SUMMARY, part_name, part_prefix
from assay.connectors.layout import STAGING as STAGING_NAME
from assay.connectors.s3_client import PART_SIZE, S3Client, S3Config, parse_s3_url
from assay.exceptions import ConfigError
from assay.paths import safe_join

STAGING = f"{STAGING_NAME}/"
SWAP = "_SWAP.json"
OPEN = "_OPEN"
"""In a staging area from its start-over until it is swapped in: a resumed publish whose staging
area is empty and lacks it was swapped in already (a stop came before the run was forgotten)."""
_EXT = {"none": "", "gzip": ".gz", "zstd": ".zst"}


class _Encoder:
    """Compresses rows into an in-memory buffer that the sink drains piece by piece."""

    def __init__(self, compression: str) -> None:
        self.buf = io.BytesIO()
        self.out: Any
        if compression == "gzip":
            self.out = gzip.GzipFile(fileobj=self.buf, mode="wb", compresslevel=6, mtime=0)
        elif compression == "zstd":
            import zstandard

            self.out = zstandard.ZstdCompressor(level=3).stream_writer(self.buf, closefd=False)
        else:
            self.out = self.buf
        self.rows = 0

    def write(self, rows: Sequence[bytes]) -> int:
        self.out.write(b"\n".join(rows) + b"\n")
        self.rows += len(rows)
        return self.buf.tell()

    def take(self) -> bytes:
        data = self.buf.getvalue()
        self.buf.seek(0)
        self.buf.truncate()
        return data

    def finish(self) -> bytes:
        if self.out is not self.buf:
            self.out.close()
        return self.take()


class _Upload:
    """One part being written: pieces go to a multipart upload once they exceed PART_SIZE."""

    def __init__(self, key: str, compression: str) -> None:
        self.key = key
        self.enc = _Encoder(compression)
        self.upload_id: str | None = None
        self.pieces: list[dict[str, Any]] = []
        self.body: bytes | None = None
        """A full part's last bytes, uploaded when the next commit completes it."""


class S3Sink(Sink):
    """JSON-lines parts under an ``s3://bucket/prefix/`` (see the module docs).

    * ``compression``: ``auto`` (= ``none``, as for a local directory), ``none``, ``gzip``, ``zstd``;
    * ``max_rows_per_part``: a part also ends after that many rows;
    * ``markers``: this sink writes ``_SUMMARY.json`` / ``_SUCCESS`` (default: yes, except for the
      dead-letter role, ``prefix="dead"``, see :meth:`dead_letter`);
    * ``start_over_scope``: ``"prefix"`` (a start-over deletes every ``{prefix}-*`` part: a run with
      fewer workers leaves no parts of the earlier shards) or ``"shard"`` (only this shard's, for
      worker processes whose parent cleared the prefix with :meth:`clear`).

    >>> S3Sink("s3://lake/scores/dt=2026-11-21/", compression="gzip").key_for(3)
    'scores/dt=2026-11-21/part-00000-00003.jsonl.gz'
    """

    def __init__(
        self,
        url: str,
        *,
        s3: S3Config | None = None,
        prefix: str = RESULTS_PREFIX,
        shard: int = 0,
        compression: str = "auto",
        max_rows_per_part: int | None = None,
        resume_state: Any = None,
        markers: bool | None = None,
        start_over_scope: str = "prefix",
        staged: bool = False,
    ) -> None:
        target = parse_s3_url(url)
        if target.pattern is not None:
            raise ConfigError(f"sink {url!r}: an S3 sink takes a prefix, not a glob")
        if target.key.removesuffix(".gz").removesuffix(".zst").endswith((".jsonl", ".ndjson", ".json")):
            raise ConfigError(f"sink {url!r}: an S3 sink takes a prefix (s3://bucket/scores/), not an object name")
        if compression not in ("auto", "none", "gzip", "zstd"):
            raise ConfigError(f"sink.compression: unknown {compression!r} (auto | none | gzip | zstd)")
        if start_over_scope not in ("prefix", "shard"):
            raise ConfigError(f"sink: unknown start_over_scope {start_over_scope!r} (prefix | shard)")
        self.url = url if url.endswith("/") else url + "/"
        self.bucket = target.bucket
        self.dir = target.key if not target.key or target.key.endswith("/") else target.key + "/"
        self.staged = staged
        self.pdir = self.dir + STAGING if staged else self.dir
        """Where the parts are written: the output's prefix, or its staging area."""
        self.config = s3 or S3Config()
        self.prefix = prefix
        self.shard = shard
        self.compression = "none" if compression == "auto" else compression
        self.max_rows = max_rows_per_part
        # a full part is completed by the next commit: commit as soon as one is full (and on the
        # clock, every limits.commit_interval_s, which ends the current part as a smaller object)
        self.commit_every_rows = max_rows_per_part
        self.resume_state = resume_state
        self.markers = prefix != DEAD_PREFIX if markers is None else markers
        self.reset_only_shard = start_over_scope == "shard"
        """A start-over removes only this shard's parts (the engine's name for ``start_over_scope``)."""
        self.parts: list[str] = list(resume_state.get("parts", [])) if resume_state else []
        self.seq = int(resume_state.get("seq", 0)) if resume_state else 0
        self.rows_written = 0
        self._part: _Upload | None = None
        self._full: list[_Upload] = []
        """Parts that reached ``max_rows_per_part`` since the last commit (completed at ``flush``:
        a visible part holds committed rows only)."""
        self._client = S3Client(self.config)
        self._open = False

    @classmethod
    def dead_letter(cls, url: str, **kwargs: Any) -> S3Sink:
        """The dead-letter sink of a results prefix: ``dead-*`` parts under ``<url>/_dead_letter/``,
        no markers of its own."""
        base = url if url.endswith("/") else url + "/"
        return cls(f"{base}{DEAD_LETTER}/", prefix=DEAD_PREFIX, markers=False, **kwargs)

    def describe(self) -> str:
        return self.url

    def key_for(self, seq: int) -> str:
        return self.pdir + part_name(self.prefix, self.shard, seq, f".jsonl{_EXT[self.compression]}")

    def key_under(self, base: str, name: str) -> str:
        """The key ``name`` under the prefix ``base`` (``..`` and absolute names refused)."""
        return safe_join(self._where(base), name).removeprefix(self._where(""))

    def _where(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    async def open(self) -> None:
        if self._open:
            return
        await self._client.open()
        self._open = True
        try:
            if self.resume_state is None:
                await self.clear(scope="shard" if self.reset_only_shard else "prefix")
            else:
                await self._drop_after_snapshot()
        except BaseException:
            await self._client.aclose()
            self._open = False
            raise

    async def clear(self, *, scope: str = "prefix") -> None:
        """Remove the outputs of earlier attempts: ``_SUCCESS`` first (so no reader ever sees a
        marker beside a partial output), then ``_SUMMARY.json``, then the parts and their
        unfinished uploads (every shard's with ``scope="prefix"``, this shard's with ``"shard"``).
        A staged sink clears only its staging area: the whole output stays until ``publish``."""
        if self.markers and not self.staged:
            await self._client.delete_keys(self.bucket, [self.dir + SUCCESS])
            await self._client.delete_keys(self.bucket, [self.dir + SUMMARY])
        if self.staged:
            await self._client.delete_keys(self.bucket, [self.pdir + SUMMARY, self.pdir + SWAP])
        mine = self.pdir + (part_prefix(self.prefix, self.shard) if scope == "shard" else f"{self.prefix}-")
        await self._client.abort_uploads(self.bucket, mine)
        stale = [o["Key"] async for o in self._client.list_objects(self.bucket, mine) if self._is_part(o["Key"])]
        await self._client.delete_keys(self.bucket, stale)
        if self.staged:
            opened = self.pdir + OPEN
            await self._client.call(self._where(opened), self._client.raw.put_object, Bucket=self.bucket, Key=opened)

    def _is_part(self, key: str, base: str | None = None) -> bool:
        name = key[len(base or self.pdir) :]
        return re.fullmatch(rf"{re.escape(self.prefix)}-\d{{5}}-\d{{5}}\.jsonl(\.gz|\.zst)?", name) is not None

    async def _drop_after_snapshot(self) -> None:
        """Resume: this shard's parts completed after the checkpoint would repeat rows; drop them."""
        if self.markers and not self.staged:
            await self._client.delete_keys(self.bucket, [self.dir + SUCCESS])
        mine = self.pdir + part_prefix(self.prefix, self.shard)
        await self._client.abort_uploads(self.bucket, mine)
        keep = {k.rsplit("/", 1)[-1] for k in self.parts}  # by name: a finished swap moved them up
        extra = [
            o["Key"]
            async for o in self._client.list_objects(self.bucket, mine)
            if self._is_part(o["Key"]) and o["Key"].rsplit("/", 1)[-1] not in keep
        ]
        await self._client.delete_keys(self.bucket, extra)

    async def whole(self) -> bool:
        """Whether a whole output is published here (``_SUCCESS``)."""
        if self._open:
            return await self._client.exists(self.bucket, self.dir + SUCCESS)
        async with S3Client(self.config) as client:
            return await client.exists(self.bucket, self.dir + SUCCESS)

    async def withdraw(self) -> None:
        """Remove the success marker: the output is about to change."""
        if self.markers:
            await self._client.delete_keys(self.bucket, [self.dir + SUCCESS])

    async def settle(self) -> bool:
        """Finish a swap a stop cut short (see ``_swap``); True when there was one."""
        if not await self._client.exists(self.bucket, self.dir + STAGING + SWAP):
            return False
        await self._swap()
        return True

    async def discard(self) -> None:
        """Drop the staging area (a staged run that is not swapped in)."""
        if self.staged:
            await self._client.abort_uploads(self.bucket, self.pdir)
            keys = [o["Key"] async for o in self._client.list_objects(self.bucket, self.pdir)]
            await self._client.delete_keys(self.bucket, keys)

    async def _swap(self) -> None:
        """Swap a whole staged output in: earlier parts not in the new output removed, the staged
        ones copied into place and removed from the staging area. ``_SWAP.json`` (the new parts'
        names, written first) lets a stop in the middle be finished by ``settle``."""
        raw = self._client.raw
        staging = self.dir + STAGING
        body = await self._client.call(
            self._where(staging + SWAP), raw.get_object, Bucket=self.bucket, Key=staging + SWAP
        )
        names = set(orjson.loads(await body["Body"].read()))
        old = [
            o["Key"]
            async for o in self._client.list_objects(self.bucket, f"{self.dir}{self.prefix}-")
            if self._is_part(o["Key"], self.dir) and o["Key"][len(self.dir) :] not in names
        ]
        await self._client.delete_keys(self.bucket, old)
        present = {o["Key"] async for o in self._client.list_objects(self.bucket, staging)}
        for name in sorted(names):
            if staging + name in present:
                await self._client.call(
                    self._where(self.dir + name),
                    raw.copy_object,
                    Bucket=self.bucket,
                    Key=self.dir + name,
                    CopySource={"Bucket": self.bucket, "Key": staging + name},
                )
        await self._client.delete_keys(self.bucket, sorted(present))

    async def write_batch(self, rows: Sequence[bytes], keys: Sequence[str | None] | None = None) -> None:
        i = 0
        while i < len(rows):
            if self._part is None:
                self._part = _Upload(self.key_for(self.seq), self.compression)
                self.seq += 1
            part = self._part
            take = len(rows) - i
            if self.max_rows:
                take = min(take, self.max_rows - part.enc.rows)
            size = await anyio.to_thread.run_sync(part.enc.write, rows[i : i + take])
            i += take
            self.rows_written += take
            if size >= PART_SIZE:
                await self._upload_piece(part, part.enc.take())
            if self.max_rows and part.enc.rows >= self.max_rows:
                await self._seal(part)
                self._full.append(part)
                self._part = None

    async def _seal(self, part: _Upload) -> None:
        """A full part: its last bytes uploaded as the last piece (or kept for one PutObject)."""
        data = await anyio.to_thread.run_sync(part.enc.finish)
        if part.upload_id is None:
            part.body = data
        else:
            if data:
                await self._upload_piece(part, data)
            part.body = b""

    async def _upload_piece(self, part: _Upload, data: bytes) -> None:
        raw = self._client.raw
        where = self._where(part.key)
        if part.upload_id is None:
            out = await self._client.call(where, raw.create_multipart_upload, Bucket=self.bucket, Key=part.key)
            part.upload_id = out["UploadId"]
        number = len(part.pieces) + 1
        out = await self._client.call(
            where,
            raw.upload_part,
            Bucket=self.bucket,
            Key=part.key,
            UploadId=part.upload_id,
            PartNumber=number,
            Body=data,
        )
        part.pieces.append({"PartNumber": number, "ETag": out["ETag"]})

    async def _complete(self, part: _Upload) -> None:
        """Make a part visible (and durable) from here on."""
        raw = self._client.raw
        where = self._where(part.key)
        try:
            if part.body is None:
                await self._seal(part)
            if part.upload_id is None:
                await self._client.call(where, raw.put_object, Bucket=self.bucket, Key=part.key, Body=part.body or b"")
            else:
                await self._client.call(
                    where,
                    raw.complete_multipart_upload,
                    Bucket=self.bucket,
                    Key=part.key,
                    UploadId=part.upload_id,
                    MultipartUpload={"Parts": part.pieces},
                )
        except BaseException:
            if part.upload_id is not None:
                with anyio.CancelScope(shield=True):
                    await self._abort(part)
            raise
        self.parts.append(part.key)

    async def _abort(self, part: _Upload) -> None:
        with contextlib.suppress(Exception):  # best effort: the next open() aborts leftovers too
            await self._client.raw.abort_multipart_upload(Bucket=self.bucket, Key=part.key, UploadId=part.upload_id)

    async def flush(self) -> None:
        """Complete the full parts and the current part (if it has rows): the next row starts the
        next ``seq``."""
        full, self._full = self._full, []
        for i, part in enumerate(full):
            try:
                await self._complete(part)
            except BaseException:
                self._full = full[i + 1 :]
                raise
        if self._part is not None and self._part.enc.rows:
            part, self._part = self._part, None
            await self._complete(part)

    def snapshot(self) -> dict[str, Any]:
        """``{"parts": [completed keys], "seq": next seq}`` (after ``flush``)."""
        return {"parts": list(self.parts), "seq": self.seq - len(self._full) - (self._part is not None)}

    async def publish(self, summary: dict[str, Any], *, success: bool, summary_name: str | None = None) -> str | None:
        """Complete the rows (a staged sink: swap them in when ``success``), write the summary
        (``summary_name``, default ``_SUMMARY.json``), then ``_SUCCESS`` last when ``success``.
        Returns the summary's URL (None for the dead-letter role, which publishes nothing). A
        staged run that is not whole leaves the output as it was: its summary goes to the staging
        area. An empty staging area without ``_OPEN`` was swapped in already: it is not again."""
        await self.flush()
        raw = self._client.raw
        names = []
        if success and self.staged:
            names = [
                o["Key"][len(self.pdir) :]
                async for o in self._client.list_objects(self.bucket, f"{self.pdir}{self.prefix}-")
                if self._is_part(o["Key"])
            ]
        if success and self.staged and (names or await self._client.exists(self.bucket, self.pdir + OPEN)):
            swap = self.pdir + SWAP
            await self._client.call(
                self._where(swap), raw.put_object, Bucket=self.bucket, Key=swap, Body=orjson.dumps(names)
            )
            await self._swap()
        if not self.markers:
            return None
        base = self.pdir if self.staged and not success else self.dir
        key = self.key_under(base, summary_name or SUMMARY)
        body = orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS, default=str)
        await self._client.call(self._where(key), raw.put_object, Bucket=self.bucket, Key=key, Body=body)
        if success:
            done = self.dir + SUCCESS
            await self._client.call(self._where(done), raw.put_object, Bucket=self.bucket, Key=done, Body=b"")
        return self._where(key)

    async def aclose(self) -> None:
        """Close. Parts with rows not yet flushed are not completed (their uploads are aborted): a
        failed or stopped run never makes rows visible that its checkpoint does not count."""
        if not self._open:
            return
        self._open = False
        with anyio.CancelScope(shield=True):
            try:
                dropped = [*self._full, *([self._part] if self._part is not None else [])]
                self._full, self._part = [], None
                self.seq -= len(dropped)  # their numbers are reused by the next attempt
                for part in dropped:
                    if part.upload_id is not None:
                        await self._abort(part)
            finally:
                await self._client.aclose()
