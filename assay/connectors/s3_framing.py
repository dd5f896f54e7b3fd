"""Records of one binary stream: decompression by magic bytes, then JSON lines or a JSON array.

A stand-in with the signature of the shared framing module (``iter_records(stream, name,
input_format)``), so the S3 source can switch to it by changing one import.

>>> import gzip, io
>>> raw = io.BufferedReader(io.BytesIO(gzip.compress(b'{"a": 1}\\n\\n{"a": 2}\\n')))
>>> list(iter_records(raw, "s3://b/k.jsonl.gz", "auto"))
[(1, b'{"a": 1}'), (3, b'{"a": 2}')]
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from typing import IO, Any

from assay.connectors.file import iter_json_array, line_chunks

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class _ErrorsLast(io.RawIOBase):
    """Decompressed bytes; a decompression error (truncated member) is raised on the read *after*
    the bytes decoded before it, so every complete record before a fault is still framed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.error: BaseException | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self.error is not None:
            raise self.error
        view = memoryview(b).cast("B")
        n = 0
        while n < len(view):
            try:
                data = self.inner.read1(len(view) - n)
            except Exception as exc:
                if n:
                    self.error = exc
                    break
                raise
            if not data:
                break
            view[n : n + len(data)] = data
            n += len(data)
        return n

    def close(self) -> None:
        self.inner.close()
        super().close()


def open_stream(raw: io.BufferedReader[Any]) -> IO[bytes]:
    """The decompressed stream: gzip or zstd by magic bytes, otherwise ``raw`` itself.

    Not buffered again: a BufferedReader would drop the bytes before a decompression error
    (it fills its buffer with several reads and loses them when one fails)."""
    head = raw.peek(4)[:4]
    if head.startswith(GZIP_MAGIC):
        return _ErrorsLast(gzip.GzipFile(fileobj=raw, mode="rb"))  # type: ignore[return-value]
    if head.startswith(ZSTD_MAGIC):
        import zstandard

        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=False)
        return _ErrorsLast(reader)  # type: ignore[return-value]
    return raw


def iter_records(stream: io.BufferedReader[Any], name: str, input_format: str = "auto") -> Iterator[tuple[int, bytes]]:
    """``(line, payload)`` of each record: non-blank JSON lines, or the elements of a JSON array
    (``input_format="json"``, or ``auto`` with a ``.json[.gz|.zst]`` name and a leading ``[``)."""
    f = open_stream(stream)
    base = name.removesuffix(".gz").removesuffix(".zst")
    if input_format == "json" or (input_format == "auto" and base.endswith(".json")):
        if not hasattr(f, "peek"):
            f = io.BufferedReader(f, 1 << 20)  # type: ignore[type-var]
        peek = f.peek(64)
        if not peek or peek.lstrip()[:1] == b"[":
            yield from iter_json_array(f, name)
            return
    line = 0
    for lines in line_chunks(f):
        for text in lines:
            line += 1
            if text and not text.isspace():
                yield line, text[:-1] if text[-1] == 13 else text
