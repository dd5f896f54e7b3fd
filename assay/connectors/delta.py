"""The Delta Lake sink (extra ``assay[lake]``: deltalake, delta-rs, no JVM): a run writes its day
into a partitioned table as ONE atomic commit that replaces that day (docs/lake.md).

::

    sink: {type: delta, path: s3://lake/scores, partition_by: [ds]}     # run with --ds 2026-11-21

* Rows are staged under the run's ``state_dir`` (``lake/<table>/ds=D/``) through the JSON-lines
  sink's parts, with its commits and exact resume; nothing reaches the table before :meth:`publish`.
* :meth:`publish` of a whole output writes the day with ``write_deltalake(mode="overwrite",
  predicate="ds = 'D'", schema_mode="merge")``: one commit holding exactly this run's rows for
  that day; other days are untouched; a new evaluator adds its column. A killed or failed run
  commits nothing (its staged rows stay for the resume).
* The summary is ``<path>/_summaries/ds=D/_SUMMARY.json`` (then ``_SUCCESS`` beside it); dead
  letters stay JSON lines under ``<path>/_dead_letter/ds=D/``; checkpoints are per day, so a killed
  day never resumes into another day.
* ``s3://`` tables use the run's ``s3:`` settings (endpoint, region) and the AWS environment;
  ``storage_options`` adds or overrides delta-rs object-store options. delta-rs needs a locking
  provider or conditional puts for concurrent writers; with one writer per day (the run lock),
  ``AWS_S3_ALLOW_UNSAFE_RENAME`` is set unless you set a locking option yourself.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
import orjson
from pydantic import Field, field_validator

from assay.connectors.base import ConnectorConfig, Sink, Source
from assay.connectors.delta_shards import DeltaShardMerge, copy_into, staged_folder
from assay.connectors.file_sink import LocalSink
from assay.connectors.layout import DEAD_LETTER, SUCCESS, SUMMARIES, SUMMARY, shard_of
from assay.connectors.parquet_sink import StagedSink
from assay.connectors.path_config import check_ds
from assay.connectors.registry import BaseConnector
from assay.exceptions import ConfigError, ConnectorError
from assay.paths import check_day, partition, safe_join

LOCKING_KEYS = ("AWS_S3_LOCKING_PROVIDER", "AWS_S3_ALLOW_UNSAFE_RENAME", "AWS_CONDITIONAL_PUT", "conditional_put")


class DeltaSinkConfig(ConnectorConfig):
    """``sink: {type: delta, …}``: a Delta table partitioned by day."""

    type: Literal["delta"] = "delta"
    path: str
    """The table: a local directory or ``s3://bucket/prefix``."""
    partition_by: list[str] = Field(default_factory=lambda: ["ds"])
    """Partition columns; must include ``ds`` (the partition a run replaces)."""
    ds: str | None = None
    """The day this run writes, ``YYYY-MM-DD`` (default: the run's ``--ds``; required)."""
    layout: Literal["wide", "long"] = "wide"
    """``wide``: a row per trace, a struct column per result key; ``long``: a row per trace and key."""
    storage_options: dict[str, str] = Field(default_factory=dict)
    """delta-rs object-store options (``AWS_ENDPOINT_URL``, ``AWS_S3_LOCKING_PROVIDER``, …)."""
    state_dir: str | None = None
    """Where rows are staged before the commit (default: the run's ``state_dir``)."""

    @field_validator("ds")
    @classmethod
    def _day(cls, v: str | None) -> str | None:
        return check_ds(v)

    @property
    def checkpoint_scope(self) -> str:
        """Checkpoints are per day: a killed day never resumes into another."""
        return f"#ds={self.ds}"


def table_url(path: str) -> str:
    return path.rstrip("/") if path.startswith("s3://") else os.path.abspath(path)


