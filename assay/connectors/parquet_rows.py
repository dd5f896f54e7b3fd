"""Rows of Parquet files as Python records, a row group at a time (extra ``assay[lake]``: pyarrow).

The reading side of the lake connectors, reusable by any source that needs a file's rows (the
Parquet source, exports that assemble one trace from many rows):

* :func:`is_parquet` / :func:`parquet_files`: which inputs are Parquet (by suffix, or the ``PAR1``
  magic at the start of a file without one), expanded from files, directories and globs;
* :class:`ParquetInput`: one file (local or through a ``pyarrow.fs`` filesystem) and its row
  groups, read as a stream of record batches — never the whole file;
* :func:`batch_records`: a record batch as a list of dicts, column by column. Nested
  ``list<struct>`` columns become lists of dicts; top-level text columns holding JSON objects or
  arrays (exports store ``inputs`` / ``outputs`` as JSON text) are decoded, and so are top-level
  binary columns whose values are UTF-8 (strings written without the string type);
  :func:`checked_records` also names the rows whose ``string`` values are not UTF-8.

>>> import pyarrow as pa
>>> b = pa.RecordBatch.from_pylist([{"id": "t1", "outputs": '{"messages": []}', "tags": [{"k": "a"}]}])
>>> batch_records(b)
[{'id': 't1', 'outputs': {'messages': []}, 'tags': [{'k': 'a'}]}]

pyarrow is imported here: import this module only when Parquet is in play.
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from assay.exceptions import ConfigError, ConnectorError

MAGIC = b"PAR1"
SUFFIXES = (".parquet", ".pq", ".parq")
BATCH_ROWS = 1024
"""Rows per record batch read from a row group (the unit converted to Python at once)."""
READ_BUFFER = 1 << 20
"""Bytes of a column chunk read at once from a local file (pyarrow's ``buffer_size``, with
``pre_buffer`` off, which pyarrow turns on by default): otherwise a row group's chunks are read
whole and held until the row group is done (a 122 MiB row group: +120 MiB of RSS), for nothing,
since the batches are decoded a page at a time anyway. Remote files keep whole-chunk reads (one
ranged GET per chunk) while a row group's chunks are at most :data:`REMOTE_WHOLE_CHUNKS` bytes."""
REMOTE_WHOLE_CHUNKS = 32 << 20
"""Compressed bytes of a remote file's largest row group up to which its chunks are read whole
(pre-buffered: few requests); above it they are read :data:`READ_BUFFER` bytes at a time per
column, as local files are, so that memory does not grow with the writer's row-group size."""

_loads = orjson.loads
_JSON_START = frozenset("{[")


def has_parquet_suffix(path: str) -> bool:
    return path.lower().endswith(SUFFIXES)


def has_magic(path: str) -> bool:
    """The file starts with ``PAR1`` (a Parquet file whatever its name)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


def is_parquet(path: str) -> bool:
    """A local file that is Parquet, by suffix or magic."""
    return has_parquet_suffix(path) or (os.path.isfile(path) and has_magic(path))


def _hidden(root: Path, f: Path) -> bool:
    return any(part.startswith(("_", ".")) for part in f.relative_to(root).parts)


def parquet_files(paths: Sequence[str]) -> list[str] | None:
    """The Parquet files named by local ``paths`` (files, directories searched recursively, globs),
    sorted per path; None when the paths name no Parquet input (the JSON readers take them).
    ``_``- and ``.``-prefixed files and folders under a directory (``_SUCCESS``, ``_delta_log``) are
    skipped. Mixing Parquet and JSON inputs in one source is a ConfigError."""
    found: list[str] = []
    other: list[str] = []
    for p in paths:
        if p == "-" or p.startswith("s3://"):
            other.append(p)
            continue
        if any(ch in p for ch in "*?["):
            files = sorted(m for m in glob.glob(p, recursive=True) if os.path.isfile(m))
        elif os.path.isdir(p):
            root = Path(p)
            files = sorted(str(f) for f in root.rglob("*") if f.is_file() and not _hidden(root, f))
            pq_files = [f for f in files if has_parquet_suffix(f)]
            if pq_files:
                files = pq_files  # a directory of parts: the Parquet ones (not _SUMMARY.json, …)
        else:
            files = [p]
        for f in files:
            (found if os.path.isfile(f) and is_parquet(f) else other).append(f)
    if not found:
        return None
    if other:
        raise ConfigError(
            f"source: Parquet and other inputs mixed ({found[0]!r} and {other[0]!r}); read them in separate runs"
        )
    return found


# -- Arrow → Python ----------------------------------------------------------------------------


def decode_json_text(values: list[Any]) -> list[Any]:
    """Text values that are JSON objects or arrays, parsed; anything else as it was."""
    out = values
    for i, v in enumerate(values):
        if type(v) is str and v and (v[0] in _JSON_START or (v[0].isspace() and v.lstrip()[:1] in _JSON_START)):
            with contextlib.suppress(orjson.JSONDecodeError):
                out[i] = _loads(v)
    return out


def is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def has_map(t: pa.DataType) -> bool:
    """Whether a type is or holds a ``map`` (Langfuse exports ``usage_details`` as one)."""
    if pa.types.is_map(t):
        return True
    if pa.types.is_struct(t):
        return any(has_map(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return has_map(t.value_type)
    return False


def batch_records(batch: pa.RecordBatch | pa.Table, *, decode_json: bool = True) -> list[dict[str, Any]]:
    """The rows of a batch as dicts (``to_pylist()``), top-level JSON text decoded (module docs);
    ``map`` values are dicts, as the same row's JSON object would be (a repeated key: the last)."""
    maps = any(has_map(f.type) for f in batch.schema)
    rows: list[dict[str, Any]] = batch.to_pylist(maps_as_pydicts="lossy") if maps else batch.to_pylist()
    if decode_json:
        for f in batch.schema:
            if is_text(f.type) or is_binary(f.type):
                name = f.name
                for row, value in zip(rows, text_values(f.type, [r[name] for r in rows]), strict=True):
                    row[name] = value
    return rows


