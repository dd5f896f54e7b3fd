"""The Parquet sink (extra ``assay[lake]``): result rows as ``part-*.parquet`` in a directory, or as
one ``.parquet`` file, with the JSON-lines sink's semantics (docs/lake.md).

Rows are converted to columns as they arrive (the engine's rows as it builds them, through
:meth:`ParquetSink.write_results`, never encoded as JSON) and staged as Arrow segments under
``<out>/_staging/`` (``.<name>.parts/`` beside a file target), one finished and renamed into place at each commit
(:mod:`~assay.connectors.parquet_segments`): :meth:`ParquetSink.snapshot` lists them, a resume
removes the ones written after its checkpoint, ``aclose`` drops the segment being written. A
Parquet file cannot be appended to after a commit, so the Parquet parts are written at
:meth:`~ParquetSink.publish`, from the segments (no JSON is read back): ``part-SSSSS-NNNNN.parquet``
per shard, a new part every ``max_rows_per_part`` rows, zstd, row groups of
:data:`~assay.connectors.parquet_schema.ROW_GROUP_ROWS`, or all of them into the one file, each in a
temp file renamed into place. Then the summary, then ``_SUCCESS``. The schema
(:mod:`~assay.connectors.parquet_schema`) takes the run's result keys and thresholds from the summary.

A run that starts over leaves the previous whole output's Parquet parts in place until its own
successful publish replaces them (a failed rerun never destroys a good day's rows; it removes
``_SUCCESS`` and writes its own summary, so the failure is seen).

:class:`StagedSink` (rows staged as JSON lines by a :class:`~assay.connectors.file_sink.LocalSink`,
converted at publish) is the Delta sink's staging.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

import anyio
import anyio.to_thread
import orjson
import pyarrow.parquet as pq

from assay.connectors.base import Sink
from assay.connectors.file_sink import fsync_dir, os_error_message, require_recorded
from assay.connectors.framing import iter_lines, line_chunks
from assay.connectors.layout import (
    PARQUET_SUFFIX,
    RESULTS_PREFIX,
    STAGING,
    SUCCESS,
    SUMMARY,
    fsync_path,
    part_name,
    part_pattern,
    shard_of,
    summary_beside,
    temp_path,
    write_json_atomic,
)
from assay.connectors.parquet_schema import (
    ROW_GROUP_ROWS,
    TableBuilder,
    decode_staged,
    result_columns,
    result_schema,
    summary_keys,
)
from assay.connectors.parquet_segments import (
    SEGMENT_ROWS,
    Segment,
    segment_name,
    segment_shard,
    write_empty,
    write_parts,
)
from assay.exceptions import ConnectorError
from assay.paths import safe_join
from assay.records import encode_row

S = TypeVar("S", bound=Sink)
_PART = part_pattern(RESULTS_PREFIX, PARQUET_SUFFIX)


def _publishing_shard(summary_name: str | None) -> int | None:
    """The shard a ``--shard i/N`` publish is for, from its summary's name (its writer is i)."""
    shard = shard_of(summary_name or "")
    return shard[0] if shard else None