def storage_options(config: DeltaSinkConfig, s3: Any) -> dict[str, str]:
    """delta-rs options for ``s3://`` tables: the run's endpoint and region, plain HTTP for a local
    endpoint, unsafe rename unless a locking option is set, then the sink's own options."""
    if not config.path.startswith("s3://"):
        return dict(config.storage_options)
    opts: dict[str, str] = {}
    endpoint = (
        getattr(s3, "endpoint_url", None) or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    )
    region = getattr(s3, "region", None) or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if endpoint:
        opts["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.startswith("http://"):
            opts["AWS_ALLOW_HTTP"] = "true"
    if region:
        opts["AWS_REGION"] = region
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        if os.environ.get(key):
            opts[key] = os.environ[key]
    if not any(k in config.storage_options for k in LOCKING_KEYS):
        opts["AWS_S3_ALLOW_UNSAFE_RENAME"] = "true"
    opts.update(config.storage_options)
    return opts


class _Store:
    """Small files beside the table (summaries, markers): local files, or S3 objects."""

    def __init__(self, root: str, s3: Any) -> None:
        self.root = root.rstrip("/")
        self.remote = root.startswith("s3://")
        self.s3 = s3

    def url(self, rel: str) -> str:
        return safe_join(self.root, rel)

    async def apply(self, writes: dict[str, bytes | None]) -> None:
        """Write (bytes) or delete (None) each relative name, in order."""
        if not self.remote:
            await anyio.to_thread.run_sync(self._apply_local, writes)
            return
        from assay.connectors.s3_client import S3Client, S3Config, parse_s3_url

        async with S3Client(self.s3 or S3Config()) as client:
            for rel, data in writes.items():
                u = parse_s3_url(self.url(rel))
                if data is None:
                    await client.delete_keys(u.bucket, [u.key])
                else:
                    await client.call(self.url(rel), client.raw.put_object, Bucket=u.bucket, Key=u.key, Body=data)

    async def read_json(self, rel: str) -> Any:
        """A JSON file's content (None: absent or unreadable)."""
        try:
            if not self.remote:
                data = await anyio.to_thread.run_sync((Path(self.root) / rel).read_bytes)
            else:
                from assay.connectors.s3_client import S3Client, S3Config, parse_s3_url

                u = parse_s3_url(self.url(rel))
                async with S3Client(self.s3 or S3Config()) as client:
                    if not await client.exists(u.bucket, u.key):
                        return None
                    resp = await client.call(self.url(rel), client.raw.get_object, Bucket=u.bucket, Key=u.key)
                    data = await resp["Body"].read()
            return orjson.loads(data)
        except (OSError, orjson.JSONDecodeError):
            return None

    async def exists(self, rel: str) -> bool:
        """Whether the file ``rel`` is there."""
        if not self.remote:
            return await anyio.to_thread.run_sync((Path(self.root) / rel).is_file)
        from assay.connectors.s3_client import S3Client, S3Config, parse_s3_url

        u = parse_s3_url(self.url(rel))
        async with S3Client(self.s3 or S3Config()) as client:
            return bool(await client.exists(u.bucket, u.key))

    async def put_folder(self, folder: str, files: list[Path]) -> list[str]:
        """Replace ``folder`` by copies of ``files`` (their names); the names written."""
        await self.remove_tree(folder)
        if not self.remote:
            for f in files:
                await anyio.to_thread.run_sync(copy_into, f, Path(self.root) / folder / f.name)
            return [f.name for f in files]
        from assay.connectors.s3_client import S3Client, S3Config, parse_s3_url

        async with S3Client(self.s3 or S3Config()) as client:
            for f in files:
                u = parse_s3_url(self.url(f"{folder}/{f.name}"))
                await client.upload_file(u.bucket, u.key, f)
        return [f.name for f in files]

    async def fetch(self, folder: str, names: list[str], dest: Path) -> list[Path | None]:
        """Local paths of ``folder``'s files ``names`` (S3: downloaded into ``dest``); None where absent."""
        if not self.remote:
            return [p if (p := Path(self.root) / folder / n).is_file() else None for n in names]
        from assay.connectors.s3_client import S3Client, S3Config, parse_s3_url

        await anyio.to_thread.run_sync(lambda: dest.mkdir(parents=True, exist_ok=True))
        out: list[Path | None] = []
        async with S3Client(self.s3 or S3Config()) as client:
            for n in names:
                u = parse_s3_url(self.url(f"{folder}/{n}"))
                if not await client.exists(u.bucket, u.key):
                    out.append(None)
                    continue
                resp = await client.call(self.url(f"{folder}/{n}"), client.raw.get_object, Bucket=u.bucket, Key=u.key)
                body = resp["Body"]
                try:
                    async with await anyio.open_file(dest / n, "wb") as f:
                        while chunk := await body.read(1 << 20):
                            await f.write(chunk)
                finally:
                    body.close()
                out.append(dest / n)
        return out

    async def remove_tree(self, folder: str) -> None:
        """Remove ``folder`` and everything under it (absent: nothing to do)."""
        if not self.remote:
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(Path(self.root) / folder, ignore_errors=True))
            return
        from assay.connectors.s3_client import S3Client, S3Config, parse_s3_url

        u = parse_s3_url(self.url(folder) + "/")
        async with S3Client(self.s3 or S3Config()) as client:
            keys = [o["Key"] async for o in client.list_objects(u.bucket, u.key)]
            await client.delete_keys(u.bucket, keys)

    def _apply_local(self, writes: dict[str, bytes | None]) -> None:
        from assay.connectors.layout import write_json_atomic

        for rel, data in writes.items():
            path = safe_join(Path(self.root), rel)
            if data is None:
                path.unlink(missing_ok=True)
            elif data:
                write_json_atomic(path, orjson.loads(data))
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()


