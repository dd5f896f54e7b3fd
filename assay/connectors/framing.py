"""How records are framed in a byte stream: JSON lines, or JSON documents (one pretty-printed
object, an array of records streamed element by element, several concatenated documents).

Everything here takes any binary readable (``read``; ``readinto`` is used when present), already
decompressed (:func:`assay.connectors.compression.open_stream`), so files, stdin and S3 objects
share it. A UTF-8 byte order mark at the start is dropped.

``input_format="auto"`` decides from the first non-blank bytes, never from a name:

* a first line that is a whole JSON value (``{…}``) → JSON lines;
* ``{`` or ``[`` alone on the first line (``json.dump(obj, indent=2)``, ``curl …/traces/ID``), a
  first line that stops after ``,`` ``:`` ``{`` or ``[``, or one line holding a single array → JSON
  documents;
* anything else → JSON lines (a bad line is the parser's business: a dead letter).

>>> import io
>>> list(iter_records(io.BytesIO(b'[\\n {"a": 1},\\n {"a": 2}\\n]\\n'), "x"))
[(2, b'{"a": 1}'), (3, b'{"a": 2}')]
>>> list(iter_records(io.BytesIO(b'\\xef\\xbb\\xbf{"a": 1}\\n\\n{"a": 2}\\n'), "x"))
[(1, b'{"a": 1}'), (3, b'{"a": 2}')]
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from assay.connectors.compression import Failing, Prefixed, read_head
from assay.exceptions import ConfigError, ConnectorError

CHUNK = 1 << 20
BOM = b"\xef\xbb\xbf"
INPUT_FORMATS = ("auto", "jsonl", "json")
_SNIFF = 1 << 16
_WS = " \t\r\n"


class _Readable(Protocol):
    def read(self, n: int, /) -> bytes: ...


@dataclass(frozen=True, slots=True)
class ReadError:
    """A stretch of the stream that is not a record (a broken document, an invalid element); the
    source reports it as a read error at its position (a dead-letter row)."""

    message: str


# -- JSON lines ------------------------------------------------------------------------------


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


def iter_jsonl(f: _Readable, first_line: int = 0) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of the non-blank lines, a trailing ``\\r`` dropped; ``first_line`` =
    lines before the stream's start (a byte-range shard)."""
    line = first_line
    for lines in line_chunks(f):
        for text in lines:
            line += 1
            if text and not text.isspace():  # isspace() does not copy the line, strip() would
                yield line, text[:-1] if text[-1] == 13 else text


# -- sniffing --------------------------------------------------------------------------------


def detect_format(head: bytes, at_eof: bool) -> str:
    """``jsonl`` or ``json`` from the first bytes of a decompressed stream (see the module docs);
    ``at_eof``: ``head`` is the whole stream."""
    text = head.removeprefix(BOM).lstrip(b" \t\r\n")
    if not text or text[:1] not in (b"{", b"["):
        return "jsonl"
    nl = text.find(b"\n")
    if nl < 0 and not at_eof:  # a first line longer than the sniffed head
        return "json" if text[:1] == b"[" else "jsonl"
    first = (text if nl < 0 else text[:nl]).rstrip(b" \t\r")
    if len(first) == 1 or first[-1:] in (b",", b":", b"{", b"["):
        return "json"
    if text[:1] == b"[":
        rest = b"" if nl < 0 else text[nl + 1 :]
        # one line holding an array: its elements are the records; several lines of arrays: JSONL
        return "jsonl" if rest.strip() else "json"
    return "jsonl"


def sniff(f: Any, input_format: str = "auto") -> tuple[str, Any]:
    """(``jsonl`` or ``json``, the stream to read from): drops a UTF-8 BOM and resolves ``auto``.

    Reads at most 64 KiB ahead; the returned stream starts again at the first byte after the BOM.
    """
    if input_format not in INPUT_FORMATS:
        raise ConfigError(f"source.input_format: unknown {input_format!r} (auto | jsonl | json)")
    want = _SNIFF if input_format == "auto" else len(BOM)
    try:
        head = read_head(f, want)
        at_eof = len(head) < want
    except ConnectorError as exc:
        head = getattr(exc, "partial", b"")
        if not head:
            raise
        f, at_eof = Failing(exc), True  # frame what came before the fault, then raise it
    if head.startswith(BOM):
        head = head[len(BOM) :]
    kind = input_format if input_format != "auto" else detect_format(head, at_eof)
    return kind, Prefixed(head, f) if head else f


