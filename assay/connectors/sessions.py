"""Session grouping as a Source wrapper: one record per agent session, whatever the source.

Agent session transcripts (Claude Code, Agent SDK ``stream-json``) and span-per-record exports
(OpenTelemetry ``ConsoleSpanExporter`` output, span-per-line dumps; grouped by trace id with
:class:`assay.traces.span_groups.SpanGrouper`) spread one trace over many rows.
:class:`GroupSessions` wraps any :class:`~assay.connectors.base.Source` yielding such rows and
yields one envelope per session (the JSON array of its rows), cut by
:func:`assay.traces.claude_code.group_session_rows`; a session never spans two inputs (files,
objects, partitions). A grouped record's position is its first row's position; when the engine
acknowledges it, the wrapper acknowledges every member row to the inner source, so the inner
source's resume state (a ledger of lines, committed offsets) stays exact.

>>> import anyio
>>> from assay.testing import ListSource
>>> rows = [{"sessionId": "a", "n": 1}, {"sessionId": "a", "n": 2}, {"sessionId": "b", "n": 3}]
>>> async def demo():
...     inner = ListSource(rows, batch_size=1)
...     async with GroupSessions(inner) as src:
...         got = [(e.position.line, len(e.payload)) async for b in src.batches() for e in b]
...         await src.ack([Position("<list>", 1)])
...     return [line for line, _ in got], [p.line for p in inner.acked]
>>> anyio.run(demo)
([1, 3], [1, 2])
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import AsyncIterator, Generator, Iterator, Sequence
from typing import Any

import anyio
import anyio.to_thread
import orjson

from assay.connectors.base import Source
from assay.records import Envelope, Position
from assay.traces.claude_code import group_session_rows
from assay.traces.exports import DEFAULT_SPILL_BYTES, RowGroups, export_row_kind, row_trace_id
from assay.traces.span_groups import SpanGrouper, is_span_row

_Key = tuple[str, int | None, int | None, int | None]

#: Grouped export traces given out per batch.
DRAIN_CHUNK = 256


def _key(p: Position) -> _Key:
    return (p.source, p.line, p.partition, p.offset)


class GroupingSource(Source):
    """A Source wrapper that yields records made of several rows of ``inner``: it delegates
    everything to ``inner``, and acknowledges a grouped record by acknowledging its rows.

    Rows of LangSmith / Langfuse exports (:func:`assay.traces.exports.export_row_kind`) are grouped
    by trace id within one input (:meth:`_add_export`, :meth:`_flush_exports`); a trace split
    across inputs becomes one record per input.

    ``shard=(i, n)`` keeps the grouped records whose running index is ``i`` modulo ``n``."""

    def __init__(
        self, inner: Source, *, shard: tuple[int, int] | None = None, spill_bytes: int = DEFAULT_SPILL_BYTES
    ) -> None:
        super().__init__()
        self.inner = inner
        self.shard = shard
        self.size_unit = inner.size_unit
        self._members: dict[_Key, list[Position]] = {}  # grouped record → its rows, until acked
        self._index = 0
        self._exports: RowGroups[Position] = RowGroups(spill_bytes=spill_bytes)
        self._export_source: str | None = None
        self._drains: deque[Generator[Envelope, None, None]] = deque()  # inputs whose traces are being given out
        #: Per input: how its rows were read (for ``assay normalize``).
        self.readings: dict[str, str] = {}

    async def open(self) -> None:
        await self.inner.open()

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            self._let_go()

    def _let_go(self) -> None:
        """Close the rows still held and the traces not given out (their temporary files)."""
        for groups in self._held_groups():
            groups.close()
        while self._drains:
            self._drains.popleft().close()

    def _held_groups(self) -> list[RowGroups[Position]]:
        """The export rows being held, not yet given out."""
        return [self._exports]

    async def _merge_runs(self) -> None:
        """Merge the sorted runs of held export rows that are due, off the event loop."""
        for groups in self._held_groups():
            if groups.merge_due:
                await anyio.to_thread.run_sync(groups.merge)

    def describe(self) -> str:
        return f"traces of {self.inner.describe()}"

    def stop(self) -> None:
        self.inner.stop()

    def size_hint(self) -> int | None:
        return self.inner.size_hint()

    def size_done(self) -> int | None:
        return self.inner.size_done()

    def snapshot(self) -> Any:
        return self.inner.snapshot()

    async def batches(self) -> AsyncIterator[list[Envelope]]:
        """The inner batches through :meth:`_feed`, each followed by the traces of inputs that
        ended; at the end of the stream, :meth:`_finish` and what it left to give out."""
        async for batch in self.inner.batches():
            out = self._feed(batch)
            self._take_errors()
            await self._merge_runs()
            if out:
                yield out
            async for chunk in self._drained():
                yield chunk
        out = self._finish()
        self._take_errors()
        if out:
            yield out
        async for chunk in self._drained():
            yield chunk

    def _feed(self, batch: list[Envelope]) -> list[Envelope]:
        """The records a batch of rows completes (rows held for later groups are not among them)."""
        raise NotImplementedError

    def _finish(self) -> list[Envelope]:
        """The stream ended: the records still held that are complete now (groups of the last
        input go to the drains)."""
        self._flush_exports()
        return []

    async def ack(self, positions: Sequence[Position]) -> None:
        expanded: list[Position] = []
        for p in positions:
            members = self._members.pop(_key(p), None)
            if members is None:
                expanded.append(p)  # a read error, or a record of the inner source as is
            else:
                expanded.extend(members)
        await self.inner.ack(expanded)

    def _take_errors(self) -> None:
        errors = self.inner.read_errors
        if errors:
            self.read_errors.extend(errors)
            errors.clear()

    def _emit(self, positions: list[Position], payload: bytes, out: list[Envelope]) -> None:
        """Append one grouped record (unless it is another shard's)."""
        self._index += 1
        if self.shard is not None and self._index % self.shard[1] != self.shard[0]:
            return
        if len(positions) > 1:
            self._members[_key(positions[0])] = positions
        out.append(Envelope(payload, positions[0]))

    def _emit_all(self, groups: list[list[tuple[Any, Position]]]) -> list[Envelope]:
        """One envelope per group (the JSON array of its rows), minus other shards' groups."""
        out: list[Envelope] = []
        for members in groups:
            self._emit([pos for _, pos in members], orjson.dumps([row for row, _ in members]), out)
        return out

    def _add_export(self, row: dict[str, Any], env: Envelope) -> None:
        """Hold one export row (its kind checked by the caller) until its input ends."""
        source = env.position.source
        if self._export_source is not None and self._export_source != source:
            self._flush_exports()
        self._export_source = source
        self._exports.add(row_trace_id(row), env.payload, env.position)

    def _flush_exports(self) -> None:
        """The input of the held export rows ended: one record per trace id, given out by
        :meth:`_drained` a chunk at a time (never all of an input's traces at once)."""
        source = self._export_source
        if source is None:
            return
        groups = self._exports
        self._exports = RowGroups(spill_bytes=groups.spill_bytes)
        self._export_source = None
        self._give_out(groups, [source], f"{groups.rows} export rows grouped by trace id")

    def _give_out(self, groups: RowGroups[Position], inputs: list[str], what: str) -> None:
        """Queue the traces of ``groups`` for :meth:`_drained`; the ``inputs``' reading says
        ``what`` and what is known of the traces (:func:`grouped_reading`)."""
        for name in inputs:
            self.readings[name] = grouped_reading(what, groups)
        self._drains.append(self._drain(groups, inputs, what))

    def _drain(self, groups: RowGroups[Position], inputs: list[str], what: str) -> Generator[Envelope, None, None]:
        """The traces of ``groups`` (the temporary files closed at the end or when abandoned);
        the number of traces of rows sorted on disk is known once they are all given out."""
        try:
            for positions, payloads in groups.drain():
                out: list[Envelope] = []
                self._emit(positions, b"[" + b",".join(payloads) + b"]", out)
                yield from out
            for name in inputs:
                self.readings[name] = grouped_reading(what, groups)
        finally:
            groups.close()

    async def _drained(self) -> AsyncIterator[list[Envelope]]:
        """The grouped traces of the inputs that ended, DRAIN_CHUNK at a time (read off the
        event loop: the rows may be on disk)."""
        while self._drains:
            it = self._drains[0]
            chunk = await anyio.to_thread.run_sync(_take, it)
            if chunk:
                yield chunk
            else:
                self._drains.popleft()


def grouped_reading(what: str, groups: RowGroups[Any]) -> str:
    """How export rows were read: ``what`` ("N … rows grouped by trace id"), the number of traces
    when it is known, and, when the rows went to disk, that the traces come in trace id order."""
    traces = groups.traces
    into = "" if traces is None else f" into {traces} traces"
    if not groups.spilled:
        return f"{what}{into}"
    return f"{what}{into}, in trace id order (rows held on disk: {groups.runs} sorted runs)"


def _take(it: Iterator[Envelope]) -> list[Envelope]:
    return list(itertools.islice(it, DRAIN_CHUNK))


class GroupSessions(GroupingSource):
    """Group the rows of ``inner`` into sessions (see the module docs).

    ``shard=(i, n)`` keeps the sessions whose running index is ``i`` modulo ``n`` (give the inner
    source no shard: a session must not be split between workers). A row that is not JSON is a
    read error at its position.
    """

    def __init__(
        self, inner: Source, *, shard: tuple[int, int] | None = None, spill_bytes: int = DEFAULT_SPILL_BYTES
    ) -> None:
        super().__init__(inner, shard=shard, spill_bytes=spill_bytes)
        self._pending: list[tuple[Any, Position]] = []  # rows of the session not known complete
        self._pending_trace: str | None = None  # the trace id the pending rows carry, if any
        self._spans: SpanGrouper[Position] = SpanGrouper()  # span-per-record exports, by trace id
        self._span_source: str | None = None

    def describe(self) -> str:
        return f"sessions of {self.inner.describe()}"

    def _finish(self) -> list[Envelope]:
        out = self._cut(final=True)  # the stream ended: the last session is complete
        out.extend(self._emit_all(self._spans.flush()))
        self._flush_exports()
        return out

    def _feed(self, batch: list[Envelope]) -> list[Envelope]:
        out: list[Envelope] = []
        for env in batch:
            pos = env.position
            try:
                row = orjson.loads(env.payload)
            except orjson.JSONDecodeError as exc:
                if self.shard is None or (pos.line or 0) % self.shard[1] == self.shard[0]:
                    self.read_errors.append((pos, f"{pos}: invalid JSON in session transcript: {exc}"))
                continue
            if self._pending and self._pending[-1][1].source != pos.source:
                out.extend(self._cut(final=True))  # a session never spans two inputs
            if self._span_source is not None and self._span_source != pos.source:
                out.extend(self._emit_all(self._spans.flush()))  # nor does a trace
                self._span_source = None
            if self._export_source is not None and self._export_source != pos.source:
                self._flush_exports()
            if export_row_kind(row) is not None:
                self._add_export(row, env)
                continue
            if is_span_row(row):
                self._span_source = pos.source
                out.extend(self._emit_all(self._spans.add(row, pos)))
                continue
            trace = row_trace_id(row) if type(row) is dict else None
            if trace is not None:
                if self._pending and self._pending_trace not in (None, trace):
                    out.extend(self._cut(final=True))  # rows of different traces are never one session
                self._pending_trace = trace
            self._pending.append((row, pos))
        out.extend(self._cut(final=False))
        return out

    def _cut(self, *, final: bool) -> list[Envelope]:
        """Envelopes of the complete sessions among the pending rows (all of them when ``final``).

        The last group is kept pending: the next rows may continue it. Re-grouping it with them
        gives the same cut, since :func:`group_session_rows` depends only on the rows."""
        if not self._pending:
            return []
        pending = self._pending
        # groups are consecutive runs of the rows, in order: cut the pending list by their sizes
        sizes = [len(group) for group in group_session_rows(row for row, _ in pending)]
        if not final:
            keep = sizes.pop()
            self._pending = pending[len(pending) - keep :]
        else:
            self._pending = []
            self._pending_trace = None
        groups = []
        start = 0
        for size in sizes:
            groups.append(pending[start : start + size])
            start += size
        return self._emit_all(groups)


__all__ = ["GroupSessions", "GroupingSource", "grouped_reading"]
