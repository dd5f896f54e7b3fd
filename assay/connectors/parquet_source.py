"""The Parquet source (extra ``assay[lake]``): rows of ``*.parquet`` files, directories, globs and
``s3://`` prefixes as traces, a row group at a time.

* **Inputs**: local paths (Parquet by suffix or by the ``PAR1`` magic,
  :func:`~assay.connectors.parquet_rows.parquet_files`) or ``s3://`` URLs (an object, a prefix, a key
  glob; read through ``pyarrow.fs.S3FileSystem`` with the run's ``s3:`` settings).
* **Records**: each row is a record, exactly as a JSON line with the same keys would be (the
  ``normalize`` paths apply unchanged): nested ``list<struct>`` columns are lists of dicts, text
  columns holding JSON objects or arrays are decoded. Envelopes carry the decoded row
  (:class:`~assay.records.Envelope` ``record``), so nothing is encoded to JSON and parsed again.
* **Positions** are ``(file, row)``: ``Position(name, line=row number, 1-based)``; the resume
  ledger is the file source's (:class:`~assay.connectors.ledger.LineLedger`), and a row group whose
  rows are all done is not even read.
* **Shards** (``--workers`` / ``--shard i/N``): the (file, row group) units, in order, whose index
  is ``i`` modulo ``N``; the files of a multi-row export (LangSmith runs, Langfuse observations:
  :func:`~assay.traces.exports.export_columns`) are read by every shard, since a trace's rows may be
  in any of them (:class:`~assay.connectors.exports.AssembleExports` keeps each shard's traces).

>>> import anyio, tempfile, pathlib, pyarrow as pa, pyarrow.parquet as pq
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> pq.write_table(pa.table({"id": ["a", "b"], "output": ["x", "y"]}), d / "t.parquet")
>>> async def read():
...     async with ParquetSource([str(d)]) as src:
...         return [(e.position.line, e.record.as_dict()["id"]) async for b in src.batches() for e in b]
>>> anyio.run(read)
[(1, 'a'), (2, 'b')]
"""

from __future__ import annotations

import fnmatch
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread

from assay.connectors.base import Source, threaded_batches
from assay.connectors.ledger import LineLedger, merge
from assay.connectors.parquet_rows import BATCH_ROWS, ParquetInput, RowGroup, has_parquet_suffix, parquet_files
from assay.connectors.parquet_traces import BatchRows, Row, columnar_plan, text_free_columns
from assay.exceptions import ConfigError, ConnectorError
from assay.records import Envelope, Position
from assay.traces.exports import export_columns


def s3_filesystem(options: Any) -> Any:
    """A ``pyarrow.fs.S3FileSystem`` for the run's ``s3:`` settings (endpoint, region; credentials
    from the standard AWS environment)."""
    import os

    from pyarrow import fs

    endpoint = (
        getattr(options, "endpoint_url", None)
        or os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
    )
    region = getattr(options, "region", None) or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    kwargs: dict[str, Any] = {}
    if endpoint:
        scheme, _, rest = endpoint.partition("://")
        kwargs["endpoint_override"] = rest or scheme
        kwargs["scheme"] = scheme if rest else "https"
        if getattr(options, "addressing_style", "auto") != "virtual":
            kwargs["force_virtual_addressing"] = False
    if region:
        kwargs["region"] = region
    return fs.S3FileSystem(**kwargs)