def iter_part_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a staged JSON-lines part, as dicts."""
    with open(path, "rb") as f:
        for line in iter_lines(f):
            if line and not line.isspace():
                row = orjson.loads(line)
                if isinstance(row, dict):
                    yield row


def fill_builder(builder: TableBuilder, part: Path, row_group_rows: int = ROW_GROUP_ROWS) -> Iterator[int]:
    """Add a staged part's rows to ``builder``; yields whenever it holds ``row_group_rows`` rows
    (the caller takes the batch). Rows are decoded a chunk at a time into only the fields the
    schema keeps (:func:`~assay.connectors.parquet_schema.decode_staged`); a chunk with a row of
    another shape is read as plain JSON."""
    with open(part, "rb") as f:
        for lines in line_chunks(f):
            chunk = b"\n".join(lines)
            staged = decode_staged(chunk)
            if staged is not None:
                while staged:
                    room = row_group_rows - builder.rows
                    builder.add_staged_rows(staged[:room])
                    staged = staged[room:]
                    if builder.rows >= row_group_rows:
                        yield builder.rows
                continue
            for line in lines:
                if line and not line.isspace():
                    rec = orjson.loads(line)
                    if isinstance(rec, dict):
                        builder.add(rec)
                        if builder.rows >= row_group_rows:
                            yield builder.rows


def write_parquet(
    target: Path, parts: Sequence[Path], builder: TableBuilder, *, row_group_rows: int = ROW_GROUP_ROWS
) -> int:
    """Convert staged parts into one Parquet file (temp file, fsync, rename); the rows written."""
    tmp = temp_path(target)
    rows = 0
    with pq.ParquetWriter(tmp, builder.schema, compression="zstd") as writer:
        for part in parts:
            for n in fill_builder(builder, part, row_group_rows):
                rows += n
                writer.write_batch(builder.batch(), row_group_size=row_group_rows)
        if builder.rows or not rows:
            rows += builder.rows
            writer.write_batch(builder.batch(), row_group_size=row_group_rows)
    fsync_path(tmp)
    os.replace(tmp, target)
    return rows


class StagedSink(Sink, Generic[S]):
    """A sink whose rows are staged by a local sink (``self.staging``: its parts, commits and exact
    resume) and turned into the real output only at publish (a Delta commit from JSON lines,
    Parquet parts uploaded to S3)."""

    staging: S

    async def open(self) -> None:
        await self.staging.open()

    async def write_batch(self, rows: Sequence[bytes], keys: Sequence[str | None] | None = None) -> None:
        await self.staging.write_batch(rows, keys)

    async def write_results(self, rows: Sequence[Mapping[str, Any]], keys: Sequence[str | None] | None = None) -> None:
        await self.staging.write_results(rows, keys)  # the staging sink's own form (Parquet: columns)

    async def flush(self) -> None:
        await self.staging.flush()

    def snapshot(self) -> Any:
        return self.staging.snapshot()

    async def aclose(self) -> None:
        await self.staging.aclose()


class ParquetSink(Sink):
    """Result rows as Parquet (see the module docs). ``layout``: ``wide`` or ``long``; ``ds``: the
    ``ds`` column; ``max_rows_per_part``: rows per Parquet part (a directory output; None: one part
    per shard); ``resume_state``: a :meth:`snapshot` to resume from (None: start over)."""

    def __init__(
        self,
        path: str,
        *,
        shard: int = 0,
        max_rows_per_part: int | None = None,
        resume_state: Any = None,
        layout: str = "wide",
        ds: str | None = None,
        reset_only_shard: bool = False,
    ) -> None:
        self.path = path
        self.directory = not path.endswith(".parquet")
        self.layout = layout
        self.ds = ds
        if self.directory:
            self.out_dir = Path(path)
            self.staging_dir = self.out_dir / STAGING
            self.summary_path = self.out_dir / SUMMARY
        else:
            final = Path(path)
            self.out_dir = final.parent
            self.staging_dir = final.parent / f".{final.name}.parts"
            self.summary_path = Path(summary_beside(str(final)))
        self.shard = shard
        self.max_rows = max_rows_per_part if self.directory else None
        self.resume_state = resume_state
        self.reset_only_shard = reset_only_shard
        self.segments: list[str] = []
        """This shard's committed segments, in order."""
        self.seq = 0
        self._builder: TableBuilder | None = None
        self._segment: Segment | None = None
        self._sealed: list[Segment] = []
        """Segments ended since the last commit (a new result key): renamed at the next ``flush``."""
        self._pending: list[Any] = []
        """Rows written and not yet converted (fewer than :data:`SEGMENT_ROWS`): JSON lines, or the
        engine's rows as built."""
        self._committed: dict[str, Any] = {"segments": [], "seq": 0}
        self._dirty = False
        self._failed = False

    def describe(self) -> str:
        return self.path

    # -- lifecycle ----------------------------------------------------------------------------

    async def open(self) -> None:
        try:
            await anyio.to_thread.run_sync(self._open)
        except OSError as exc:
            raise ConnectorError(f"cannot prepare output {self.path!r}: {exc}") from exc

    def _open(self) -> None:
        self.staging_dir.mkdir(parents=True, exist_ok=True)
        if self.resume_state is None:  # start over: this shard's (or every shard's) staged rows go
            only = self.shard if self.reset_only_shard else None
            for f in self.staging_dir.iterdir():
                shard = segment_shard(f.name)
                if shard is not None and only in (None, shard):
                    f.unlink(missing_ok=True)
            return
        self._restore(self.resume_state)

    def _restore(self, state: dict[str, Any]) -> None:
        """Back to a commit: this shard's segments written after it are removed."""
        if "segments" not in state and (state.get("parts") or (state.get("current") or {}).get("rows")):
            raise ConnectorError(
                f"{self.path}: the checkpoint holds rows staged by an earlier version of assay; run again with --fresh"
            )
        keep = set(state.get("segments", []))
        for f in self.staging_dir.iterdir():
            if segment_shard(f.name) == self.shard and f.name not in keep:
                f.unlink(missing_ok=True)
        require_recorded(self.path, self.staging_dir, keep)
        self.segments = sorted(keep)
        self.seq = int(state.get("seq", 0))
        self._committed = self._state()

    def _state(self) -> dict[str, Any]:
        return {"segments": list(self.segments), "seq": self.seq}

    # -- writing ------------------------------------------------------------------------------

    async def write_batch(self, rows: Sequence[bytes], keys: Sequence[str | None] | None = None) -> None:
        """Rows are kept as they come and converted :data:`SEGMENT_ROWS` at a time (one decode and
        a few list comprehensions per column for many rows, instead of per engine batch)."""
        await self._write(rows)

    async def write_results(self, rows: Sequence[Mapping[str, Any]], keys: Sequence[str | None] | None = None) -> None:
        """The engine's rows as it builds them: converted to columns without being encoded as JSON
        and decoded again (:func:`~assay.connectors.parquet_schema.result_columns`), the same
        columns as :meth:`write_batch` makes of their JSON."""
        await self._write(rows)

    async def write_columns(self, trace_ids: Any, run_id: str, positions: Any, results: Mapping[str, Any]) -> None:
        """Rows already as columns (the columnar engine): ``trace_ids`` and ``positions`` string
        arrays, one ``SEGMENT_RESULT_TYPE`` struct array per result key; the same segment columns
        :meth:`write_results` makes of the same rows. Rows written before are converted first, so
        the order holds. Wide layout only."""
        if not len(trace_ids):
            return
        self._check()
        self._dirty = True
        await self._in_thread(lambda: self._write_columns(trace_ids, run_id, positions, results))

    def _write_columns(self, trace_ids: Any, run_id: str, positions: Any, results: Mapping[str, Any]) -> None:
        import pyarrow as pa

        from assay.connectors.arrow_arrays import text_scalar
        from assay.connectors.parquet_schema import PLATFORM_TYPE, SEGMENT_RESULT_TYPE

        self._convert()  # the rows written before these, first
        builder = self._builder_for(set(results))
        n = len(trace_ids)
        top = [trace_ids, pa.repeat(text_scalar(run_id), n), pa.repeat(text_scalar(self.ds), n)]
        top.append(positions)
        top.append(pa.nulls(n, PLATFORM_TYPE))  # a trace read by columns is in no platform's format
        arrays = top + [results.get(k, pa.nulls(n, SEGMENT_RESULT_TYPE)) for k in builder.keys]
        if self._segment is None:
            self._segment = Segment(self.staging_dir / segment_name(self.shard, self.seq), builder.schema)
            self.seq += 1
        self._segment.write(pa.RecordBatch.from_arrays(arrays, schema=builder.schema))

    async def _write(self, rows: Sequence[Any]) -> None:
        if not rows:
            return
        self._check()
        self._dirty = True
        self._pending.extend(rows)
        if len(self._pending) >= SEGMENT_ROWS:
            await self._in_thread(self._convert)

    async def _in_thread(self, work: Callable[[], None]) -> None:
        try:
            await anyio.to_thread.run_sync(work)
        except OSError as exc:
            self._failed = True
            raise ConnectorError(os_error_message(self.path, exc)) from exc

    def _check(self) -> None:
        if self._failed:
            raise ConnectorError(f"{self.path}: an earlier write failed; rows after the last commit are discarded")

    def _convert(self) -> None:
        """The rows kept so far, as a record batch of the segment being written."""
        rows, self._pending = self._pending, []
        if not rows:
            return
        columns = result_columns(rows) if type(rows[0]) is not bytes else None
        if columns is not None:  # the engine's rows, as built
            self._builder_for(columns[1]).add_columns(columns[0])
            self._spill()
            return
        # JSON lines (write_batch), or rows holding values that JSON changes: their JSON decoded
        rows = [r if type(r) is bytes else encode_row(r) for r in rows]
        staged = decode_staged(b"\n".join(rows))
        if staged is not None:
            self._builder_for(set().union(*(r.results for r in staged))).add_staged_rows(staged)
        else:  # rows of another shape: read as plain JSON
            for line in rows:
                rec = orjson.loads(line)
                if isinstance(rec, dict):
                    results = rec.get("results")
                    self._builder_for(set(results) if isinstance(results, dict) else set()).add(rec)
        self._spill()

    def _builder_for(self, keys: set[str]) -> TableBuilder:
        """The builder, for a schema with these result keys: a key the current segment lacks ends
        it (one schema per segment)."""
        builder = self._builder
        if builder is not None and (self.layout == "long" or keys.issubset(builder.keys)):
            return builder
        wide = sorted(keys.union(builder.keys)) if builder is not None and self.layout != "long" else sorted(keys)
        self._spill()
        if self._segment is not None:
            self._segment.seal()
            self._sealed.append(self._segment)
            self._segment = None
        self._builder = TableBuilder(wide, layout=self.layout, ds=self.ds, own_threshold=True)
        return self._builder

    def _spill(self) -> None:
        """The builder's rows as a record batch of the segment being written."""
        builder = self._builder
        if builder is None or not builder.rows:
            return
        if self._segment is None:
            self._segment = Segment(self.staging_dir / segment_name(self.shard, self.seq), builder.schema)
            self.seq += 1
        self._segment.write(builder.batch())

    async def flush(self) -> None:
        """Make every row written so far durable: the segment being written finished and renamed
        into place with the ones ended since the last commit."""
        self._check()
        await self._in_thread(self._flush)

    def _flush(self) -> None:
        self._convert()
        if self._segment is not None:
            self._segment.seal()
            self._sealed.append(self._segment)
            self._segment = None
        for seg in self._sealed:
            os.replace(seg.tmp, seg.final)
            self.segments.append(seg.final.name)
        self._sealed = []
        fsync_dir(self.staging_dir)
        self._committed = self._state()
        self._dirty = False

    def snapshot(self) -> Any:
        return self._committed

    async def aclose(self) -> None:
        """Discard what was written after the last commit (committed segments stay resumable)."""
        with anyio.CancelScope(shield=True):
            try:
                await anyio.to_thread.run_sync(self._close)
            except OSError as exc:
                raise ConnectorError(os_error_message(self.path, exc)) from exc

    def _close(self) -> None:
        for seg in [*self._sealed, *([self._segment] if self._segment is not None else [])]:
            seg.discard()
        self._sealed, self._segment, self._builder, self._pending = [], None, None, []
        if self._dirty or self._failed:
            self.segments = list(self._committed["segments"])
            self.seq = int(self._committed["seq"])
            self._dirty = self._failed = False

    # -- publishing ---------------------------------------------------------------------------

    async def whole(self) -> bool:
        """Whether a whole output is published here (``_SUCCESS``; a file target: its file): a
        rerun keeps its current results (:mod:`assay.pipeline.ledger`)."""
        where = self.out_dir / SUCCESS if self.directory else Path(self.path)
        return await anyio.to_thread.run_sync(where.exists)

    async def discard(self) -> None:
        """Drop the staged segments: the published parts stay as they are (nothing changed)."""
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(self.staging_dir, ignore_errors=True))

    async def publish(self, summary: dict[str, Any], *, success: bool, summary_name: str | None = None) -> str | None:
        """Write the Parquet parts when the output is whole (``success``) or is one shard's
        (``summary_name``), then the summary, then ``_SUCCESS`` when ``success``. What was written
        is committed first. A run that did not succeed leaves the Parquet parts of the last whole
        output in place (its staged segments stay for the resume) and removes ``_SUCCESS``."""
        with anyio.CancelScope(shield=True):
            try:
                where: str = await anyio.to_thread.run_sync(self._publish, summary, success, summary_name)
            except OSError as exc:
                raise ConnectorError(f"cannot write {self.path!r}: {exc}") from exc
        return where

    def _publish(self, summary: dict[str, Any], success: bool, summary_name: str | None) -> str:
        if self._dirty and not self._failed:
            self._flush()  # publishing commits what was written
        self._close()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.directory:  # first: a stop while the parts are replaced leaves no marker beside them
            (self.out_dir / SUCCESS).unlink(missing_ok=True)
            fsync_dir(self.out_dir)
        if success or summary_name is not None:  # a whole output, or a shard's parts put in place
            self._write_parts(summary, None if success else _publishing_shard(summary_name))
        target = self.summary_path if summary_name is None else safe_join(self.out_dir, summary_name)
        write_json_atomic(target, summary)
        if success:
            shutil.rmtree(self.staging_dir, ignore_errors=True)
            if self.directory:
                (self.out_dir / SUCCESS).touch()
        else:
            with contextlib.suppress(OSError):  # a run that wrote nothing leaves no empty staging area
                self.staging_dir.rmdir()
        fsync_dir(self.out_dir)
        return str(target)

    def _staged(self) -> dict[int, list[Path]]:
        """Every shard's committed segments, in order."""
        shards: dict[int, list[Path]] = {}
        if self.staging_dir.is_dir():
            for f in sorted(self.staging_dir.iterdir()):
                shard = segment_shard(f.name)
                if shard is not None and not f.name.startswith("."):
                    shards.setdefault(shard, []).append(f)
        return shards

    def _write_parts(self, summary: dict[str, Any], only_shard: int | None = None) -> None:
        """Each shard's segments as its Parquet parts (``part-SSSSS-NNNNN.parquet``), or every
        shard's as the one file; Parquet parts of earlier runs that none replaces are removed (a
        rerun's output is only its own rows). ``only_shard``: a ``--shard`` run's publish, which
        writes and replaces that shard's parts only (the others' segments may be gone: a merge
        removes the staging area of a whole output)."""
        keys, thresholds = summary_keys(summary)
        schema = result_schema(keys, self.layout)
        staged = self._staged()
        if only_shard is not None and self.directory:
            staged = {only_shard: staged.get(only_shard, [])}
        if not self.directory:
            target = Path(self.path)
            if not write_parts(
                [s for _, segs in sorted(staged.items()) for s in segs], schema, thresholds, [target], None
            ):
                write_empty(target, schema)
            return
        written: list[Path] = []
        for shard, segs in sorted(staged.items()):
            names = (self.out_dir / part_name(RESULTS_PREFIX, shard, i, ".parquet") for i in itertools.count())
            written += write_parts(segs, schema, thresholds, names, self.max_rows)
        if not written:
            empty = self.out_dir / part_name(RESULTS_PREFIX, only_shard or 0, 0, ".parquet")
            write_empty(empty, schema)
            written.append(empty)
        wanted = {p.name for p in written}
        for f in self.out_dir.iterdir():
            m = _PART.match(f.name)
            if m and f.name not in wanted and (only_shard is None or int(m.group(1)) == only_shard):
                f.unlink(missing_ok=True)