def is_binary(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t))


def text_values(t: pa.DataType, values: list[Any]) -> list[Any]:
    """A top-level text column's values, JSON text decoded; a binary column's too, each value that
    is UTF-8 read as text (writers that do not mark strings as such; other bytes stay bytes)."""
    if is_binary(t):
        values = [_utf8_or_bytes(v) for v in values]
    return decode_json_text(values)


def _utf8_or_bytes(value: Any) -> Any:
    if type(value) is not bytes:
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value


def checked_records(batch: pa.RecordBatch) -> tuple[list[dict[str, Any]], dict[int, str]]:
    """:func:`batch_records`, and the rows that hold text that is not UTF-8 (a writer that put raw
    bytes into a ``string`` column): ``{row index in the batch: what is wrong, naming the column}``.
    Such a row's bad values are decoded with U+FFFD in place of the bad bytes (a string column's;
    a nested column's value is None), so that its dead letter still shows the row; the other rows
    are exactly :func:`batch_records`'s. Only a batch that fails to convert is looked at cell by cell.

    >>> b = pa.RecordBatch.from_arrays([pa.array([b"ok", b"a\\xffb"]).view(pa.string())], ["text"])
    >>> rows, bad = checked_records(b)
    >>> rows[0], rows[1] == {"text": "a\\ufffdb"}, bad
    ({'text': 'ok'}, True, {1: "column 'text': invalid UTF-8 at byte 1 (0xff): invalid start byte"})
    """
    try:
        return batch_records(batch), {}
    except UnicodeDecodeError:
        pass
    maps = any(has_map(f.type) for f in batch.schema)
    columns: dict[str, list[Any]] = {}
    bad: dict[int, str] = {}
    for f, col in zip(batch.schema, batch.columns, strict=True):
        try:
            values = col.to_pylist(maps_as_pydicts="lossy") if maps else col.to_pylist()
        except UnicodeDecodeError:
            values = []
            for i in range(len(col)):
                cell = col.slice(i, 1)
                try:
                    values.append(cell.to_pylist(maps_as_pydicts="lossy")[0] if maps else cell.to_pylist()[0])
                except UnicodeDecodeError as exc:
                    byte = f" (0x{exc.object[exc.start]:02x})" if exc.start < len(exc.object) else ""
                    note = f"column {f.name!r}: invalid UTF-8 at byte {exc.start}{byte}: {exc.reason}"
                    bad[i] = f"{bad[i]}; {note}" if i in bad else note
                    values.append(_lossy(cell))
        columns[f.name] = text_values(f.type, values) if is_text(f.type) or is_binary(f.type) else values
    names = list(columns)
    rows = [dict(zip(names, vals, strict=True)) for vals in zip(*columns.values(), strict=True)]
    return rows, bad


