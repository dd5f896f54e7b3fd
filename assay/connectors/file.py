"""File connectors: JSONL (plain, .gz, .zst), JSON array files, directories, globs and stdin.

Reading is streamed in 1 MiB chunks in a worker thread (decompression included), so memory stays
constant whatever the file size. Writing goes to a temporary file in the target directory that is
renamed into place when a part is complete, so a reader never sees a half-written part.

>>> import anyio, tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "in.jsonl").write_text('{"a": 1}\\n\\n{"a": 2}\\n')
>>> async def read():
...     async with FileSource([str(d / "in.jsonl")]) as src:
...         return [e.position.line async for b in src.batches() for e in b]
>>> anyio.run(read)
[1, 3]
"""

from __future__ import annotations

import glob
import gzip
import io
import json
import mmap
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

import anyio
import anyio.to_thread

from assay.connectors.base import Sink, Source
from assay.exceptions import ConfigError, ConnectorError
from assay.records import Envelope, Position

CHUNK = 1 << 20
INPUT_SUFFIXES = (
    ".jsonl",
    ".ndjson",
    ".json",
    ".jsonl.gz",
    ".ndjson.gz",
    ".json.gz",
    ".jsonl.zst",
    ".ndjson.zst",
    ".json.zst",
)


def _has_input_suffix(name: str) -> bool:
    return name.endswith(INPUT_SUFFIXES)


def expand_paths(paths: Sequence[str]) -> list[str]:
    """Files named by paths, directories (recursively, input suffixes only) and globs, sorted."""
    out: list[str] = []
    for p in paths:
        if p == "-":
            out.append(p)
            continue
        if any(ch in p for ch in "*?["):
            matches = sorted(m for m in glob.glob(p, recursive=True) if os.path.isfile(m))
            if not matches:
                raise ConfigError(f"source: no files match {p!r}")
            out.extend(matches)
        elif os.path.isdir(p):
            found = sorted(
                str(f)
                for f in Path(p).rglob("*")
                if f.is_file() and _has_input_suffix(f.name) and not f.name.startswith(("_", "."))
            )
            if not found:
                raise ConfigError(f"source: directory {p!r} holds no .jsonl/.json(.gz/.zst) files")
            out.extend(found)
        elif os.path.isfile(p):
            out.append(p)
        else:
            raise ConfigError(f"source: no such file or directory: {p!r}")
    return out


def open_binary(path: str) -> IO[bytes]:
    """Open a file for binary reading, decompressing .gz and .zst transparently."""
    if path == "-":
        return sys.stdin.buffer
    try:
        if path.endswith(".gz"):
            return gzip.open(path, "rb")  # type: ignore[return-value]
        if path.endswith(".zst"):
            import zstandard

            raw = open(path, "rb")  # noqa: SIM115 - closed by the reader
            return zstandard.ZstdDecompressor().stream_reader(raw, closefd=True, read_across_frames=True)
        return open(path, "rb")
    except OSError as exc:
        raise ConnectorError(f"cannot open {path!r}: {exc}") from exc


class _Readable(Protocol):
    def read(self, n: int, /) -> bytes: ...


def line_chunks(f: _Readable) -> Iterator[list[bytes]]:
    """The lines of a binary stream (without the newline), a chunk's worth (~1 MiB) at a time.

    Streams with ``readinto`` (files, gzip, zstd, stdin) are read into one reused buffer and each
    line is copied out once: about three times faster than ``read()`` + ``split()``, which copy
    every chunk twice and allocate a fresh MiB per read."""
    readinto = getattr(f, "readinto", None)
    if readinto is None:
        yield from _split_chunks(f)
        return
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    find = buf.find
    have = 0  # bytes of an unfinished line at the start of buf
    while True:
        if have == len(buf):  # a line longer than the buffer: grow it
            view.release()
            buf.extend(bytes(len(buf)))
            view = memoryview(buf)
        n = readinto(view[have:])
        if not n:
            break
        end = have + n
        lines: list[bytes] = []
        append = lines.append
        pos = 0
        while (i := find(b"\n", pos, end)) >= 0:
            append(bytes(view[pos:i]))
            pos = i + 1
        have = end - pos
        if have:
            buf[:have] = bytes(view[pos:end])
        if lines:
            yield lines
    if have:
        yield [bytes(view[:have])]
    view.release()


def _split_chunks(f: _Readable) -> Iterator[list[bytes]]:
    rest = b""
    while True:
        data = f.read(CHUNK)
        if not data:
            break
        if rest:
            data = rest + data
        lines = data.split(b"\n")
        rest = lines.pop()
        yield lines
    if rest:
        yield [rest]