def read_parquet_rows(source: Any) -> Iterator[dict[str, Any]]:
    """Rows of a wide or long Parquet output (a path or an open file) as the engine's JSON rows
    (``assay report``)."""
    pf = pq.ParquetFile(source)
    names = pf.schema_arrow.names
    long = "key" in names and "score" in names
    yield from rows_of_batches(pf.iter_batches(batch_size=ROW_GROUP_ROWS), long)


def rows_of_batches(batches: Iterable[Any], long: bool) -> Iterator[dict[str, Any]]:
    """Batches of the output schema as the engine's JSON rows: one per trace, also in the long
    layout, whose rows of one trace (one per result key, written together) are joined again."""
    rows = (row for batch in batches for rec in batch.to_pylist() for row in _as_json_rows(rec, long))
    if not long:
        yield from rows
        return
    current: dict[str, Any] | None = None
    for row in rows:
        if current is not None and (row["trace_id"], row["position"]) == (current["trace_id"], current["position"]):
            current["results"].update(row["results"])
            if "identity" in row:
                current.setdefault("identity", {}).update(row["identity"])
            continue
        if current is not None:
            yield current
        current = row
    if current is not None:
        yield current


#: The columns of the output schema that are not result keys.
_TOP_COLUMNS = frozenset({"trace_id", "run_id", "ds", "position", "platform"})


