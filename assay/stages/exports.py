"""One record per trace from exports that hold a trace in many rows, in the default reading.

:class:`AssembleExports` wraps a source (local files, S3 objects, Parquet files) read record by
record. It looks at the first row of each input (file, object): when it is a LangSmith run or a
Langfuse observation row (:func:`assay.traces.exports.export_row_kind`), the input's rows are
grouped by trace id (held as offsets, the payloads on disk past a budget:
:class:`~assay.traces.exports.RowGroups`) and each trace becomes one record (the JSON array of its
rows, which the ``langsmith`` / ``langfuse`` normalizers assemble) when the input ends; any other
input passes through untouched, at the cost of parsing its first row.

A grouped record's position is its first row's; acknowledging it acknowledges all its rows, so
resuming skips whole traces. A trace whose rows are in several inputs becomes one record per
input (LangSmith and Langfuse exports write a trace's rows in one file per export window; a trace
still running across a window boundary is split). The legacy Langfuse ``traces/`` +
``observations/`` pair is the exception (:func:`~assay.traces.exports.crosses_inputs`): a trace's
row and its observations are in different files, so the rows of all the source's inputs of that
pair are held together (keys and offsets, as above) and grouped when the source ends, a trace's
``traces/`` row joining its observations. Sharded runs read an export input whole, in one shard
(:class:`~assay.connectors.file_source.FileSource` and S3 shard such inputs by file); the legacy
pair's inputs are read by every shard of a local or Parquet source, each keeping the traces whose id
hashes to it (``across_shard``), while S3 JSON objects are sharded whole (the pair is then grouped
per shard).

>>> import anyio, orjson
>>> from assay.testing import ListSource
>>> run = lambda t, i: {"id": i, "trace_id": t, "run_type": "chain", "dotted_order": i, "inputs": "{}"}
>>> rows = [run("a", "a1"), run("b", "b1"), run("a", "a2")]
>>> async def demo():
...     async with AssembleExports(ListSource(rows)) as src:
...         return [[r["id"] for r in orjson.loads(e.payload)] async for b in src.batches() for e in b]
>>> anyio.run(demo)
[['a1', 'a2'], ['b1']]
"""

from __future__ import annotations

import zlib
from typing import Any

import orjson

from assay.connectors.base import Source
from assay.records import Envelope, Position
from assay.stages.sessions import GroupingSource
from assay.traces.exports import (
    DEFAULT_SPILL_BYTES,
    RowGroups,
    columns_cross_inputs,
    crosses_inputs,
    export_columns,
    export_row_kind,
    row_trace_id,
)


class AssembleExports(GroupingSource):
    """Group export rows into traces, input by input; pass other inputs through (module docs)."""

    def __init__(
        self,
        inner: Source,
        *,
        spill_bytes: int = DEFAULT_SPILL_BYTES,
        across_shard: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(inner, spill_bytes=spill_bytes)
        #: ``(i, n)`` when ``inner`` gives every shard the legacy Langfuse pair's inputs whole:
        #: this shard keeps their traces whose trace id hashes to ``i`` modulo ``n``.
        self.across_shard = across_shard
        self._input: str | None = None
        self._assembling = False
        self._across = False  # the input is the legacy Langfuse pair's: its rows go to _legacy
        # the legacy pair's rows of all the source's inputs, grouped when the source ends
        self._legacy: RowGroups[Position] = RowGroups(spill_bytes=spill_bytes)
        self._legacy_inputs: list[str] = []

    def describe(self) -> str:
        return self.inner.describe()

    def _finish(self) -> list[Envelope]:
        self._flush_exports()
        self._flush_legacy()
        return []

    def _flush_legacy(self) -> None:
        """The source ended: one record per trace id of the legacy pair's rows (module docs)."""
        if not self._legacy_inputs:
            return
        groups, inputs = self._legacy, self._legacy_inputs
        self._legacy = RowGroups(spill_bytes=groups.spill_bytes)
        self._legacy_inputs = []
        spilled = " (rows held on disk)" if groups.spilled else ""
        reading = (
            f"{groups.rows} rows of a legacy Langfuse traces/ + observations/ export, grouped by trace id "
            f"across {len(inputs)} inputs into {len(groups)} traces{spilled}"
        )
        for name in inputs:
            self.readings[name] = reading
        self._drains.append(self._drain(groups))

    def _feed(self, batch: list[Envelope]) -> list[Envelope]:
        if not self._assembling and batch and batch[0].position.source == batch[-1].position.source == self._input:
            return batch  # the common case: a batch inside a plain input
        out: list[Envelope] = []
        for env in batch:
            source = env.position.source
            if source != self._input:  # a new input: its first row decides how it is read
                self._flush_exports()
                kind = _input_kind(env)
                self._input = source
                self._assembling = kind is not None
                self._across = kind == "across"
                if self._across:
                    self._legacy_inputs.append(source)
            if not self._assembling:
                out.append(env)
                continue
            row = _row(env)
            if export_row_kind(row) is None:
                out.append(env)  # a stray row: a record of its own (the normalizer reports it)
            else:
                assert isinstance(row, dict)
                if self._across and self.across_shard is not None and not _ours(row, env, self.across_shard):
                    continue  # another shard's trace (every shard reads the pair's inputs)
                if not env.payload:  # a decoded row (Parquet): its JSON is what the group holds
                    env = Envelope(orjson.dumps(row, default=str, option=orjson.OPT_NON_STR_KEYS), env.position)
                if self._across and is_langfuse_row(row):
                    self._legacy.add(row_trace_id(row), env.payload, env.position)
                else:
                    self._add_export(row, env)
        return out


def _row(env: Envelope) -> object:
    """The record of an envelope: the source's decoded row, else its JSON payload parsed."""
    if env.record is not None:
        return env.record.as_dict() if hasattr(env.record, "as_dict") else env.record
    try:
        return orjson.loads(env.payload)
    except orjson.JSONDecodeError:
        return None


def _ours(row: dict[str, Any], env: Envelope, shard: tuple[int, int]) -> bool:
    """Whether a row of the legacy pair belongs to this shard: by its trace id's CRC-32 (stable
    across processes), or its position when it has none."""
    key = row_trace_id(row) or str(env.position)
    return zlib.crc32(key.encode()) % shard[1] == shard[0]


def is_langfuse_row(row: dict[str, Any]) -> bool:
    """A Langfuse row (an observation or a ``traces/`` row; not a LangSmith run)."""
    return export_row_kind(row) == "langfuse"


def _input_kind(env: Envelope) -> str | None:
    """How the input whose first row this is is read: ``"across"`` (a legacy Langfuse export's
    ``traces/`` or ``observations/`` rows, grouped with those of all such inputs), ``"export"`` (export
    rows, grouped within the input) or None (record by record). A Parquet row tells by its table's
    columns (no row converted); others by the row itself."""
    columns = getattr(env.record, "column_names", None)
    if callable(columns):
        names = columns()
        if not export_columns(names):
            return None
        return "across" if columns_cross_inputs(names) else "export"
    row = _row(env)
    if export_row_kind(row) is None:
        return None
    return "across" if crosses_inputs(row) else "export"


__all__ = ["AssembleExports"]
