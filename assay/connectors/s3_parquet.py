"""Parquet results on S3 (extras ``assay[s3]`` and ``assay[lake]``): a local Parquet output's parts,
names, schema and markers under an ``s3://`` prefix (docs/lake.md, docs/s3.md).

::

    sink: {path: "s3://lake/scores/dt={{ ds }}/", format: parquet}     # or s3://lake/scores/2026-11-21.parquet

* Rows are staged on local disk under the run's ``state_dir`` (``lake/<sink key>/``) by a
  :class:`~assay.connectors.parquet_sink.ParquetSink`, with its Arrow segments, commits and exact
  resume. Nothing reaches S3 before :meth:`S3ParquetSink.publish`.
* Publishing a whole output: the local sink writes the Parquet parts (the names, cuts, row groups
  and schema of a local output); then, on S3, ``_SUCCESS`` is removed, unfinished uploads under the
  prefix are aborted, each part is uploaded under its name (an object appears whole or not at all),
  the parts of earlier outputs that none replaces are deleted, ``_SUMMARY.json`` is written and
  ``_SUCCESS`` last; then the local staging is removed. A key ending in ``.parquet`` is one object,
  with its summary ``<key>._SUMMARY.json`` beside it (no ``_SUCCESS``, as for a local file).
* A run that does not succeed removes ``_SUCCESS`` and writes its summary: the parts of the last
  whole output stay, as for a local output, and its staged rows stay for the resume. A run killed
  before it publishes has written no part, summary or marker on S3 (its dead letters, JSON lines of
  the S3 sink, go as they come); one killed while publishing leaves no ``_SUCCESS``, and its resume
  publishes again from the staged rows.
* A ``--shard i/N`` run uploads the parts of the shards staged in its ``state_dir`` and its shard
  summary, and replaces only those shards' parts.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import orjson

from assay.connectors.layout import PARQUET_SUFFIX, RESULTS_PREFIX, SUCCESS, SUMMARY, part_pattern, part_prefix
from assay.connectors.parquet_segments import segment_shard
from assay.connectors.parquet_sink import ParquetSink, StagedSink
from assay.connectors.s3_client import S3Client, S3Config, parse_s3_url
from assay.exceptions import ConfigError, ConnectorError
from assay.paths import safe_join

_PART = part_pattern(RESULTS_PREFIX, PARQUET_SUFFIX)


def staging_path(url: str, state_dir: str | Path) -> str:
    """Where the rows bound for ``url`` are staged: ``<state_dir>/lake/<sink key>/`` (a prefix), or
    the ``.parquet`` file of that name in it (one object)."""
    from assay.connectors.state_keys import SinkKey

    local = safe_join(Path(state_dir), "lake", SinkKey.key_for(url))
    return str(safe_join(local, url.rpartition("/")[2])) if url.endswith(".parquet") else f"{local}/"


class S3ParquetSink(StagedSink[ParquetSink]):
    """Parquet parts under ``url`` (see the module docs), built by ``staging``: the local Parquet
    sink at :func:`staging_path` that stages this writer's rows.

    >>> sink = S3ParquetSink("s3://lake/scores/dt=2026-11-21/", ParquetSink(".assay/lake/k/"))
    >>> sink.summary_key(None), sink.marker
    ('scores/dt=2026-11-21/_SUMMARY.json', 'scores/dt=2026-11-21/_SUCCESS')
    """

    def __init__(self, url: str, staging: ParquetSink, *, s3: S3Config | None = None) -> None:
        target = parse_s3_url(url)
        if target.pattern is not None:
            raise ConfigError(f"sink {url!r}: Parquet on S3 takes a prefix or a .parquet key, not a glob")
        self.url = url
        self.bucket = target.bucket
        self.single = target.key.endswith(".parquet")
        """One object (a ``.parquet`` key), not a prefix of parts."""
        folder, _, self.name = target.key.rpartition("/")
        if self.single:
            self.dir = f"{folder}/" if folder else ""
        else:
            self.dir = target.key if not target.key or target.key.endswith("/") else target.key + "/"
        self.marker: str | None = None if self.single else self.dir + SUCCESS
        self.staging = staging
        self.local = Path(staging.path) if staging.directory else Path(staging.path).parent
        self.config = s3 or S3Config()

    def describe(self) -> str:
        return f"{self.url} (parquet)"

    def summary_key(self, summary_name: str | None) -> str:
        if summary_name is not None:
            return safe_join(f"s3://{self.bucket}/{self.dir}", summary_name).removeprefix(f"s3://{self.bucket}/")
        return self.dir + (f"{self.name}.{SUMMARY}" if self.single else SUMMARY)

    def _where(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    async def whole(self) -> bool:
        """Whether a whole output is published here: ``_SUCCESS``, or the one object."""
        async with S3Client(self.config) as client:
            return await client.exists(self.bucket, self.marker or self.dir + self.name)

    async def withdraw(self) -> None:
        """Remove ``_SUCCESS``: the output is about to change."""
        if self.marker is not None:
            async with S3Client(self.config) as client:
                await client.delete_keys(self.bucket, [self.marker])

    async def discard(self) -> None:
        """Drop the staged rows (a run that started over beside a whole output and read nothing)."""
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(self.local, ignore_errors=True))

    async def publish(self, summary: dict[str, Any], *, success: bool, summary_name: str | None = None) -> str | None:
        """Upload the parts when the output is whole (``success``) or is one shard's
        (``summary_name``), then the summary, then ``_SUCCESS`` when ``success`` (see the module
        docs); ``_SUCCESS`` is removed first. Returns the summary's URL."""
        key = self.summary_key(summary_name)
        body = orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS, default=str)
        parts: list[Path] = []
        shards: set[int] | None = None  # whose parts this output replaces (None: every shard's)
        if success or summary_name is not None:
            # the local sink writes the parts; its segments stay until S3 holds them
            await self.staging.publish(summary, success=False, summary_name=summary_name or SUMMARY)
            if summary_name is not None and not self.single:
                shards = await anyio.to_thread.run_sync(self._staged_shards)
            parts = await anyio.to_thread.run_sync(self._local_parts, shards)
        async with S3Client(self.config) as client:
            if self.marker is not None:
                await client.delete_keys(self.bucket, [self.marker])
            if parts:
                await self._replace(client, parts, shards)
            await client.call(self._where(key), client.raw.put_object, Bucket=self.bucket, Key=key, Body=body)
            if success and self.marker is not None:
                await client.call(
                    self._where(self.marker), client.raw.put_object, Bucket=self.bucket, Key=self.marker, Body=b""
                )
        if success:
            await self.discard()
        return self._where(key)

    def _staged_shards(self) -> set[int]:
        """The shards with rows staged here (a ``--shard`` run publishes those)."""
        where = self.staging.staging_dir
        found = (segment_shard(f.name) for f in where.iterdir() if not f.name.startswith(".")) if where.is_dir() else ()
        return {s for s in found if s is not None}

    def _local_parts(self, shards: set[int] | None) -> list[Path]:
        """The Parquet parts the local sink wrote (of ``shards`` only, when given)."""
        if self.single:
            return [self.local / self.name]
        out = []
        for f in sorted(self.local.iterdir()):
            m = _PART.fullmatch(f.name)
            if m and (shards is None or int(m.group(1)) in shards):
                out.append(f)
        return out

    async def _replace(self, client: S3Client, parts: list[Path], shards: set[int] | None) -> None:
        """Each part uploaded under its name, then the parts of earlier outputs that none replaced
        deleted (of ``shards`` only, when given)."""
        # uploads a killed publish left unfinished (of these shards only: others may be publishing)
        every = f"{RESULTS_PREFIX}-"
        mine = (
            [self.name]
            if self.single
            else [part_prefix(RESULTS_PREFIX, s) for s in sorted(shards)]
            if shards
            else [every]
        )
        for prefix in mine:
            await client.abort_uploads(self.bucket, self.dir + prefix)
        if self.single:
            await self._upload(client, parts[0], self.dir + self.name)
            return
        for part in parts:
            await self._upload(client, part, self.dir + part.name)
        names = {p.name for p in parts}
        stale = []
        async for obj in client.list_objects(self.bucket, self.dir + every):
            name = obj["Key"][len(self.dir) :]
            m = _PART.fullmatch(name)
            if m and name not in names and (shards is None or int(m.group(1)) in shards):
                stale.append(obj["Key"])
        await client.delete_keys(self.bucket, stale)

    async def _upload(self, client: S3Client, path: Path, key: str) -> None:
        try:
            await client.upload_file(self.bucket, key, path)
        except OSError as exc:
            raise ConnectorError(f"{self._where(key)}: cannot read the staged part {path}: {exc}") from exc


__all__ = ["S3ParquetSink", "staging_path"]