class DeltaSink(StagedSink[LocalSink]):
    """Stages rows, then replaces one day of a Delta table in one commit (see the module docs)."""

    def __init__(self, config: DeltaSinkConfig, *, shard: int = 0, resume_state: Any = None, s3: Any = None) -> None:
        from assay.connectors.state_keys import SinkKey as CheckpointStore  # key_for: as the checkpoints

        if not config.ds:
            raise ConfigError("sink (type: delta): the day to replace is unknown; pass --ds YYYY-MM-DD or set sink.ds")
        if "ds" not in config.partition_by:
            raise ConfigError("sink.partition_by: must include ds (the partition a run replaces)")
        self.config = config
        self.ds = check_day(config.ds, "sink.ds")
        self.url = table_url(config.path)
        self.s3 = s3
        state = Path(config.state_dir or ".assay")
        self.staging_dir = safe_join(state, "lake", CheckpointStore.key_for(self.url), partition("ds", self.ds))
        self.staging = LocalSink(
            str(self.staging_dir) + "/", shard=shard, resume_state=resume_state, marker=False, create_empty=False
        )
        self.store = _Store(self.url, s3)
        self.folder = f"{SUMMARIES}/{partition('ds', self.ds)}"
        self.summary_rel = safe_join(self.folder, SUMMARY)

    @property
    def reset_only_shard(self) -> bool:
        return self.staging.reset_only_shard

    @reset_only_shard.setter
    def reset_only_shard(self, value: bool) -> None:
        self.staging.reset_only_shard = value

    def describe(self) -> str:
        return f"{self.config.path} (delta, ds={self.ds})"

    async def publish(self, summary: dict[str, Any], *, success: bool, summary_name: str | None = None) -> str | None:
        """Commit the day when the output is whole (``success``; never a ``--shard`` run alone),
        then the summary, then ``_SUCCESS``; otherwise only the summary (no commit, no
        ``_SUCCESS``). A ``--shard i/N`` run first stages its rows beside the table for ``assay
        merge`` (:mod:`~assay.connectors.delta_shards`) and names them in its summary."""
        await self.staging.publish(summary, success=False)
        success = success and summary_name is None
        folder = self.folder
        rel = safe_join(folder, summary_name or SUMMARY)
        with anyio.CancelScope(shield=True):
            try:
                shard = shard_of(summary_name) if summary_name is not None else None
                if shard is not None:
                    await self.store.apply({rel: None})  # the shard's old summary names parts about to go
                    summary = {**summary, "delta_staged": await self._stage_shard(shard)}
                text = orjson.dumps(summary, option=orjson.OPT_INDENT_2, default=str)
                if success:
                    parts = self.staging.all_parts()
                    await anyio.to_thread.run_sync(commit_day, self.config, self.s3, parts, summary)
                    await self.store.apply({rel: text, f"{folder}/{SUCCESS}": b""})
                    await anyio.to_thread.run_sync(lambda: shutil.rmtree(self.staging_dir, ignore_errors=True))
                else:
                    await self.store.apply({f"{folder}/{SUCCESS}": None, rel: text})
            except OSError as exc:
                raise ConnectorError(f"{self.config.path}: cannot write: {exc}") from exc
        return self.store.url(rel)

    async def whole(self) -> bool:
        """Whether the day is published whole (its ``_SUCCESS``): a rerun keeps its current
        results (:mod:`assay.pipeline.ledger`) and replaces the day only when something changed."""
        return await self.store.exists(f"{self.folder}/_SUCCESS")

    async def discard(self) -> None:
        """Drop the staged rows: the day stays as its last commit left it (no new commit)."""
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(self.staging_dir, ignore_errors=True))

    async def _stage_shard(self, shard: tuple[int, int]) -> dict[str, Any]:
        """Copy this shard's staged parts beside the table (its folder replaced whole)."""
        mine = f"-{shard[0]:05d}-"
        parts = [p for p in self.staging.all_parts() if mine in p.name]
        folder = staged_folder(self.ds, shard)
        names = await self.store.put_folder(folder, parts)
        return {"folder": folder, "parts": names}


def store_of(config: DeltaSinkConfig, s3: Any) -> _Store:
    """The small files beside a table (summaries, staged shard rows)."""
    return _Store(table_url(config.path), s3)


