"""Rows grouped by trace id in memory bounded by a budget: an external sort.

:class:`RowGroups` takes ``(trace id, payload, tag)`` rows in any order and gives back each trace's
rows together, in the order they came. Up to ``spill_bytes`` (payloads plus an estimate of what
each row and trace costs in memory) the rows are held in a dict by trace id, and a source that
ends within the budget gets its traces in the order each was first seen. Past the budget, the held
rows are sorted by trace id and written to a temporary file as one *run*, and memory starts again
empty; at the end the runs and the rows still held are merged (:func:`heapq.merge`, one sequential
reader per run) and the traces come out in trace id order, each trace's rows in arrival order
(the sorts and merges are stable, and runs are merged oldest first).

Memory does not grow with the number of rows (only with the number of inputs, whose names the
runs refer to): 64 runs of one level are merged into one run of the next (:meth:`RowGroups.merge`,
which a caller runs off its event loop when :attr:`RowGroups.merge_due`; ``add`` merges by itself
when nobody did by 128 runs), so a few dozen runs per level (a level per factor of 64 in rows) are
on disk, each level in one temporary file that is emptied when its runs move up, and the last merge
reads at most 64 runs. What is in memory: the held rows (the budget), a read buffer per run being
merged (together at most about half the budget, 1 MiB at least), and the rows of the trace being
given out. The temporary files are in the system temp directory, unlinked from the start; they are
closed by :meth:`RowGroups.close`, by the end of :meth:`RowGroups.drain` or when the drain is
abandoned.

A run is a sequence of rows, each ``<key length, tag length, payload length>`` (three little-endian
u32) then the key, the tag and the payload. The key is the trace id's UTF-8 after ``\\x01``, or, for
a row without a trace id (a trace of its own), ``\\x00`` and its running number: the order is total
and such rows sort first. A :class:`~assay.records.Position` tag is 29 bytes (the input's index in a
table of the inputs seen, then line, partition and offset); any other tag is pickled.

>>> g = RowGroups(spill_bytes=0)  # every row a run of its own
>>> for n, tid in enumerate(["b", "a", "b", None]):
...     g.add(tid, b"%d" % n, n)
>>> [(tags, rows) for tags, rows in g.drain()], g.traces
([([3], [b'3']), ([1], [b'1']), ([0, 2], [b'0', b'2'])], 3)
"""

from __future__ import annotations

import heapq
import itertools
import os
import pickle
import struct
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from typing import IO, Any, Generic, TypeVar

from assay.records import Position

T = TypeVar("T")

#: Bytes of rows a :class:`RowGroups` keeps in memory before it sorts them into a run on disk.
DEFAULT_SPILL_BYTES = 64 << 20

#: Runs merged at once: a level with this many runs becomes one run of the next level.
FAN_IN = 64

#: Estimated memory of one held row besides its payload (the row's tuple, its tag, the list slot),
#: and of one held trace besides its id (the dict entry, its list).
ROW_COST = 200
TRACE_COST = 250

_HEAD = struct.Struct("<III")  # key, tag and payload lengths of a row in a run
_POS = struct.Struct("<BIqqq")  # which fields are set, input index, line, partition, offset
_PICKLED = 0x80

_Row = tuple[bytes, Any, bytes]  # sort key, tag (encoded, or decoded when given out), payload


def sort_key(key: str | tuple[int]) -> bytes:
    """A trace id's key in the runs: ``\\x01`` and its UTF-8, or ``\\x00`` and the running number of
    a row without one (such rows sort first; a string is never compared with a number)."""
    if type(key) is str:
        return b"\x01" + key.encode("utf-8", "surrogatepass")
    assert isinstance(key, tuple)
    return b"\x00" + key[0].to_bytes(8, "big")


@dataclass
class _Level:
    """One temporary file holding the runs of one level, as ``(start, end)`` offsets, oldest first."""

    file: IO[bytes]
    runs: list[tuple[int, int]] = field(default_factory=list)
    end: int = 0