def _lossy(cell: pa.Array) -> Any:
    """A one-value text array's value with bytes that are not UTF-8 replaced (U+FFFD); None for
    other types (a nested value holding bad text)."""
    if pa.types.is_string(cell.type) or pa.types.is_large_string(cell.type):
        raw = cell.view(pa.large_binary() if pa.types.is_large_string(cell.type) else pa.binary()).to_pylist()[0]
        return None if raw is None else raw.decode("utf-8", "replace")
    return None


# -- files and row groups ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RowGroup:
    """One row group of a file: its index, the file-wide index of its first row, its row count."""

    index: int
    first_row: int
    rows: int


@dataclass
class ParquetInput:
    """One Parquet file: ``name`` is what positions carry (a path or ``s3://bucket/key``), ``path``
    what ``filesystem`` opens (None: the local filesystem)."""

    name: str
    path: str
    filesystem: Any = None
    size: int = 0
    row_groups: list[RowGroup] = field(default_factory=list)

    def open(self) -> pq.ParquetFile:
        """The file, its footer read (row groups known); a ConnectorError names it if it is not Parquet."""
        try:
            if self.filesystem is None:
                pf = pq.ParquetFile(self.path, buffer_size=READ_BUFFER, pre_buffer=False)
            else:
                pf = pq.ParquetFile(self.filesystem.open_input_file(self.path))
                if largest_row_group(pf.metadata) > REMOTE_WHOLE_CHUNKS:
                    pf = pq.ParquetFile(
                        self.filesystem.open_input_file(self.path),
                        metadata=pf.metadata,
                        buffer_size=READ_BUFFER,
                        pre_buffer=False,
                    )
        except (OSError, pa.ArrowException) as exc:
            raise ConnectorError(f"{self.name}: cannot read as Parquet: {exc}") from exc
        meta = pf.metadata
        first = 0
        groups = []
        for i in range(meta.num_row_groups):
            n = meta.row_group(i).num_rows
            groups.append(RowGroup(i, first, n))
            first += n
        self.row_groups = groups
        return pf

    @property
    def rows(self) -> int:
        return sum(g.rows for g in self.row_groups)

    def batches(
        self,
        pf: pq.ParquetFile,
        groups: Sequence[RowGroup],
        *,
        columns: Sequence[str] | None = None,
        batch_rows: int = BATCH_ROWS,
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        """(file-wide index of the batch's first row, batch) over ``groups``, a batch at a time
        (no batch spans two row groups)."""
        for g in groups:
            yield from self.run_batches(pf, [g], columns=columns, batch_rows=batch_rows)

    def run_batches(
        self,
        pf: pq.ParquetFile,
        groups: Sequence[RowGroup],
        *,
        columns: Sequence[str] | None = None,
        batch_rows: int = BATCH_ROWS,
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        """(file-wide index of the batch's first row, batch) over a run of consecutive row groups
        (``groups[i + 1]`` follows ``groups[i]`` in the file), read as one stream: a batch may span
        row groups, so small row groups still make batches of ``batch_rows`` rows."""
        if not groups:
            return
        row = groups[0].first_row
        try:
            for batch in pf.iter_batches(
                batch_size=batch_rows,
                row_groups=[g.index for g in groups],
                columns=list(columns) if columns else None,
                use_threads=False,  # the engine's own threads keep the cores busy
            ):
                yield row, batch
                row += batch.num_rows
        except (OSError, pa.ArrowException) as exc:
            at = next((g for g in groups if g.first_row + g.rows > row), groups[-1])
            raise ConnectorError(f"{self.name}: row group {at.index}: read failed: {exc}") from exc


def largest_row_group(meta: pq.FileMetaData) -> int:
    """Compressed bytes of a file's largest row group (its column chunks together)."""
    largest = 0
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        largest = max(largest, sum(rg.column(j).total_compressed_size for j in range(rg.num_columns)))
    return largest


def iter_file_rows(
    path: str, *, filesystem: Any = None, name: str | None = None, columns: Sequence[str] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row index, record) of every row of one file, a batch at a time: the per-file row iterator
    for readers that group rows themselves (multi-row exports)."""
    inp = ParquetInput(name or path, path, filesystem)
    pf = inp.open()
    for first, batch in inp.batches(pf, inp.row_groups, columns=columns):
        yield from enumerate(batch_records(batch), first)


__all__ = [
    "BATCH_ROWS",
    "MAGIC",
    "SUFFIXES",
    "ParquetInput",
    "RowGroup",
    "batch_records",
    "checked_records",
    "has_parquet_suffix",
    "is_parquet",
    "iter_file_rows",
    "parquet_files",
]
