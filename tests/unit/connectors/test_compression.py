"""Compression detected from magic bytes on any binary readable; faults name the stream."""

from __future__ import annotations

import gzip
import io

import pytest
import zstandard

from assay.connectors.compression import detect_compression, open_stream
from assay.connectors.framing import iter_lines
from assay.exceptions import ConnectorError

BODY = b"".join(b'{"i": %d, "pad": "%s"}\n' % (i, b"x" * (i % 97)) for i in range(30_000))


class ReadOnly:
    """A readable offering only ``read`` (like a network body), no seek, no readinto."""

    def __init__(self, data: bytes) -> None:
        self._f = io.BytesIO(data)

    def read(self, n: int = -1, /) -> bytes:
        return self._f.read(min(n, 5000) if n and n > 0 else n)  # short reads, like a socket


def _zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


ENCODINGS = {
    "none": lambda b: b,
    "gzip": gzip.compress,
    "gzip_members": lambda b: gzip.compress(b[: len(b) // 3]) + gzip.compress(b[len(b) // 3 :]),
    "zstd": _zstd,
    "zstd_frames": lambda b: _zstd(b[: len(b) // 2]) + _zstd(b[len(b) // 2 :]),
}


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
@pytest.mark.parametrize("wrap", [io.BytesIO, ReadOnly])
def test_decompressed_by_magic_bytes_whatever_the_name(encoding: str, wrap: type) -> None:
    data = ENCODINGS[encoding](BODY)
    stream = open_stream(wrap(data), "no-suffix")
    assert b"\n".join(iter_lines(stream)) + b"\n" == BODY


def test_detect_compression() -> None:
    assert detect_compression(gzip.compress(b"x")) == "gzip"
    assert detect_compression(_zstd(b"x")) == "zstd"
    assert detect_compression(b'{"a"') == detect_compression(b"") == "none"


def test_a_compression_suffix_on_plain_content_is_an_error() -> None:
    with pytest.raises(ConnectorError, match=r"x\.jsonl\.zst: not zstd data"):
        open_stream(io.BytesIO(b'{"a": 1}\n'), "x.jsonl.zst", suffix_name="x.jsonl.zst")
    with pytest.raises(ConnectorError, match="not gzip data"):
        open_stream(io.BytesIO(b'{"a": 1}\n'), "x.gz", suffix_name="x.gz")
    # the content decides when it is compressed, whatever the suffix says
    assert open_stream(io.BytesIO(_zstd(b"ok\n")), "x.gz", suffix_name="x.gz").read() == b"ok\n"
    assert open_stream(io.BytesIO(b""), "empty.gz", suffix_name="empty.gz").read() == b""


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
def test_a_truncated_stream_raises_after_everything_before_the_cut(encoding: str) -> None:
    data = ENCODINGS[encoding](BODY)
    stream = open_stream(io.BytesIO(data[: len(data) * 2 // 3]), "cut.jsonl")
    lines: list[bytes] = []
    with pytest.raises(ConnectorError, match=rf"cut\.jsonl: truncated {encoding} data"):
        lines.extend(iter_lines(stream))  # extend() keeps what came before the error
    assert lines and len(lines) < 30_000
    assert lines[:-1] == BODY.split(b"\n")[: len(lines) - 1]  # a clean prefix (the last may be cut)


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
def test_corrupt_data_raises_a_connector_error(encoding: str) -> None:
    data = bytearray(ENCODINGS[encoding](BODY))
    data[len(data) // 2 : len(data) // 2 + 64] = b"\x00" * 64
    with pytest.raises(ConnectorError, match=rf"bad: (corrupt|truncated) {encoding} data"):
        for _ in iter_lines(open_stream(io.BytesIO(bytes(data)), "bad")):
            pass
