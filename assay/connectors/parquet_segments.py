"""The Parquet sink's staging: committed rows as Arrow segments, and the parts made of them.

Rows are converted to columns once, as they arrive (:class:`~assay.connectors.parquet_schema.TableBuilder`,
a record batch every :data:`SEGMENT_ROWS` rows), and written to the segment being filled, an Arrow IPC
file under a temp name (``.seg-SSSSS-NNNNN.arrow.tmp``). ``flush`` finishes it (footer, fsync) and
renames it into place: a segment under its final name holds committed rows only, and the sink's
state is the list of them. A segment also ends where a row brings a result key the segment's schema
lacks (dynamic keys), so one segment has one schema.

At publish the segments are read back (no JSON, no Python per row) and written as Parquet parts:
each shard's segments in order, cut every ``max_rows_per_part`` rows, row groups of
:data:`~assay.connectors.parquet_schema.ROW_GROUP_ROWS`, with the summary's keys as columns
(:func:`conform`: a key a segment lacks is a null column; ``passed`` of a result without its own
pass mark takes the summary's threshold). The parts equal what converting the rows at publish gave.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from assay.connectors.layout import fsync_path, temp_path
from assay.connectors.parquet_schema import (
    RESULT_FIELDS,
    RESULT_TYPE,
    ROW_GROUP_ROWS,
    TOP_FIELDS,
    column,
)

SEGMENT_ROWS = 4_096
"""Rows converted at a time while a run writes: enough that a conversion's fixed costs vanish,
few enough that the rows waiting, their decoded form and the column lists stay small (16,384 raised
the peak RSS of a 10^5-row run from ~240 to ~315 MB at the same CPU time)."""
_SEGMENT = re.compile(r"^\.?seg-(\d{5})-(\d{5})\.arrow(\.tmp)?$")
_PASSED = [name for name, _ in RESULT_FIELDS].index("passed")
_TOP = len(TOP_FIELDS)  # the columns before the results (trace_id … platform)


def segment_name(shard: int, seq: int) -> str:
    return f"seg-{shard:05d}-{seq:05d}.arrow"


def segment_shard(name: str) -> int | None:
    """The shard of a segment file (a temp one too), None for any other name."""
    m = _SEGMENT.match(name)
    return int(m.group(1)) if m else None


class Segment:
    """The segment being written: an Arrow IPC file under its temp name."""

    def __init__(self, final: Path, schema: pa.Schema) -> None:
        self.final = final
        self.tmp = temp_path(final)
        self.sink = pa.OSFile(str(self.tmp), "wb")
        self.writer = pa.ipc.new_file(self.sink, schema)
        self.rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        self.writer.write_batch(batch)
        self.rows += batch.num_rows

    def seal(self) -> None:
        """Complete (footer) and durable, still under the temp name (renamed at the commit)."""
        self.writer.close()
        self.sink.close()
        fsync_path(self.tmp)

    def discard(self) -> None:
        with contextlib.suppress(OSError, pa.ArrowException):  # closing after a failed write
            self.writer.close()
        self.sink.close()
        self.tmp.unlink(missing_ok=True)


def read_segment(path: Path) -> Iterator[pa.RecordBatch]:
    """A segment's record batches, one at a time (read, not mapped: the resident set stays small)."""
    with pa.OSFile(str(path), "rb") as f:
        reader = pa.ipc.open_file(f)
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)


def _settle(col: pa.StructArray, threshold: float) -> pa.Array:
    """A staged result column as the output's: without the own pass mark, ``passed`` of results
    that had none judged by ``threshold`` (they were judged by 0.5 when staged)."""
    n = len(RESULT_FIELDS)
    children = [col.field(i) for i in range(n)]
    own = col.field(n)
    if threshold != 0.5 and own.null_count > col.null_count:
        scores, owns, passed = children[0].to_pylist(), own.to_pylist(), children[_PASSED].to_pylist()
        children[_PASSED] = column(
            [p if o is not None or s is None else s >= threshold for s, o, p in zip(scores, owns, passed, strict=True)],
            pa.bool_(),
        )
    validity = col.buffers()[0] if col.null_count else None
    return pa.Array.from_buffers(RESULT_TYPE, len(col), [validity], null_count=col.null_count, children=children)