def _as_json_rows(rec: dict[str, Any], long: bool) -> Iterator[dict[str, Any]]:
    top = {"trace_id": rec.get("trace_id"), "run_id": rec.get("run_id"), "position": rec.get("position")}
    if rec.get("ds") is not None:
        top["ds"] = rec["ds"]
    platform = rec.get("platform")
    if isinstance(platform, dict):
        ids = {k: v for k, v in platform.items() if v is not None}
        if ids:
            top["platform"] = ids
    if long:
        cells = {rec["key"]: rec}
    else:
        cells = {k: v for k, v in rec.items() if k not in _TOP_COLUMNS and isinstance(v, dict)}
    identity = {k: v["identity"] for k, v in cells.items() if v.get("identity") is not None}
    row = {**top, "results": {k: _result(k, v) for k, v in cells.items()}}
    if identity:
        row["identity"] = identity
    yield row


def _result(key: str, v: dict[str, Any]) -> dict[str, Any]:
    usage = {k: v.get(k) for k in ("input_tokens", "output_tokens", "cost_usd") if v.get(k) is not None}
    out: dict[str, Any] = {
        "key": key,
        "score": v.get("score"),
        "value": v.get("value"),
        "comment": v.get("comment"),
        "metadata": {"usage": usage} if usage else {},
    }
    if v.get("error") is not None:
        out["error"] = v["error"]
    return out


__all__ = [
    "STAGING",
    "ParquetSink",
    "fill_builder",
    "iter_part_rows",
    "read_parquet_rows",
    "rows_of_batches",
    "write_parquet",
]