def list_s3_parquet(urls: Sequence[str], filesystem: Any) -> list[tuple[str, str, int]]:
    """(``s3://`` name, filesystem path, size) of the objects the URLs select, sorted per URL: an
    object, a prefix (recursively; ``_``/``.``-prefixed keys skipped) or a key glob."""
    from pyarrow import fs

    out: list[tuple[str, str, int]] = []
    seen: set[str] = set()
    for url in urls:
        bucket, _, key = url[5:].partition("/")
        pattern = key if any(c in key for c in "*?[") else None
        base = key[: min(i for i in (key.find(c) for c in "*?[") if i >= 0)] if pattern else key
        infos: list[Any]
        try:
            single = None if pattern or not key or key.endswith("/") else filesystem.get_file_info(f"{bucket}/{key}")
            if single is not None and single.type == fs.FileType.File:
                infos = [single]
            else:
                prefix = base.rsplit("/", 1)[0] if pattern else base.rstrip("/")
                selector = fs.FileSelector(f"{bucket}/{prefix}".rstrip("/"), recursive=True, allow_not_found=True)
                infos = filesystem.get_file_info(selector)
        except OSError as exc:
            raise ConnectorError(f"{url}: cannot list: {exc}") from exc
        found = []
        for info in infos:
            if info.type != fs.FileType.File:
                continue
            k = info.path.split("/", 1)[1]
            rel = k[len(base) :] if k.startswith(base) else k
            if pattern is not None and not fnmatch.fnmatchcase(k, pattern):
                continue
            if k != key and any(part.startswith(("_", ".")) for part in rel.split("/") if part):
                continue
            if pattern is None and k != key and not has_parquet_suffix(k) and not _parquet_magic(filesystem, info.path):
                continue  # under a prefix: Parquet by suffix, or (no suffix, as some exporters write) by magic
            found.append((f"s3://{bucket}/{k}", info.path, int(info.size or 0)))
        if not found:
            raise ConnectorError(f"{url}: no Parquet objects")
        for item in sorted(found):
            if item[0] not in seen:
                seen.add(item[0])
                out.append(item)
    return out


def _parquet_magic(filesystem: Any, path: str) -> bool:
    """Whether an object starts with the ``PAR1`` magic (a ranged read of 4 bytes); objects with
    a JSON-lines or compression suffix are not read."""
    if path.lower().endswith(_NOT_PARQUET):
        return False
    try:
        with filesystem.open_input_file(path) as f:
            return bool(f.read_at(4, 0) == b"PAR1")
    except OSError:
        return False


_NOT_PARQUET = (".jsonl", ".ndjson", ".json", ".gz", ".zst", ".csv", ".txt")


COLUMNAR_ROWS = 8_192
"""Rows per record batch of :meth:`ParquetSource.arrow_batches` (the columnar engine's unit), read
across the consecutive row groups of a file: a scored batch costs a few hundred numpy and Arrow
calls whatever its size, so 1,024-row batches spent twice the CPU of 8,192-row ones on the same
rows; 16,384 saved another ~3 % of a run's CPU for ~70 MB more peak memory (``benchmarks/README.md``)."""


@dataclass(slots=True)
class RowSpan(Position):
    """Rows ``line`` to ``last`` (1-based, inclusive) of one input, acknowledged as one position
    (the columnar engine writes a whole batch of rows at once: one span, not a position per row)."""

    last: int = 0


@dataclass(slots=True)
class ArrowUnit:
    """One record batch of one input as read (:meth:`ParquetSource.arrow_batches`): ``first`` is
    the 0-based row of its first row in the file; ``done`` says which rows an earlier attempt
    completed (None: none of them)."""

    name: str
    first: int
    batch: Any
    done: Callable[[int], bool] | None = None

    @property
    def num_rows(self) -> int:
        return int(self.batch.num_rows)

    def span(self) -> RowSpan:
        """The batch's rows as one position (1-based, inclusive)."""
        return RowSpan(self.name, self.first + 1, last=self.first + self.num_rows)

    def envelopes(self, only: Sequence[int] | None = None) -> list[Envelope]:
        """The batch's rows as the envelopes :meth:`ParquetSource.batches` gives (done rows left
        out); ``only``: these rows of the batch (0-based, in order; only they are converted)."""
        batch = self.batch
        index: Sequence[int] = range(self.num_rows) if only is None else only
        if only is not None and len(only) < self.num_rows:
            import numpy as np

            from assay.connectors.arrow_arrays import from_numpy

            batch = batch.take(from_numpy(np.asarray(only, dtype=np.int64)))
        taken = batch is not self.batch
        rows = BatchRows(batch, columnar_plan(batch.schema))
        out = []
        done = self.done
        for j, i in enumerate(index):
            row = self.first + i + 1
            if done is not None and done(row):
                continue
            out.append(Envelope(b"", Position(self.name, row), record=Row(rows, j if taken else i)))
        return out

    def pieces(self, rows: int) -> list[ArrowUnit]:
        """The unit cut into units of at most ``rows`` rows (slices, in order)."""
        if self.num_rows <= rows:
            return [self]
        return [
            ArrowUnit(self.name, self.first + at, self.batch.slice(at, rows), self.done)
            for at in range(0, self.num_rows, rows)
        ]

    def pending_rows(self) -> int:
        """Rows not done by an earlier attempt."""
        if self.done is None:
            return self.num_rows
        return sum(1 for i in range(self.num_rows) if not self.done(self.first + i + 1))