# -- JSON documents --------------------------------------------------------------------------


class _Stop(Exception):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


class _Documents:
    """Concatenated JSON documents over a stream; a top-level array yields its elements.

    The text is decoded with ``surrogateescape`` so an invalid UTF-8 byte inside a string does not
    stop the file: the element holding it is reported as a read error and the next one is read."""

    def __init__(self, f: _Readable, name: str) -> None:
        self.f = f
        self.name = name
        self.decoder = json.JSONDecoder()
        self.utf8 = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self.buf = ""
        self.pos = 0
        self.line = 1
        self.eof = False

    def more(self, size: int = CHUNK) -> bool:
        if self.eof:
            return False
        data = self.f.read(size)
        text = self.utf8.decode(data, final=not data)
        if not data:
            self.eof = True
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        return bool(text) or not self.eof

    def skip_ws(self) -> bool:
        """Skip whitespace (counting lines); False at the end of the stream."""
        while True:
            buf, pos = self.buf, self.pos
            n = len(buf)
            while pos < n and buf[pos] in _WS:
                if buf[pos] == "\n":
                    self.line += 1
                pos += 1
            self.pos = pos
            if pos < n:
                return True
            if not self.more():
                return False

    def value(self, what: str) -> str:
        """The text of the JSON value at ``pos`` (reading more as needed); pos moves past it."""
        want = CHUNK
        while True:
            try:
                _, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                incomplete = exc.pos >= len(self.buf) - 8 or exc.msg.startswith("Unterminated string")
                if not incomplete or not self.more(want):
                    at = self.line + self.buf.count("\n", self.pos, exc.pos)
                    raise _Stop(self.line, f"{self.name}:{at}: invalid {what}: {exc.msg}") from exc
                want *= 2  # a large document: read ahead geometrically, so parsing stays linear
                continue
            if end < len(self.buf) or not self.more(want):  # a number may continue in the next chunk
                text = self.buf[self.pos : end]
                self.pos = end
                return text

    def records(self) -> Iterator[tuple[int, bytes | ReadError]]:
        try:
            while self.skip_ws():
                if self.buf[self.pos] == "[":
                    yield from self._array()
                else:
                    yield self._record(self.line, self.value("JSON document"))
        except _Stop as stop:
            yield stop.line, ReadError(str(stop))

    def _array(self) -> Iterator[tuple[int, bytes | ReadError]]:
        start = self.line
        self.pos += 1
        first = True
        while True:
            if not self.skip_ws():
                raise _Stop(self.line, f"{self.name}:{self.line}: unterminated JSON array (opened at line {start})")
            c = self.buf[self.pos]
            if c == "]":
                self.pos += 1
                return
            if not first:
                if c != ",":
                    raise _Stop(self.line, f"{self.name}:{self.line}: expected ',' or ']' between array elements")
                self.pos += 1
                if not self.skip_ws():
                    raise _Stop(self.line, f"{self.name}:{self.line}: unterminated JSON array (opened at line {start})")
            first = False
            yield self._record(self.line, self.value("JSON array element"))

    def _record(self, line: int, text: str) -> tuple[int, bytes | ReadError]:
        self.line += text.count("\n")
        try:
            return line, text.encode("utf-8")
        except UnicodeEncodeError:
            return line, ReadError(f"{self.name}:{line}: invalid UTF-8 in a JSON document")


def iter_documents(f: _Readable, name: str) -> Iterator[tuple[int, bytes | ReadError]]:
    """Records of concatenated JSON documents: (line of the record's start, its JSON text).

    A top-level array is streamed element by element (never loaded whole); any other document is
    one record. A syntax error ends the stream with one :class:`ReadError` at its line."""
    return _Documents(f, name).records()


def iter_records(f: Any, name: str, input_format: str = "auto") -> Iterator[tuple[int, bytes | ReadError]]:
    """The records of a decompressed binary stream: (line of the record's start, raw bytes), or a
    :class:`ReadError` in place of the bytes where the stream holds no valid record.

    ``input_format``: ``auto`` (see the module docs), ``jsonl`` or ``json``."""
    kind, stream = sniff(f, input_format)
    if kind == "jsonl":
        return iter(iter_jsonl(stream))
    return iter_documents(stream, name)


__all__ = [
    "BOM",
    "CHUNK",
    "INPUT_FORMATS",
    "ReadError",
    "detect_format",
    "iter_documents",
    "iter_jsonl",
    "iter_lines",
    "iter_records",
    "line_chunks",
    "sniff",
]
