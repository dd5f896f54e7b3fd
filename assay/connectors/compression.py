"""Compression of input streams, detected from the magic bytes (never from a suffix alone).

:func:`open_stream` takes any binary readable (a file, stdin, an S3 body wrapped to offer ``read``)
and returns a readable of the decompressed bytes. gzip (several members concatenated) and zstd
(several frames concatenated, as a resumed sink writes them) are recognised by their first bytes,
so ``cat x.jsonl.gz | assay score -`` and a compressed file without a suffix both work. A stream
that ends inside a gzip member or a zstd frame, or that is not what its suffix claims, raises
:class:`~assay.exceptions.ConnectorError` naming the stream and the reason, after every byte
decompressed before the fault has been returned.

>>> import gzip, io
>>> open_stream(io.BytesIO(gzip.compress(b'{"a": 1}\\n')), "x").read()
b'{"a": 1}\\n'
>>> detect_compression(b"\\x28\\xb5\\x2f\\xfd....")
'zstd'
"""

from __future__ import annotations

import gzip
import zlib
from typing import Any, BinaryIO, cast

from assay.exceptions import ConnectorError

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_SUFFIXES = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}
_ZSTD_IN = 1 << 17  # compressed bytes fed per step: bounds the decompressed output held at once
_ZSTD_OUT = 1 << 20


def detect_compression(head: bytes) -> str:
    """``gzip``, ``zstd`` or ``none`` from the first bytes of a stream (4 are enough)."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return "none"


def compression_of_suffix(name: str) -> str | None:
    """The compression a name's suffix claims (``x.jsonl.gz`` → ``gzip``), or None."""
    for suffix, kind in _SUFFIXES.items():
        if name.endswith(suffix):
            return kind
    return None


class Prefixed:
    """A readable that first returns ``head`` (bytes already read to sniff the stream), then the
    rest of ``raw``. Offers ``read`` and ``readinto`` whatever ``raw`` offers."""

    def __init__(self, head: bytes, raw: Any) -> None:
        self.head = head
        self.raw = raw
        self._readinto = getattr(raw, "readinto", None)

    def read(self, n: int = -1, /) -> bytes:
        head = self.head
        if head:
            if n is None or n < 0:
                self.head = b""
                return head + cast(bytes, self.raw.read())
            if n <= len(head):
                self.head = head[n:]
                return head[:n]
            self.head = b""
            return head  # a short read is allowed; the next call reads raw
        return cast(bytes, self.raw.read(n))

    def readinto(self, b: Any, /) -> int:
        head = self.head
        if head:
            k = min(len(b), len(head))
            b[:k] = head[:k]
            self.head = head[k:]
            return k
        if self._readinto is not None:
            return cast(int, self._readinto(b))
        data = self.raw.read(len(b))
        b[: len(data)] = data
        return len(data)

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        close = getattr(self.raw, "close", None)
        if close is not None:
            close()


def read_head(raw: Any, n: int) -> bytes:
    """Up to ``n`` bytes from the start of ``raw`` (fewer only at the end of the stream)."""
    parts: list[bytes] = []
    have = 0
    while have < n:
        try:
            data = raw.read(n - have)
        except ConnectorError as exc:
            exc.partial = b"".join(parts)  # type: ignore[attr-defined]  # what came before the fault
            raise
        if not data:
            break
        parts.append(data)
        have += len(data)
    return b"".join(parts)