class RowGroups(Generic[T]):
    """Rows grouped by trace id, in memory up to ``spill_bytes``, then sorted into runs on disk
    (module docs).

    ``add(trace_id, payload, tag)`` records one row (``trace_id`` None: a group of its own);
    :meth:`drain` yields ``(tags, payloads)`` per trace, rows in the order they were added: the
    traces in the order each was first seen when nothing went to disk, else in trace id order."""

    def __init__(self, *, spill_bytes: int = DEFAULT_SPILL_BYTES) -> None:
        self.spill_bytes = spill_bytes
        self._groups: dict[Any, list[tuple[T, bytes]]] = {}
        self._held = 0  # estimated bytes of the held rows
        self._solo = 0
        self._levels: list[_Level] = []
        self._extra: _Level | None = None  # runs merged by the drain
        self._sources: dict[str, int] = {}  # Position.source → its index in the runs
        self._names: list[str] = []
        self._block = min(1 << 20, max(16 << 10, spill_bytes // (2 * FAN_IN)))
        self._given = 0
        self._done = False
        #: Rows added.
        self.rows = 0
        #: Runs of held rows sorted to disk (not counting the runs merges make of them).
        self.runs = 0

    @property
    def spilled(self) -> bool:
        """Whether rows went to disk (the traces then come out in trace id order)."""
        return bool(self.runs)

    @property
    def traces(self) -> int | None:
        """The number of traces: known while every row is in memory, else once drained (None)."""
        if not self.spilled:
            return len(self._groups) + self._given
        return self._given if self._done else None

    @property
    def merge_due(self) -> bool:
        """Whether a level holds :data:`FAN_IN` runs (:meth:`merge` moves them up)."""
        return any(len(level.runs) >= FAN_IN for level in self._levels)

    def add(self, trace_id: str | None, payload: bytes, tag: T) -> None:
        key: Any = trace_id
        if key is None:
            self._solo += 1
            key = (self._solo,)  # never equal to a string id
        cost = len(payload) + ROW_COST
        rows = self._groups.get(key)
        if rows is None:
            cost += TRACE_COST + len(key) if type(key) is str else TRACE_COST
        if self._groups and self._held + cost > self.spill_bytes:
            self._spill()
            rows = None
            if len(self._levels[0].runs) >= 2 * FAN_IN:  # nobody merges for us: do it here
                self.merge()
        if rows is None:
            rows = self._groups[key] = []
        rows.append((tag, payload))
        self._held += cost
        self.rows += 1

    def _spill(self) -> None:
        """Sort the held rows by key into a run of level 0."""
        self._write(self._level(0), self._memory_rows(encode=True))
        self.runs += 1
        self._groups.clear()
        self._held = 0

    def _memory_rows(self, *, encode: bool) -> Iterator[_Row]:
        """The held rows in key order (stable: a trace's rows in arrival order)."""
        for kb, rows in sorted(((sort_key(k), v) for k, v in self._groups.items()), key=itemgetter(0)):
            for tag, payload in rows:
                yield kb, self._encode(tag) if encode else tag, payload

    def _level(self, k: int) -> _Level:
        while len(self._levels) <= k:
            self._levels.append(_Level(_temp()))
        return self._levels[k]

    def _write(self, level: _Level, rows: Iterable[_Row]) -> None:
        """Append one run (rows in key order, tags encoded) to a level's file."""
        write = level.file.write
        start = level.end
        end = start
        for kb, tb, payload in rows:
            write(_HEAD.pack(len(kb), len(tb), len(payload)) + kb + tb + payload)
            end += _HEAD.size + len(kb) + len(tb) + len(payload)
        level.file.flush()
        level.end = end
        level.runs.append((start, end))

    def _read(self, level: _Level, run: tuple[int, int], *, decode: bool) -> Iterator[_Row]:
        """The rows of one run, read a block at a time (``os.pread``: runs of one file are read
        side by side)."""
        fd = level.file.fileno()
        at, end = run
        buf = b""
        pos = 0
        head = _HEAD.size
        while pos < len(buf) or at < end:
            if len(buf) - pos < head:
                buf, pos, at = self._fill(fd, buf, pos, at, end, head)
            klen, tlen, plen = _HEAD.unpack_from(buf, pos)
            if len(buf) - pos < head + klen + tlen + plen:
                buf, pos, at = self._fill(fd, buf, pos, at, end, head + klen + tlen + plen)
            k = pos + head
            t = k + klen
            p = t + tlen
            pos = p + plen
            tag = buf[t:p]
            yield buf[k:t], self._decode(tag) if decode else tag, buf[p:pos]

    def _fill(self, fd: int, buf: bytes, pos: int, at: int, end: int, need: int) -> tuple[bytes, int, int]:
        """``buf[pos:]`` and what follows in the run at ``at``, at least ``need`` bytes (a block at
        least): the new buffer, position and read offset."""
        buf = buf[pos:]
        while len(buf) < need:
            chunk = os.pread(fd, min(max(self._block, need - len(buf)), end - at), at)
            if not chunk:
                raise OSError(f"a sorted run of export rows ends early, at byte {at} of {end}")
            at += len(chunk)
            buf += chunk
        return buf, 0, at

    def merge(self) -> None:
        """Merge every level that holds :data:`FAN_IN` runs or more into one run of the next level
        (the level's file is then emptied). Blocking I/O: run it off an event loop."""
        k = 0
        while k < len(self._levels):
            level = self._levels[k]
            if len(level.runs) >= FAN_IN:
                streams = [self._read(level, run, decode=False) for run in level.runs]
                self._write(self._level(k + 1), heapq.merge(*streams, key=itemgetter(0)))
                level.runs.clear()
                level.file.seek(0)
                level.file.truncate()
                level.end = 0
            k += 1

    def _final_runs(self) -> list[tuple[_Level, tuple[int, int]]]:
        """The runs on disk, oldest first, merged until there are fewer than :data:`FAN_IN`."""
        runs = [(level, run) for level in reversed(self._levels) for run in level.runs]
        while len(runs) >= FAN_IN:
            m = min(FAN_IN, len(runs) - FAN_IN + 2)  # the newest m runs become one
            newest = runs[-m:]
            if self._extra is None:
                self._extra = _Level(_temp())
            extra = self._extra
            streams = [self._read(lv, run, decode=False) for lv, run in newest]
            self._write(extra, heapq.merge(*streams, key=itemgetter(0)))
            runs[-m:] = [(extra, extra.runs[-1])]
        return runs

    def drain(self) -> Iterator[tuple[list[T], list[bytes]]]:
        """Each trace's (tags, payloads); the rows are let go as they are given out, and the
        temporary files closed at the end (or when the drain is closed early)."""
        try:
            if not self.spilled:
                while self._groups:
                    key = next(iter(self._groups))
                    rows = self._groups.pop(key)
                    self._given += 1
                    yield [tag for tag, _ in rows], [payload for _, payload in rows]
            else:
                streams = [self._read(lv, r, decode=True) for lv, r in self._final_runs()]
                streams.append(self._memory_rows(encode=False))
                for _, group in itertools.groupby(heapq.merge(*streams, key=itemgetter(0)), key=itemgetter(0)):
                    tags: list[T] = []
                    payloads: list[bytes] = []
                    for _, tag, payload in group:
                        tags.append(tag)
                        payloads.append(payload)
                    self._given += 1
                    yield tags, payloads
            self._done = True
        finally:
            self.close()

    def close(self) -> None:
        """Drop the held rows and the temporary files."""
        self._groups.clear()
        self._held = 0
        for level in [*self._levels, *([self._extra] if self._extra else [])]:
            level.file.close()
        self._levels = []
        self._extra = None

    def _encode(self, tag: Any) -> bytes:
        if type(tag) is Position:
            index = self._sources.get(tag.source)
            if index is None:
                index = self._sources[tag.source] = len(self._names)
                self._names.append(tag.source)
            line, part, off = tag.line, tag.partition, tag.offset
            mask = (line is not None) | (part is not None) << 1 | (off is not None) << 2
            return _POS.pack(mask, index, line or 0, part or 0, off or 0)
        return bytes([_PICKLED]) + pickle.dumps(tag, protocol=pickle.HIGHEST_PROTOCOL)

    def _decode(self, data: bytes) -> Any:
        if data[0] == _PICKLED:
            return pickle.loads(data[1:])  # our own temporary file
        mask, index, line, part, off = _POS.unpack(data)
        return Position(
            self._names[index],
            line if mask & 1 else None,
            part if mask & 2 else None,
            off if mask & 4 else None,
        )


def _temp() -> IO[bytes]:
    return tempfile.TemporaryFile(prefix="assay-rows-")  # closed in RowGroups.close


__all__ = ["DEFAULT_SPILL_BYTES", "FAN_IN", "RowGroups", "sort_key"]
