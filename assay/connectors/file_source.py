"""The local file source: files, directories, globs and stdin, any framing, any compression.

It combines the three pieces: where the bytes live (:mod:`assay.connectors.local`), compression
(:mod:`assay.connectors.compression`, by magic bytes) and framing (:mod:`assay.connectors.framing`).
Reading runs in a worker thread in 1 MiB chunks, so memory stays flat whatever the file size.

>>> import anyio, tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "in.jsonl").write_text('{"a": 1}\\n\\n{"a": 2}\\n')
>>> async def read():
...     async with FileSource([str(d / "in.jsonl")]) as src:
...         envs = [e async for b in src.batches() for e in b]
...         await src.ack([e.position for e in envs])
...     return [e.position.line for e in envs], src.snapshot()
>>> lines, ledger = anyio.run(read)
>>> lines, list(ledger.values())
([1, 3], [[[1, 1], [3, 3]]])
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import IO, Any

import orjson

from assay.connectors.base import Source, threaded_batches
from assay.connectors.compression import compression_of_suffix, detect_compression, open_stream
from assay.connectors.framing import (
    INPUT_FORMATS,
    Note,
    ReadError,
    array_mode,
    detect_format,
    iter_documents,
    iter_jsonl,
    iter_records,
    line_chunks,
    sniff,
)
from assay.connectors.ledger import LineLedger
from assay.connectors.local import STDIN, Limited, byte_range, display_name, expand_paths, file_size, open_raw
from assay.exceptions import ConfigError, ConnectorError
from assay.records import Envelope, Position
from assay.traces.exports import export_row_kind

_Done = Callable[[int], bool]


def _line_envelopes(f: Any, name: str, line: int, done: _Done | None) -> Iterator[Envelope]:
    """Envelopes of the non-blank lines of a stream; ``line`` = lines before the stream's start.
    One loop from chunk to envelope: this is the reading hot path (same rules as
    :func:`~assay.connectors.framing.iter_jsonl`)."""
    for lines in line_chunks(f):
        for text in lines:
            line += 1
            if text and not text.isspace():  # isspace() does not copy the line, strip() would
                if text[-1] == 13:
                    text = text[:-1]
                if done is None or not done(line):
                    yield Envelope(text, Position(name, line))


def stream_envelopes(
    stream: Any,
    name: str,
    input_format: str = "auto",
    *,
    read_errors: list[tuple[Position, str]],
    done: _Done | None = None,
    keep: Callable[[], bool] | None = None,
    note: Note | None = None,
) -> Iterator[Envelope]:
    """Envelopes of one decompressed input (a file, stdin, an object): framing by ``input_format``
    (:func:`~assay.connectors.framing.sniff`), positions keyed as the ledger keys them (JSON lines:
    the line; JSON documents: the record's ordinal in ``offset``, its first line in ``line``).

    ``note`` hears how the input was read (:mod:`~assay.connectors.framing`). ``done(key)`` skips
    completed records; ``keep()``, called once per record or read error in
    input order, drops those it returns False for (round-robin shards). Read errors are appended to
    ``read_errors`` as ``(position, message)``. Used by FileSource and reusable by other sources.
    """
    kind, stream = sniff(stream, input_format)
    if kind == "jsonl" and note is not None:
        note("JSON lines: one record per line")
    if kind == "jsonl" and keep is None:
        yield from _line_envelopes(stream, name, 0, done)
        return
    items = iter_jsonl(stream) if kind == "jsonl" else iter_documents(stream, name, array_mode(input_format), note)
    by_ordinal = kind == "json"
    ordinal = 0
    for line, payload in items:
        ordinal += 1
        if keep is not None and not keep():
            continue
        key = ordinal if by_ordinal else line
        if done is not None and done(key):
            continue
        pos = Position(name, line, offset=ordinal) if by_ordinal else Position(name, line)
        if type(payload) is bytes:
            yield Envelope(payload, pos)
        else:
            assert isinstance(payload, ReadError)
            read_errors.append((pos, payload.message))


class FileSource(Source):
    """Read JSON lines, JSON arrays and JSON documents (plain, gzip or zstd, detected from the
    content) from files, directories, globs and stdin (``-``).

    * ``input_format``: ``auto`` (from the first non-blank bytes; a JSON array of one
      conversation's messages is one record), ``jsonl``, ``json`` (one record per array element)
      or ``json_trace`` (the whole file is one record);
    * ``shard=(i, n)``: plain JSON-lines files are split into n byte ranges and shard i reads only
      its own; other inputs keep records whose running index is ``i`` modulo ``n``; exports that
      hold a trace in many rows (LangSmith runs, Langfuse observations) are read whole by the
      shard whose index is the file's index modulo ``n``;
    * ``resume_state``: what :meth:`snapshot` returned in an earlier run; positions it covers are
      skipped. :meth:`ack` adds positions (any order) to the ledger :meth:`snapshot` returns.

    Positions are the file (``<stdin>``) and 1-based line of the record's start; records of JSON
    documents also carry their ordinal in the file as ``offset`` (several can share a line), which
    is what the ledger records for them. A compressed stream that is cut short or corrupt, or a file
    that is gone, raises ConnectorError naming it, after every record read before the fault.

    ``skip`` and ``read_mode="sessions"`` are the previous engine's interface, kept until it moves
    to ``resume_state`` and :class:`assay.connectors.sessions.GroupSessions`.
    """

    size_unit = "bytes"

    def __init__(
        self,
        paths: Sequence[str],
        *,
        batch_size: int = 256,
        input_format: str = "auto",
        shard: tuple[int, int] | None = None,
        resume_state: Any = None,
        skip: Callable[[str, int], bool] | None = None,
        read_mode: str = "records",
    ) -> None:
        super().__init__()
        if input_format not in INPUT_FORMATS:
            raise ConfigError(f"source.input_format: unknown {input_format!r} (auto | jsonl | json | json_trace)")
        self.paths = list(paths)
        self.batch_size = batch_size
        self.input_format = input_format
        self.shard = shard
        self.skip = skip
        self.read_mode = read_mode
        self.files: list[str] = []
        self.ledger = LineLedger.from_json(resume_state)  # grows with ack()
        self._resume = LineLedger.from_json(resume_state)  # what to skip; never changes during a run
        self._stopped = False
        self._index = 0  # running record index of round-robin sharded inputs
        self._bytes_total: int | None = None
        self._sizes: dict[str, int] = {}
        self._bytes_done = 0.0  # size_done(): the files read to their end, this shard's share
        self._bytes_read = 0.0  # ... and of the file being read, as of the last batch
        self._reading: tuple[IO[bytes], int, int, int] | None = None  # raw, start, end, size
        self._grouped: Source | None = None
        #: Per input: how it was read (JSON lines, an array as one trace, …), for ``assay normalize``.
        self.readings: dict[str, str] = {}
        if read_mode == "sessions":
            from assay.connectors.sessions import GroupSessions

            inner = FileSource(
                self.paths, batch_size=batch_size, input_format=input_format, resume_state=resume_state, skip=skip
            )
            self._grouped = GroupSessions(inner, shard=shard)
            self.read_errors = self._grouped.read_errors
        elif read_mode != "records":
            raise ConfigError(f"source.read_mode: expected records or sessions, got {read_mode!r}")

    async def open(self) -> None:
        if self._grouped is not None:
            await self._grouped.open()
            return
        self.files = expand_paths(self.paths)
        if STDIN not in self.files:
            self._sizes = {p: file_size(p) for p in self.files}
            self._bytes_total = sum(self._sizes.values())

    async def aclose(self) -> None:
        if self._grouped is not None:
            await self._grouped.aclose()

    def describe(self) -> str:
        return f"files: {', '.join(self.paths)}"

    def stop(self) -> None:
        self._stopped = True
        if self._grouped is not None:
            self._grouped.stop()

    def size_hint(self) -> int | None:
        """Total input bytes (compressed, as stored); None when reading stdin. A shard of ``n``
        counts ``1/n`` of every file: the shards' hints add up to the input's size."""
        if self._grouped is not None:
            return self._grouped.size_hint()
        if self._bytes_total is None:
            return None
        return self._bytes_total // self._shards

    def size_done(self) -> int | None:
        """Input bytes read so far, as of the last batch, in the same share as ``size_hint``:
        a file read by byte range counts the fraction of its range read, a file read whole by
        every shard the fraction of the file."""
        if self._grouped is not None:
            return self._grouped.size_done()
        if self._bytes_total is None:
            return None
        return int(min(self._bytes_read, self._bytes_total) // self._shards)

    @property
    def _shards(self) -> int:
        return self.shard[1] if self.shard is not None else 1

    async def ack(self, positions: Sequence[Position]) -> None:
        if self._grouped is not None:
            await self._grouped.ack(positions)
        else:
            self.ledger.add(positions)

    def snapshot(self) -> Any:
        """The completed-positions ledger, ``{file: [[first, last], ...]}``."""
        if self._grouped is not None:
            return self._grouped.snapshot()
        return self.ledger.to_json()

    # -- reading (in a worker thread) ---------------------------------------------------------

    def _done(self, name: str) -> _Done | None:
        check = self._resume.checker(name)
        skip = self.skip
        if skip is None:
            return check
        if check is None:
            return lambda key: skip(name, key)
        return lambda key: check(key) or skip(name, key)

    def _byte_range_shardable(self, raw: IO[bytes], path: str) -> bool:
        """A plain (uncompressed) JSON-lines file: sharded by byte range, each worker reads its own."""
        if path == STDIN or not raw.seekable():
            return False
        head = raw.read(1 << 16)
        raw.seek(0)
        if detect_compression(head) != "none" or compression_of_suffix(path) is not None:
            return False
        if self.input_format == "auto":
            return detect_format(head, len(head) < 1 << 16) == "jsonl"
        return self.input_format == "jsonl"

    def _export_input(self, path: str, raw: IO[bytes]) -> bool:
        """Whether a (seekable) input's first record is a row of a multi-row export (LangSmith
        runs, Langfuse observations or traces): a trace's rows may be in any of the source's export
        inputs, so every shard reads them whole and keeps its traces by trace id
        (:class:`~assay.connectors.exports.AssembleExports`)."""
        if path == STDIN or not raw.seekable():
            return False
        try:
            stream = open_stream(raw, display_name(path), suffix_name=path)
            first = next(iter_records(stream, path, self.input_format), None)
        except (ConnectorError, OSError, EOFError):
            first = None
        raw.seek(0)
        if first is None or type(first[1]) is not bytes:
            return False
        try:
            row = orjson.loads(first[1])
        except orjson.JSONDecodeError:
            return False
        return export_row_kind(row) is not None

    def _read_input(self, path: str, raw: IO[bytes]) -> Iterator[Envelope]:
        name = display_name(path)
        shard = self.shard
        if shard is not None and self._export_input(path, raw):
            # every shard reads the export inputs whole; AssembleExports keeps its own traces
            whole = open_stream(raw, name, suffix_name=path)
            yield from stream_envelopes(
                whole, name, self.input_format, read_errors=self.read_errors, done=self._done(name)
            )
            return
        if shard is not None and self._byte_range_shardable(raw, path):
            start, end, line = byte_range(raw, file_size(path), shard[0], shard[1])
            self._reading = (raw, start, end, self._sizes.get(path, 0))
            raw.seek(start)
            stream: Any = Limited(raw, end - start)
            if start == 0:
                _, stream = sniff(stream, "jsonl")  # drops a BOM
            yield from _line_envelopes(stream, name, line, self._done(name))
            return
        stream = open_stream(raw, name, suffix_name=None if path == STDIN else path)
        keep = None if shard is None else self._round_robin
        yield from stream_envelopes(
            stream,
            name,
            self.input_format,
            read_errors=self.read_errors,
            done=self._done(name),
            keep=keep,
            note=lambda text: self.readings.__setitem__(name, text),
        )

    def _round_robin(self) -> bool:
        """Inputs not split by byte range: shard i keeps the records whose running index is i mod n."""
        assert self.shard is not None
        self._index += 1
        return self._index % self.shard[1] == self.shard[0]

    def _iter_envelopes(self) -> Iterator[Envelope]:
        for path in self.files:
            if self._stopped:
                return
            raw = open_raw(path)
            size = self._sizes.get(path, 0)
            self._reading = (raw, 0, size, size)
            try:
                yield from self._read_input(path, raw)
                self._bytes_done += size
            except (OSError, EOFError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise ConnectorError(f"{display_name(path)}: read failed: {reason}") from exc
            finally:
                self._reading = None
                if path != STDIN:
                    raw.close()

    def _count_read(self) -> None:
        """In the reading thread, between records (the file is not being read)."""
        reading = self._reading
        here = 0.0
        if reading is not None:
            raw, start, end, size = reading
            try:
                pos = raw.tell() if raw.seekable() else start
            except (OSError, ValueError):
                pos = start
            here = size * min(max(pos - start, 0) / max(end - start, 1), 1.0)
        self._bytes_read = self._bytes_done + here

    async def batches(self) -> AsyncIterator[list[Envelope]]:
        if self._grouped is not None:
            async for batch in self._grouped.batches():
                yield batch
            return
        # a read of stdin may wait for input forever: a stopping run does not wait for it
        waits = any(path == "-" for path in self.paths)
        async for batch in threaded_batches(
            self._iter_envelopes(),
            self.batch_size,
            stopped=lambda: self._stopped,
            after_batch=self._count_read,
            abandon_on_cancel=waits,
        ):
            yield batch


__all__ = ["FileSource", "stream_envelopes"]