def conform(batch: pa.RecordBatch, schema: pa.Schema, thresholds: Mapping[str, float]) -> pa.RecordBatch:
    """A segment's batch in the output schema (see the module docs)."""
    names = batch.schema.names
    if "key" in names and "score" in names:  # long: the own pass mark is the last column
        arrays = batch.columns[:-1]
        own = batch.column(len(names) - 1)
        if own.null_count and any(t != 0.5 for t in thresholds.values()):
            key_at, score_at = _TOP, _TOP + 1  # the top columns, then key and the result's fields
            keys, scores = batch.column(key_at).to_pylist(), batch.column(score_at).to_pylist()
            owns, passed = own.to_pylist(), batch.column(score_at + _PASSED).to_pylist()
            arrays[score_at + _PASSED] = column(
                [
                    p if o is not None or s is None else s >= thresholds.get(k, 0.5)
                    for k, s, o, p in zip(keys, scores, owns, passed, strict=True)
                ],
                pa.bool_(),
            )
        return pa.RecordBatch.from_arrays(arrays, schema=schema)
    arrays = batch.columns[:_TOP]
    for key in schema.names[_TOP:]:
        if key in names:
            arrays.append(_settle(batch.column(names.index(key)), thresholds.get(key, 0.5)))
        else:
            arrays.append(pa.nulls(batch.num_rows, RESULT_TYPE))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class PartFile:
    """One Parquet part being written from batches: row groups of ``ROW_GROUP_ROWS``, a temp file
    fsynced and renamed into place by :meth:`finish`."""

    def __init__(self, target: Path, schema: pa.Schema) -> None:
        self.target = target
        self.schema = schema
        self.tmp = temp_path(target)
        self.writer = pq.ParquetWriter(self.tmp, schema, compression="zstd")
        self.pending: list[pa.RecordBatch] = []
        self.buffered = 0
        self.rows = 0

    def add(self, batch: pa.RecordBatch) -> None:
        self.pending.append(batch)
        self.buffered += batch.num_rows
        while self.buffered >= ROW_GROUP_ROWS:
            table = pa.Table.from_batches(self.pending, self.schema)
            self._write(table.slice(0, ROW_GROUP_ROWS))
            rest = table.slice(ROW_GROUP_ROWS)
            self.pending, self.buffered = rest.to_batches(), rest.num_rows

    def _write(self, table: pa.Table) -> None:
        self.writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self.rows += table.num_rows

    def finish(self) -> None:
        if self.buffered or not self.rows:
            self._write(pa.Table.from_batches(self.pending, self.schema))
        self.writer.close()
        fsync_path(self.tmp)
        os.replace(self.tmp, self.target)


def write_parts(
    segments: Sequence[Path],
    schema: pa.Schema,
    thresholds: Mapping[str, float],
    names: Iterable[Path],
    max_rows: int | None,
) -> list[Path]:
    """The rows of ``segments`` (in order) as Parquet parts named by ``names`` in turn, a new one
    every ``max_rows`` rows (None: one part); the parts written (none without rows)."""
    targets = iter(names)
    done: list[Path] = []
    part: PartFile | None = None
    for seg in segments:
        for staged in read_segment(seg):
            batch = conform(staged, schema, thresholds)
            while batch.num_rows:
                if part is None:
                    part = PartFile(next(targets), schema)
                take = batch.num_rows if not max_rows else min(batch.num_rows, max_rows - part.rows - part.buffered)
                part.add(batch.slice(0, take))
                batch = batch.slice(take)
                if max_rows and part.rows + part.buffered >= max_rows:
                    part.finish()
                    done.append(part.target)
                    part = None
    if part is not None:
        part.finish()
        done.append(part.target)
    return done


def write_empty(target: Path, schema: pa.Schema) -> None:
    """A part with the schema and no rows (a published output always has one)."""
    PartFile(target, schema).finish()


__all__ = [
    "SEGMENT_ROWS",
    "PartFile",
    "Segment",
    "conform",
    "read_segment",
    "segment_name",
    "segment_shard",
    "write_empty",
    "write_parts",
]