def commit_day(config: DeltaSinkConfig, s3: Any, parts: list[Path], summary: dict[str, Any]) -> int:
    """Replace day ``config.ds`` of the table by the rows of the staged JSON-lines ``parts`` in one
    commit (the summary's result keys and thresholds make the schema); the table's new version."""
    import pyarrow as pa
    from deltalake import DeltaTable, WriterProperties, write_deltalake

    from assay.connectors.parquet_schema import ROW_GROUP_ROWS, TableBuilder, summary_keys
    from assay.connectors.parquet_sink import fill_builder

    keys, thresholds = summary_keys(summary)
    builder = TableBuilder(keys, layout=config.layout, ds=config.ds, thresholds=thresholds)

    def batches() -> Iterator[pa.RecordBatch]:
        for part in parts:
            for _ in fill_builder(builder, part, ROW_GROUP_ROWS):
                yield builder.batch()
        if builder.rows:
            yield builder.batch()

    reader = pa.RecordBatchReader.from_batches(builder.schema, batches())
    url = table_url(config.path)
    options = storage_options(config, s3) or None
    try:
        write_deltalake(
            url,
            reader,
            mode="overwrite",
            predicate=f"ds = '{config.ds}'",
            partition_by=list(config.partition_by),
            schema_mode="merge",
            storage_options=options,
            writer_properties=WriterProperties(compression="ZSTD"),
        )
        return int(DeltaTable(url, storage_options=options).version())
    except Exception as exc:  # delta-rs raises its own error types (DeltaError, CommitFailedError…)
        raise ConnectorError(f"{config.path}: Delta commit of ds={config.ds} failed: {exc}") from exc


class DeltaConnector(BaseConnector):
    """``type: delta`` for the connector registry: the results sink is a :class:`DeltaSink`; its
    dead letters are JSON lines under ``_dead_letter/ds=D/`` of the table."""

    sink_config = DeltaSinkConfig

    def checkpoint_scope(self, config: Any) -> str:
        return str(config.checkpoint_scope)

    def default_dead_letter(self, config: Any) -> ConnectorConfig | None:
        from assay.connectors.path_config import DeadLetterConfig

        if config.ds is None:
            return None
        kind = "s3" if config.path.startswith("s3://") else "file"
        day = partition("ds", check_day(config.ds, "sink.ds"))
        return DeadLetterConfig(type=kind, path=safe_join(config.path, DEAD_LETTER, day + "/"))

    def summary_path(self, config: Any) -> Path | None:
        """A local table's day summary, ``<table>/_summaries/ds=D/_SUMMARY.json`` (an ``s3://``
        table's is an object: None)."""
        if config.path.startswith("s3://") or not config.ds:
            return None
        return Path(table_url(config.path)) / SUMMARIES / f"ds={config.ds}" / SUMMARY

    def shard_merge(self, config: Any, s3: Any) -> DeltaShardMerge:
        """``assay merge`` of ``--shard`` runs commits the day (:mod:`~assay.connectors.delta_shards`)."""
        from functools import partial

        from assay.connectors.builtin import s3_options

        if not isinstance(config, DeltaSinkConfig) or not config.ds:
            raise ConfigError("sink (type: delta): the day to merge is unknown; pass --ds YYYY-MM-DD")
        opts = s3_options(s3)
        return DeltaShardMerge(
            path=config.path,
            ds=config.ds,
            store=store_of(config, opts),
            summaries=f"{SUMMARIES}/ds={config.ds}",
            commit_day=partial(commit_day, config, opts),
        )

    def build_source(self, config: Any, ctx: Any) -> Source:
        raise ConfigError("type: delta is a sink; read a Delta table's files with a Parquet source or DuckDB")

    def build_sink(self, config: Any, ctx: Any) -> Sink:
        from assay.connectors.builtin import s3_options

        if getattr(ctx, "role", "results") != "results" or not isinstance(config, DeltaSinkConfig):
            raise ConfigError("type: delta is for results; dead letters stay JSON lines (a file or s3:// path)")
        delta = DeltaSink(config, shard=ctx.shard, resume_state=ctx.resume_state, s3=s3_options(ctx.options))
        delta.reset_only_shard = getattr(ctx, "reset_only_shard", False)
        return delta


CONNECTOR = DeltaConnector()
"""The registry entry: ``"delta": "assay.connectors.delta:CONNECTOR"``."""


__all__ = [
    "CONNECTOR",
    "DeltaConnector",
    "DeltaSink",
    "DeltaSinkConfig",
    "commit_day",
    "storage_options",
    "store_of",
    "table_url",
]
