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

A top-level JSON array is a list of records, one per element, unless every element is an item of
one conversation (chat messages, LangChain messages, OpenAI Responses items:
:func:`assay.traces.conversation.is_conversation_item`): then the array is ONE record, one trace's
messages. ``input_format="json"`` always reads one record per element; ``"json_trace"`` reads the
whole input as one record (several documents: the array of them). The reading chosen is reported
through the ``note`` callback, for ``assay normalize``.

>>> import io
>>> list(iter_records(io.BytesIO(b'[\\n {"a": 1},\\n {"a": 2}\\n]\\n'), "x"))
[(2, b'{"a": 1}'), (3, b'{"a": 2}')]
>>> list(iter_records(io.BytesIO(b'\\xef\\xbb\\xbf{"a": 1}\\n\\n{"a": 2}\\n'), "x"))
[(1, b'{"a": 1}'), (3, b'{"a": 2}')]
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from assay.connectors.compression import Failing, Prefixed, read_head
from assay.exceptions import ConfigError, ConnectorError

CHUNK = 1 << 20
BOM = b"\xef\xbb\xbf"
INPUT_FORMATS = ("auto", "jsonl", "json", "json_trace")
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
        raise ConfigError(f"source.input_format: unknown {input_format!r} (auto | jsonl | json | json_trace)")
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
    if kind == "json_trace":
        kind = "json"
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

    def __init__(self, f: _Readable, name: str, arrays: str = "auto", note: Note | None = None) -> None:
        self.f = f
        self.name = name
        self.arrays = arrays
        self.note = note
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
        if self.arrays == "whole":
            yield from self._whole()
            return
        try:
            while self.skip_ws():
                if self.buf[self.pos] == "[" and self.arrays == "elements":
                    self._say("input_format json: one record per array element")
                    yield from self._array()
                elif self.buf[self.pos] == "[":
                    yield from self._conversation_or_array()
                else:
                    self._say("JSON documents: one record per document")
                    yield self._record(self.line, self.value("JSON document"))
        except _Stop as stop:
            yield stop.line, ReadError(str(stop))

    def _say(self, text: str) -> None:
        if self.note is not None:
            self.note(text)

    def _whole(self) -> Iterator[tuple[int, bytes | ReadError]]:
        """``json_trace``: every document of the input (an array read whole) in one record."""
        docs: list[bytes] = []
        start: int | None = None
        try:
            while self.skip_ws():
                start = self.line if start is None else start
                line, text = self._record(self.line, self.value("JSON document"))
                if isinstance(text, ReadError):
                    yield line, text
                    return
                docs.append(text)
        except _Stop as stop:
            yield stop.line, ReadError(str(stop))
            return
        if start is None:
            return
        self._say("input_format json_trace: the whole input is one trace")
        yield start, docs[0] if len(docs) == 1 else b"[" + b",".join(docs) + b"]"

    def _conversation_or_array(self) -> Iterator[tuple[int, bytes | ReadError]]:
        """An array read element by element while every element is a conversation item (held);
        all of them were: the array is one record; one was not: the held ones and the rest are
        records of their own."""
        from assay.traces.conversation import is_conversation_item

        start = self.line
        held: list[tuple[int, bytes | ReadError]] = []
        elements = self._array()
        for line, payload in elements:
            if isinstance(payload, bytes) and _is_item(payload, is_conversation_item):
                held.append((line, payload))
                continue
            self._say("a JSON array of records: one record per element")
            yield from held
            yield line, payload
            yield from elements
            return
        if held:
            self._say(
                f"a JSON array of {len(held)} conversation messages: read as one trace "
                "(input_format json reads one record per element)"
            )
            yield start, b"[" + b",".join(p for _, p in held if isinstance(p, bytes)) + b"]"

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


def _is_item(payload: bytes, check: Callable[[Any], bool]) -> bool:
    try:
        return check(orjson.loads(payload))
    except orjson.JSONDecodeError:
        return False


Note = Callable[[str], None]


def array_mode(input_format: str) -> str:
    """How :func:`iter_documents` reads top-level arrays for an ``input_format``: ``auto`` (one
    record, or one per element: see the module docs), ``elements`` (``json``) or ``whole``
    (``json_trace``)."""
    return {"json": "elements", "json_trace": "whole"}.get(input_format, "auto")


def iter_documents(
    f: _Readable, name: str, arrays: str = "auto", note: Note | None = None
) -> Iterator[tuple[int, bytes | ReadError]]:
    """Records of concatenated JSON documents: (line of the record's start, its JSON text).

    A top-level array is streamed element by element (an array of one conversation's messages is
    held, to become one record; ``arrays``: :func:`array_mode`); any other document is one record.
    A syntax error ends the stream with one :class:`ReadError` at its line. ``note`` hears which
    reading was chosen."""
    return _Documents(f, name, arrays, note).records()


def iter_records(
    f: Any, name: str, input_format: str = "auto", note: Note | None = None
) -> Iterator[tuple[int, bytes | ReadError]]:
    """The records of a decompressed binary stream: (line of the record's start, raw bytes), or a
    :class:`ReadError` in place of the bytes where the stream holds no valid record.

    ``input_format``: ``auto`` (see the module docs), ``jsonl``, ``json`` or ``json_trace``."""
    kind, stream = sniff(f, input_format)
    if kind == "jsonl":
        if note is not None:
            note("JSON lines: one record per line")
        return iter(iter_jsonl(stream))
    return iter_documents(stream, name, array_mode(input_format), note)


__all__ = [
    "BOM",
    "CHUNK",
    "INPUT_FORMATS",
    "Note",
    "ReadError",
    "array_mode",
    "detect_format",
    "iter_documents",
    "iter_jsonl",
    "iter_lines",
    "iter_records",
    "line_chunks",
    "sniff",
]
