"""One record per trace from exports that hold a trace in many rows, in the default reading.

:class:`AssembleExports` wraps a source (local files, S3 objects, Parquet files) read record by
record. It looks at the first row of each input (file, object): when it is a LangSmith run or a
Langfuse observation row (:func:`assay.traces.exports.export_row_kind`; a Parquet file tells by
its columns), the input's rows are held by trace id together with those of the source's other
export inputs (in memory up to a budget, ``spill_bytes``: the source's ``export_memory_bytes``;
past it sorted by trace id into runs on disk and merged at the end:
:class:`~assay.traces.row_groups.RowGroups`), and each trace becomes one record (the JSON array of
its rows, which the ``langsmith`` / ``langfuse`` normalizers assemble) when the source ends: in the
order each trace was first seen when the rows fit in the budget, else in trace id order (the same
on every run). Any other input passes through untouched, at the cost of parsing its first row.

Exports write a trace's rows into any of their files (a bulk export's files are cut by size, a
trace may cross an export window, the legacy Langfuse ``traces/`` row and its observations are in
different folders), so the rows are grouped across inputs, not file by file. A grouped record's
position is its first row's; acknowledging it acknowledges all its rows, so resuming skips whole
traces. Sharded runs: every shard reads the export inputs of a local or Parquet source whole and
keeps the traces whose id hashes to it (``across_shard``); S3 JSON objects are sharded whole by
object (a trace whose rows are in objects of different shards is then one trace per shard).

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

import logging
import zlib

import orjson

from assay.connectors.base import Source
from assay.connectors.sessions import GroupingSource
from assay.events import log_event
from assay.records import Envelope, Position
from assay.traces.exports import (
    DEFAULT_SPILL_BYTES,
    RowGroups,
    export_columns,
    export_row_kind,
    is_langfuse_score_row,
    row_trace_id,
    score_columns,
)


class AssembleExports(GroupingSource):
    """Group export rows into traces across the source's inputs; pass other inputs through
    (module docs)."""

    def __init__(
        self,
        inner: Source,
        *,
        spill_bytes: int = DEFAULT_SPILL_BYTES,
        across_shard: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(inner, spill_bytes=spill_bytes)
        #: ``(i, n)`` when ``inner`` gives every shard the export inputs whole: this shard keeps
        #: their traces whose trace id hashes to ``i`` modulo ``n``.
        self.across_shard = across_shard
        self._input: str | None = None
        self._assembling = False  # the current input holds export rows
        self._skipping = False  # the current input holds Langfuse scores, not traces
        # the export rows of all the source's inputs, grouped when the source ends
        self._held: RowGroups[Position] = RowGroups(spill_bytes=spill_bytes)
        self._held_inputs: list[str] = []
        self._kinds: set[str] = set()  # export_row_kind of the rows held

    def describe(self) -> str:
        return self.inner.describe()

    def _finish(self) -> list[Envelope]:
        """The source ended: one record per trace id of the export rows held (module docs)."""
        if not self._held_inputs:
            return []
        groups, inputs = self._held, self._held_inputs
        self._held = RowGroups(spill_bytes=groups.spill_bytes)
        self._held_inputs = []
        across = f" across {len(inputs)} inputs" if len(inputs) > 1 else ""
        kinds = " and ".join(_KIND_NAMES.get(k, k) for k in sorted(self._kinds)) or "export"
        self._kinds = set()
        self._give_out(groups, inputs, f"{groups.rows} {kinds} rows grouped by trace id{across}")
        return []

    def _held_groups(self) -> list[RowGroups[Position]]:
        return [self._exports, self._held]

    def _feed(self, batch: list[Envelope]) -> list[Envelope]:
        plain = not (self._assembling or self._skipping)
        if plain and batch and batch[0].position.source == batch[-1].position.source == self._input:
            return batch  # the common case: a batch inside a plain input
        out: list[Envelope] = []
        shard = self.across_shard
        for env in batch:
            source = env.position.source
            if source != self._input:  # a new input: its first row decides how it is read
                self._input = source
                self._skipping = _holds_scores(env)
                if self._skipping:
                    self.readings[source] = _SCORES_SKIPPED
                    log_event("input_skipped", logging.WARNING, f"{source}: {_SCORES_SKIPPED}", input=source)
                self._assembling = not self._skipping and _holds_exports(env)
                if self._assembling:
                    self._held_inputs.append(source)
                elif callable(getattr(env.record, "column_names", None)):
                    self.readings[source] = "Parquet: one record per row"
            if self._skipping:
                continue
            if not self._assembling:
                out.append(env)
                continue
            row = _row(env)
            kind = export_row_kind(row)
            if shard is not None and not _ours(row if kind else None, env, shard):
                continue  # another shard's (every shard reads the export inputs whole)
            if kind is None:
                out.append(env)  # a stray row: a record of its own (the normalizer reports it)
                continue
            assert isinstance(row, dict)
            self._kinds.add(kind)
            if not env.payload:  # a decoded row (Parquet): its JSON is what the group holds
                env = Envelope(_compact(orjson.dumps(row, default=str, option=orjson.OPT_NON_STR_KEYS)), env.position)
            self._held.add(row_trace_id(row), env.payload, env.position)
        return out


#: How the readings name the rows of each export kind.
_KIND_NAMES = {"langsmith": "LangSmith run", "langfuse": "Langfuse export"}


def _row(env: Envelope) -> object:
    """The record of an envelope: the source's decoded row, else its JSON payload parsed; None for
    a row that cannot be read (a Parquet row with text that is not UTF-8, like a JSON line that is
    not: a record of its own, which the parser makes a dead letter naming file, row and column)."""
    if env.record is not None:
        bad = getattr(env.record, "decode_error", None)
        if bad is not None and bad() is not None:
            return None
        return env.record.as_dict() if hasattr(env.record, "as_dict") else env.record
    try:
        return orjson.loads(env.payload)
    except orjson.JSONDecodeError:
        return None


def _compact(payload: bytes) -> bytes:
    """A copy of ``payload`` that takes only its length in memory. ``orjson.dumps`` returns bytes
    whose allocation is its whole output buffer, 4 KiB at least and some 13 times the length for a
    row of a few KiB: held by the thousand until the source ends, those were most of the memory of
    an export read from Parquet (575 MiB for 66,596 rows under a 64 MiB budget), not the budget."""
    return bytes(memoryview(payload))


def _ours(row: object, env: Envelope, shard: tuple[int, int]) -> bool:
    """Whether a row of an export input belongs to this shard: by its trace id's CRC-32 (stable
    across processes), or its position when it has none (``row`` None: a stray row)."""
    key = (row_trace_id(row) if type(row) is dict else None) or str(env.position)
    return zlib.crc32(key.encode()) % shard[1] == shard[0]


_SCORES_SKIPPED = "Langfuse scores/ rows: scores of traces, not traces; not read"


def _holds_scores(env: Envelope) -> bool:
    """Whether the input whose first row this is is a Langfuse ``scores/`` export (Langfuse writes
    one beside the observations of every export window)."""
    columns = getattr(env.record, "column_names", None)
    if callable(columns):
        return score_columns(columns())
    return is_langfuse_score_row(_row(env))


def _holds_exports(env: Envelope) -> bool:
    """Whether the input whose first row this is holds export rows. A Parquet row tells by its
    table's columns (no row converted); others by the row itself."""
    columns = getattr(env.record, "column_names", None)
    if callable(columns):
        return export_columns(columns())
    return export_row_kind(_row(env)) is not None


__all__ = ["AssembleExports"]