class ParquetSource(Source):
    """Rows of Parquet files as records (see the module docs).

    ``paths``: local files, directories, globs, or ``s3://`` URLs (all of one kind); ``s3``: the
    run's ``s3:`` settings for ``s3://`` URLs; ``columns``: read only these top-level columns
    (default: all); ``skip_text``: leave the ``content`` of OpenAI message columns unread (no
    evaluator of the run reads text: :func:`~assay.connectors.parquet_traces.text_free_columns`);
    ``skip_call_ids``: with ``skip_text``, leave the calls' ids and ``tool_call_id`` unread too (no
    evaluator reads them); ``skip_args``: with ``skip_text``, leave the calls' arguments unread (no
    evaluator compares arguments: calls then read as having none, and argument defects go unseen);
    ``shard=(i, n)``; ``resume_state``: a :meth:`snapshot` of an earlier run.
    """

    size_unit = "records"

    def __init__(
        self,
        paths: Sequence[str],
        *,
        batch_size: int = 256,
        shard: tuple[int, int] | None = None,
        resume_state: Any = None,
        s3: Any = None,
        columns: Sequence[str] | None = None,
        skip_text: bool = False,
        skip_call_ids: bool = False,
        skip_args: bool = False,
    ) -> None:
        super().__init__()
        self.paths = list(paths)
        remote = [p.startswith("s3://") for p in self.paths]
        if any(remote) and not all(remote):
            raise ConfigError("source: s3:// and local Parquet paths mixed; read them in separate runs")
        self.remote = bool(remote) and all(remote)
        self.batch_size = batch_size
        self.shard = shard
        self.s3 = s3
        self.columns = list(columns) if columns else None
        self.skip_text = skip_text
        self.skip_call_ids = skip_call_ids
        self.skip_args = skip_args
        self.ledger = LineLedger.from_json(resume_state)  # grows with ack()
        self._resume = LineLedger.from_json(resume_state)  # what to skip; frozen during a run
        self.units: list[tuple[ParquetInput, RowGroup]] = []  # this shard's (file, row group), in order
        self._stopped = False
        self.has_exports = False
        """Some input holds export rows (one trace over many rows; known after ``open``)."""
        self._rows_total = 0
        self._rows_done = 0

    def describe(self) -> str:
        return f"parquet: {', '.join(self.paths)}"

    def stop(self) -> None:
        self._stopped = True

    def size_hint(self) -> int | None:
        """Rows of this shard's row groups (known after ``open``)."""
        return self._rows_total if self.units else None

    def size_done(self) -> int | None:
        return self._rows_done if self.units else None

    async def open(self) -> None:
        self.units = await anyio.to_thread.run_sync(self._plan)
        self._rows_total = sum(g.rows for _, g in self.units)

    def inputs(self) -> list[ParquetInput]:
        """Every input file (before sharding), footers not yet read."""
        if self.remote:
            filesystem = s3_filesystem(self.s3)
            return [
                ParquetInput(name, path, filesystem, size)
                for name, path, size in list_s3_parquet(self.paths, filesystem)
            ]
        files = parquet_files(self.paths)
        if files is None:
            raise ConfigError(f"source: no Parquet files in {', '.join(map(repr, self.paths))}")
        return [ParquetInput(f, f) for f in files]

    def _plan(self) -> list[tuple[ParquetInput, RowGroup]]:
        units: list[tuple[ParquetInput, RowGroup]] = []
        keys: list[int | None] = []  # a unit's shard key: its index; None for an export's: every shard
        for inp in self.inputs():
            pf = inp.open()  # the footer: row groups
            names = pf.schema_arrow.names
            every = export_columns(names)  # a trace's rows in any export file: every shard, by trace id
            self.has_exports = self.has_exports or bool(every)
            for g in inp.row_groups:
                keys.append(None if every else len(units))
                units.append((inp, g))
        if self.shard is not None:
            i, n = self.shard
            units = [u for key, u in zip(keys, units, strict=True) if key is None or key % n == i]
        return units

    async def ack(self, positions: Sequence[Position]) -> None:
        spans = [p for p in positions if type(p) is RowSpan]
        if spans:
            for sp in spans:
                self.ledger.done[sp.source] = merge(self.ledger.done.get(sp.source, []), [[sp.line or 1, sp.last]])
                self.ledger.add_keys(sp.source, [])  # the interval starts, refreshed
            positions = [p for p in positions if type(p) is not RowSpan]
        self.ledger.add(positions)

    def snapshot(self) -> Any:
        """The completed-rows ledger, ``{file: [[first, last], ...]}`` (1-based row numbers)."""
        return self.ledger.to_json()

    def _group_done(self, name: str, g: RowGroup) -> bool:
        ivs = self._resume.done.get(name)
        if not ivs or not g.rows:
            return not g.rows
        first, last = g.first_row + 1, g.first_row + g.rows
        return any(s <= first and last <= e for s, e in ivs)

    def _columns(self, pf: Any) -> list[str] | None:
        """The columns to read of one file (every evaluator's needs; see the class docs)."""
        columns = self.columns
        if self.skip_text and columns is None:
            columns = text_free_columns(pf, call_ids=not self.skip_call_ids, args=not self.skip_args)
        return columns

    def _iter_units(self, rows: int = BATCH_ROWS, *, across_groups: bool = False) -> Iterator[ArrowUnit]:
        """Every record batch of this shard's row groups not wholly done, in order, of at most
        ``rows`` rows; ``across_groups``: a batch may span consecutive row groups of one file."""
        open_files: dict[str, Any] = {}
        for inp, run in self._runs(across_groups):
            if self._stopped:
                return
            name = inp.name
            opened = open_files.get(name)
            if opened is None:
                open_files.clear()  # one file open at a time
                pf = inp.open()
                opened = open_files[name] = (pf, self._columns(pf))
            pf, columns = opened
            done = self._resume.checker(name)
            intervals = self._resume.done.get(name) or []
            batches = (
                inp.run_batches(pf, run, columns=columns, batch_rows=rows)
                if across_groups
                else inp.batches(pf, run, columns=columns, batch_rows=rows)
            )
            for first, batch in batches:
                last = first + batch.num_rows  # rows first + 1 .. last, 1-based
                touched = done is not None and any(s <= last and first + 1 <= e for s, e in intervals)
                yield ArrowUnit(name, first, batch, done if touched else None)
                self._rows_done += batch.num_rows
                if self._stopped:
                    return

    def _runs(self, across_groups: bool) -> Iterator[tuple[ParquetInput, list[RowGroup]]]:
        """This shard's row groups not wholly done, in order: one at a time, or (``across_groups``)
        as runs of consecutive row groups of one file."""
        run: list[RowGroup] = []
        run_input: ParquetInput | None = None
        for inp, group in self.units:
            if self._group_done(inp.name, group):
                self._rows_done += group.rows
                continue
            if run and (not across_groups or inp is not run_input or group.index != run[-1].index + 1):
                assert run_input is not None
                yield run_input, run
                run = []
            run_input = inp
            run.append(group)
        if run:
            assert run_input is not None
            yield run_input, run

    def _iter_envelopes(self) -> Iterator[Envelope]:
        for unit in self._iter_units():
            yield from unit.envelopes()

    async def arrow_batches(self, rows: int = COLUMNAR_ROWS) -> AsyncIterator[ArrowUnit]:
        """The record batches themselves (the columnar engine's reading: no envelope per row), of
        up to ``rows`` rows across consecutive row groups, each read in a worker thread;
        acknowledge a unit's rows with :meth:`ArrowUnit.span`."""
        units = self._iter_units(rows, across_groups=True)
        while not self._stopped:
            unit = await anyio.to_thread.run_sync(next, units, None)
            if unit is None:
                return
            yield unit

    async def batches(self) -> AsyncIterator[list[Envelope]]:
        async for batch in threaded_batches(self._iter_envelopes(), self.batch_size, stopped=lambda: self._stopped):
            yield batch

    async def aclose(self) -> None:
        pass


__all__ = ["COLUMNAR_ROWS", "ArrowUnit", "ParquetSource", "RowSpan", "list_s3_parquet", "s3_filesystem"]