class Failing:
    """A readable that raises ``error`` on its first read: a fault met while sniffing, deferred
    until the records read before it are framed."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def read(self, n: int = -1, /) -> bytes:
        raise self.error

    def readinto(self, b: Any, /) -> int:
        raise self.error


class _Translating:
    """Decompressed reads whose decoder errors become a ConnectorError naming the stream."""

    def __init__(self, inner: Any, name: str, kind: str) -> None:
        self.inner = inner
        self.name = name
        self.kind = kind
        # one decompression step per call: a fault loses only that step, not a whole buffer
        self._readinto = getattr(inner, "readinto1", None) or inner.readinto

    def _fail(self, exc: BaseException) -> ConnectorError:
        reason = str(exc) or type(exc).__name__
        if isinstance(exc, EOFError):
            reason = f"truncated {self.kind} data ({reason})"
        else:
            reason = f"corrupt {self.kind} data ({reason})"
        return ConnectorError(f"{self.name}: {reason}")

    def read(self, n: int = -1, /) -> bytes:
        read1 = getattr(self.inner, "read1", None)  # one step: a fault loses only that step
        try:
            return cast(bytes, read1(n) if read1 is not None and n > 0 else self.inner.read(n))
        except (OSError, EOFError, zlib.error, ValueError) as exc:
            raise self._fail(exc) from exc

    def readinto(self, b: Any, /) -> int:
        try:
            return cast(int, self._readinto(b))
        except (OSError, EOFError, zlib.error, ValueError) as exc:
            raise self._fail(exc) from exc

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.inner.close()


class _ZstdReader:
    """Streaming zstd decompression across concatenated frames that notices a truncated frame
    (``zstandard``'s ``stream_reader`` returns a silent short read instead)."""

    def __init__(self, raw: Any) -> None:
        import zstandard

        self._dctx = zstandard.ZstdDecompressor()
        self._error = zstandard.ZstdError
        self._raw = raw
        self._obj = self._dctx.decompressobj(write_size=_ZSTD_OUT)
        self._in_frame = False
        self._pending = memoryview(b"")  # decompressed, not yet returned
        self._eof = False

    def _fill(self) -> None:
        while not self._pending and not self._eof:
            data = self._raw.read(_ZSTD_IN)
            if not data:
                self._eof = True
                if self._in_frame:
                    raise EOFError("the stream ends inside a zstd frame")
                return
            out: list[bytes] = []
            while data:
                try:
                    out.append(self._obj.decompress(data))
                except self._error as exc:
                    raise ValueError(str(exc)) from exc
                self._in_frame = not self._obj.eof
                if self._obj.eof:  # the next frame (a resumed sink appends frames)
                    data = self._obj.unused_data
                    self._obj = self._dctx.decompressobj(write_size=_ZSTD_OUT)
                else:
                    data = b""
            self._pending = memoryview(out[0] if len(out) == 1 else b"".join(out))

    def read(self, n: int = -1, /) -> bytes:
        if n is None or n < 0:
            chunks: list[bytes] = []
            while True:
                self._fill()
                if not self._pending:
                    return b"".join(chunks)
                chunks.append(bytes(self._pending))
                self._pending = memoryview(b"")
        self._fill()
        out, self._pending = self._pending[:n], self._pending[n:]
        return bytes(out)

    def readinto(self, b: Any, /) -> int:
        self._fill()
        pending = self._pending
        k = min(len(b), len(pending))
        b[:k] = pending[:k]
        self._pending = pending[k:]
        return k

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        close = getattr(self._raw, "close", None)
        if close is not None:
            close()


def open_stream(raw: Any, name: str = "<stream>", *, suffix_name: str | None = None) -> BinaryIO:
    """The decompressed bytes of a binary readable (``read``; ``readinto`` used when present).

    Compression is detected from the first bytes. ``suffix_name`` (a file or object name) is only
    checked: a name ending in ``.gz``/``.zst`` whose content has no compression magic at all raises
    ConnectorError (a ``.zst`` that is not zstd is a broken file, not plain text).
    """
    head = read_head(raw, 4)
    kind = detect_compression(head)
    claimed = compression_of_suffix(suffix_name) if suffix_name else None
    if claimed is not None and kind == "none" and head:
        raise ConnectorError(f"{name}: not {claimed} data (the name ends in a {claimed} suffix)")
    stream: Any = Prefixed(head, raw) if head else raw
    if kind == "gzip":
        return cast(BinaryIO, _Translating(gzip.GzipFile(fileobj=stream, mode="rb"), name, "gzip"))
    if kind == "zstd":
        return cast(BinaryIO, _Translating(_ZstdReader(stream), name, "zstd"))
    return cast(BinaryIO, stream)


__all__ = ["Failing", "Prefixed", "compression_of_suffix", "detect_compression", "open_stream", "read_head"]