def iter_lines(f: _Readable) -> Iterator[bytes]:
    """Lines of a binary stream (without the newline), read in large chunks."""
    for lines in line_chunks(f):
        yield from lines


def iter_json_array(f: IO[bytes], path: str) -> Iterator[tuple[int, bytes]]:
    """Elements of a top-level JSON array as (line of the element's start, raw bytes), streamed.

    A syntax error ends the file with one ValueError naming the line.
    """
    decoder = json.JSONDecoder()
    text_reader = io.TextIOWrapper(f, encoding="utf-8", errors="replace")
    buf = ""
    pos = 0
    line = 1
    eof = False

    def more() -> bool:
        nonlocal buf, pos, eof
        chunk = text_reader.read(CHUNK)
        if not chunk:
            eof = True
            return False
        buf = buf[pos:] + chunk
        pos = 0
        return True

    def skip_ws(chars: str) -> None:
        nonlocal pos, line
        while True:
            while pos < len(buf) and buf[pos] in chars:
                if buf[pos] == "\n":
                    line += 1
                pos += 1
            if pos < len(buf) or not more():
                return

    skip_ws(" \t\r\n")
    if pos >= len(buf) or buf[pos] != "[":
        raise ValueError(f"{path}:{line}: expected a JSON array")
    pos += 1
    first = True
    while True:
        skip_ws(" \t\r\n")
        if pos >= len(buf):
            raise ValueError(f"{path}:{line}: unterminated JSON array")
        if buf[pos] == "]":
            return
        if not first:
            if buf[pos] != ",":
                raise ValueError(f"{path}:{line}: expected ',' or ']' between array elements")
            pos += 1
            skip_ws(" \t\r\n")
        first = False
        while True:
            try:
                _, end = decoder.raw_decode(buf, pos)
                # a number or literal at the very end of the buffer may continue in the next chunk
                if end < len(buf) or eof:
                    break
                if not more():
                    break
            except json.JSONDecodeError as exc:
                if eof or not more():
                    raise ValueError(f"{path}:{line}: invalid JSON array element: {exc.msg}") from exc
        element = buf[pos:end]
        yield line, element.encode("utf-8")
        line += element.count("\n")
        pos = end


def _line_start_at(f: IO[bytes], offset: int) -> int:
    """The offset of the first line that starts at or after ``offset``."""
    if offset <= 0:
        return 0
    f.seek(offset - 1)
    pos = offset - 1
    while True:
        chunk = f.read(1 << 16)
        if not chunk:
            return pos
        nl = chunk.find(b"\n")
        if nl >= 0:
            return pos + nl + 1
        pos += len(chunk)


def _count_newlines(f: IO[bytes], end: int) -> int:
    """Newlines in the first ``end`` bytes.

    Agent traces are kilobytes per line, so hopping from newline to newline through a memory map
    (touching nothing in between) is much faster than reading the bytes; the map covers 64 MiB at a
    time so resident memory stays bounded. Short lines are counted chunk by chunk instead."""
    f.seek(0)
    sample = f.read(min(end, 1 << 20))
    if sample.count(b"\n") * 1024 >= len(sample):  # average line shorter than 1 KiB
        return _count_newlines_read(f, end)
    count = 0
    window = 64 << 20  # a multiple of mmap.ALLOCATIONGRANULARITY
    for offset in range(0, end, window):
        length = min(window, end - offset)
        with mmap.mmap(f.fileno(), length, access=mmap.ACCESS_READ, offset=offset) as mm:
            find = mm.find
            pos = 0
            while (i := find(b"\n", pos)) >= 0:
                count += 1
                pos = i + 1
    return count


def _count_newlines_read(f: IO[bytes], end: int) -> int:
    f.seek(0)
    buf = bytearray(16 << 20)
    view = memoryview(buf)
    count = 0
    remaining = end
    while remaining > 0:
        n = f.readinto(view[: min(len(buf), remaining)])  # type: ignore[attr-defined]
        if not n:
            break
        count += buf.count(b"\n", 0, n)
        remaining -= n
    return count


def _line_envelopes(f: _Readable, name: str, line: int, skip: Callable[[str, int], bool] | None) -> Iterator[Envelope]:
    """Envelopes of the non-blank lines of a stream; ``line`` = lines before the stream's start.
    One loop from chunk to envelope: this is the reading hot path."""
    for lines in line_chunks(f):
        for text in lines:
            line += 1
            if text and not text.isspace():  # isspace() does not copy the line, strip() would
                if text[-1] == 13:
                    text = text[:-1]
                if skip is None or not skip(name, line):
                    yield Envelope(text, Position(name, line))


class _Limited:
    """A reader that stops after ``limit`` bytes."""

    def __init__(self, f: IO[bytes], limit: int) -> None:
        self.f = f
        self.left = limit

    def read(self, n: int) -> bytes:
        if self.left <= 0:
            return b""
        data = self.f.read(min(n, self.left))
        self.left -= len(data)
        return data

    def readinto(self, b: memoryview) -> int:
        if self.left <= 0:
            return 0
        n: int = self.f.readinto(b[: self.left] if len(b) > self.left else b)  # type: ignore[attr-defined]
        self.left -= n
        return n


class FileSource(Source):
    """Read JSONL / JSON-array files (plain, gzip or zstd), directories, globs and stdin (``-``).

    * ``input_format``: ``auto`` (JSON array for ``.json`` files starting with ``[``, JSON lines
      otherwise), ``jsonl`` or ``json``;
    * ``shard=(i, n)``: plain JSON-lines files are split into n byte ranges and shard i reads only
      its own; other inputs (compressed, JSON arrays, stdin) keep records whose running index is
      ``i`` modulo ``n`` (for ``--workers`` / ``--shard``);
    * ``skip(path, line)`` drops positions already completed (resume).
    Positions are the file path and 1-based line number (for JSON arrays: the element's first line).
    """

    def __init__(
        self,
        paths: Sequence[str],
        *,
        batch_size: int = 256,
        input_format: str = "auto",
        shard: tuple[int, int] | None = None,
        skip: Callable[[str, int], bool] | None = None,
        read_mode: str = "records",
        resume_state: Any = None,
    ) -> None:
        super().__init__()
        from assay.pipeline.checkpoint import Ledger

        self.ledger = Ledger(Path(os.devnull))
        if isinstance(resume_state, dict) and resume_state:
            self.ledger.done = {k: [list(iv) for iv in v] for k, v in resume_state.items()}
            self.ledger._starts = {k: [iv[0] for iv in v] for k, v in self.ledger.done.items()}
            skip = self.ledger.is_done
        self.read_mode = read_mode
        self.paths = list(paths)
        self.batch_size = batch_size
        self.input_format = input_format
        self.shard = shard
        self.skip = skip
        self.files: list[str] = []
        self._stopped = False

    async def open(self) -> None:
        self.files = expand_paths(self.paths)

    def describe(self) -> str:
        return f"files: {', '.join(self.paths)}"

    def stop(self) -> None:
        self._stopped = True

    async def ack(self, positions: Sequence[Position]) -> None:
        self.ledger.add(positions)

    def snapshot(self) -> Any:
        return self.ledger.done

    def size_hint(self) -> int | None:
        try:
            return sum(os.path.getsize(f) for f in self.files if f != "-")
        except OSError:
            return None

    size_unit = "bytes"

    def _records(self, path: str, f: IO[bytes]) -> Iterator[tuple[int, bytes]]:
        mode = self.input_format
        if mode == "auto":
            base = path[:-3] if path.endswith(".gz") else path[:-4] if path.endswith(".zst") else path
            mode = "json" if base.endswith(".json") else "jsonl"
        if mode == "json":
            peek = f.peek(64) if hasattr(f, "peek") else b""  # gzip/buffered readers support peek
            if not peek or peek.lstrip()[:1] == b"[":
                yield from iter_json_array(f, path)
                return
        lines = ((i, line) for i, line in enumerate(iter_lines(f), 1) if line and not line.isspace())
        if self.read_mode == "sessions":
            yield from self._sessions(path, lines)
            return
        for i, line in lines:
            yield i, line[:-1] if line[-1] == 13 else line

    def _sessions(self, path: str, lines: Iterator[tuple[int, bytes]]) -> Iterator[tuple[int, bytes]]:
        """Agent session transcripts (Claude Code, Agent SDK streams): one record per session,
        made of many lines; the record's position is the session's first line."""
        import orjson

        from assay.traces.claude_code import group_session_rows

        first_line: dict[int, int] = {}

        def rows() -> Iterator[Any]:
            for i, line in lines:
                try:
                    row = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    self.read_errors.append(
                        (Position(path, i), f"{path}:{i}: invalid JSON in session transcript: {exc}")
                    )
                    continue
                first_line[id(row)] = i
                yield row

        for group in group_session_rows(rows()):
            line = first_line.get(id(group[0]), 0)
            yield line, orjson.dumps(group)
            first_line.clear()

    def _byte_range_shardable(self, path: str) -> bool:
        """Plain JSON-lines files are sharded by byte range: each worker reads only its part."""
        if self.shard is None or path == "-" or self.read_mode != "records" or path.endswith((".gz", ".zst")):
            return False
        return self.input_format == "jsonl" or (self.input_format == "auto" and not path.endswith(".json"))

    def _plain_lines(self, path: str) -> bool:
        """JSON lines read record by record (not stdin, not a JSON array, not sessions)."""
        if path == "-" or self.read_mode != "records":
            return False
        base = path.removesuffix(".gz").removesuffix(".zst")
        return self.input_format == "jsonl" or (self.input_format == "auto" and not base.endswith(".json"))

    def _byte_range_envelopes(self, path: str, i: int, n: int) -> Iterator[Envelope]:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            start = _line_start_at(f, size * i // n)
            end = _line_start_at(f, size * (i + 1) // n) if i + 1 < n else size
            line = _count_newlines(f, start)
            f.seek(start)
            yield from _line_envelopes(_Limited(f, end - start), path, line, self.skip)

    def _iter_envelopes(self) -> Iterator[Envelope]:
        shard = self.shard
        skip = self.skip
        index = 0
        for path in self.files:
            if shard is not None and self._byte_range_shardable(path):
                try:
                    yield from self._byte_range_envelopes(path, shard[0], shard[1])
                except OSError as exc:
                    raise ConnectorError(f"error reading {path}: {exc}") from exc
                continue
            if shard is None and self._plain_lines(path):
                try:
                    with open_binary(path) as f:
                        yield from _line_envelopes(f, path, 0, skip)
                except (OSError, EOFError) as exc:
                    raise ConnectorError(f"error reading {path}: {exc}") from exc
                continue
            f = open_binary(path)
            if path != "-" and not hasattr(f, "peek"):
                f = io.BufferedReader(f)  # type: ignore[type-var]
            source_name = "<stdin>" if path == "-" else path
            try:
                try:
                    for line, payload in self._records(path, f):
                        index += 1
                        if shard is not None and index % shard[1] != shard[0]:
                            continue
                        if skip is not None and skip(source_name, line):
                            continue
                        yield Envelope(payload, Position(source_name, line))
                except ValueError as exc:  # a JSON array that stopped parsing: one dead letter
                    self.read_errors.append((Position(source_name, None), str(exc)))
                except (OSError, EOFError) as exc:
                    raise ConnectorError(f"error reading {source_name}: {exc}") from exc
            finally:
                if path != "-":
                    f.close()

    async def batches(self) -> AsyncIterator[list[Envelope]]:
        it = self._iter_envelopes()
        size = self.batch_size

        def next_batch() -> list[Envelope]:
            batch: list[Envelope] = []
            for env in it:
                batch.append(env)
                if len(batch) >= size:
                    break
            return batch

        while not self._stopped:
            batch = await anyio.to_thread.run_sync(next_batch)
            if not batch:
                return
            yield batch


def _compression_for(path: str, compression: str | None) -> str:
    if compression and compression != "auto":
        if compression not in ("none", "gzip", "zstd"):
            raise ConfigError(f"sink.compression: unknown {compression!r} (none | gzip | zstd)")
        return compression
    if path.endswith(".gz"):
        return "gzip"
    if path.endswith(".zst"):
        return "zstd"
    return "none"


_EXT = {"none": "", "gzip": ".gz", "zstd": ".zst"}


def is_directory_target(path: str) -> bool:
    """An output path names a directory when it ends with '/', exists as one, or has no JSON suffix."""
    if path.endswith(("/", os.sep)) or os.path.isdir(path):
        return True
    base = path.removesuffix(".gz").removesuffix(".zst")
    return not base.endswith((".jsonl", ".ndjson", ".json"))


class _Part:
    """One output file being written: a temp file renamed into place by ``finish``."""

    def __init__(self, final: Path, compression: str, *, prefill: bool = False) -> None:
        self.final = final
        self.tmp = final.with_name(f".{final.name}.tmp")
        self.rows = 0
        self.raw: IO[bytes] = open(self.tmp, "wb")  # noqa: SIM115 - closed in finish()
        if prefill and final.exists():
            # resume: keep what the earlier run wrote (gzip members and zstd frames concatenate)
            with open(final, "rb") as old:
                shutil.copyfileobj(old, self.raw, CHUNK)
        self.out: Any
        if compression == "gzip":
            self.out = gzip.GzipFile(fileobj=self.raw, mode="wb", compresslevel=6, mtime=0)
        elif compression == "zstd":
            import zstandard

            self.out = zstandard.ZstdCompressor(level=3).stream_writer(self.raw, closefd=False)
        else:
            self.out = self.raw

    def write(self, data: bytes) -> None:
        self.out.write(data)

    def finish(self) -> Path:
        if self.out is not self.raw:
            self.out.close()
        self.raw.flush()
        os.fsync(self.raw.fileno())
        self.raw.close()
        os.replace(self.tmp, self.final)
        return self.final


class JsonlSink(Sink):
    """Write rows as JSON lines, atomically (temp file, then rename), optionally compressed.

    ``path`` is a file (``out.jsonl``, ``out.jsonl.gz``) or a directory (``out/``): a directory gets
    deterministic part names ``{prefix}-{shard:05d}-{seq:05d}.jsonl[.gz|.zst]``, a new part every
    ``max_rows_per_part`` rows. ``parts`` lists the finished files.
    """

    def __init__(
        self,
        path: str,
        *,
        compression: str | None = None,
        max_rows_per_part: int | None = None,
        prefix: str = "part",
        shard: int = 0,
        start_seq: int = 0,
        create_empty: bool = True,
        append: bool = False,
    ) -> None:
        self.path = path
        self.directory = is_directory_target(path)
        self.compression = _compression_for(path, compression)
        self.max_rows = max_rows_per_part if self.directory else None
        self.prefix = prefix
        self.shard = shard
        self.seq = start_seq
        self.create_empty = create_empty
        self.append = append
        self.parts: list[Path] = []
        self.rows_written = 0
        self._part: _Part | None = None

    def describe(self) -> str:
        return self.path

    async def open(self) -> None:
        target = Path(self.path) if self.directory else Path(self.path).parent
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConnectorError(f"cannot create output directory {str(target)!r}: {exc}") from exc
        if self.append and self.directory:
            pattern = re.compile(rf"{re.escape(self.prefix)}-{self.shard:05d}-(\d+)\.jsonl")
            seqs = [int(m.group(1)) for f in target.iterdir() if (m := pattern.match(f.name))]
            self.seq = max([self.seq - 1, *seqs]) + 1

    def _next_part_path(self) -> Path:
        if not self.directory:
            return Path(self.path)
        name = f"{self.prefix}-{self.shard:05d}-{self.seq:05d}.jsonl{_EXT[self.compression]}"
        self.seq += 1
        return Path(self.path) / name

    def _write(self, rows: Sequence[bytes]) -> list[Path]:
        finished: list[Path] = []
        i = 0
        while i < len(rows):
            if self._part is None:
                self._part = _Part(self._next_part_path(), self.compression, prefill=self.append and not self.directory)
            take = len(rows) - i
            if self.max_rows:
                take = min(take, self.max_rows - self._part.rows)
            chunk = rows[i : i + take]
            self._part.write(b"\n".join(chunk) + b"\n")
            self._part.rows += len(chunk)
            i += take
            if self.max_rows and self._part.rows >= self.max_rows:
                finished.append(self._part.finish())
                self._part = None
        return finished

    async def write_batch(self, rows: Sequence[bytes], keys: Sequence[str | None] | None = None) -> None:
        if not rows:
            return
        try:
            finished = await anyio.to_thread.run_sync(self._write, rows)
        except OSError as exc:
            raise ConnectorError(f"cannot write {self.path!r}: {exc}") from exc
        self.parts.extend(finished)
        self.rows_written += len(rows)

    async def flush(self) -> None:
        part = self._part
        if part is not None:
            await anyio.to_thread.run_sync(part.out.flush)

    async def finish_part(self) -> list[Path]:
        """Finish the current part (durable, renamed into place); returns the newly final files."""
        part, self._part = self._part, None
        if part is None:
            return []
        path = await anyio.to_thread.run_sync(part.finish)
        self.parts.append(path)
        return [path]

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            fresh_output = not (self.append and os.path.exists(self.path))  # noqa: ASYNC240 - one stat at close
            if self._part is None and self.create_empty and not self.parts and self.rows_written == 0 and fresh_output:
                self._part = _Part(self._next_part_path(), self.compression)
            await self.finish_part()
