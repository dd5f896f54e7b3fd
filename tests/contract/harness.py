"""What the contract suites need from each connector: a way to make one over given records, and to
read back what a sink made durable. One harness per connector; the suites are shared."""

from __future__ import annotations

import gzip
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.connectors.base import Sink, Source


@dataclass
class SourceHarness:
    """``make(records, resume_state)`` builds a source over ``records`` (bytes, one per record);
    ``exact``: a resumed source yields exactly the positions not acknowledged (a ledger), else at
    least those (committed offsets: the contiguous watermark)."""

    name: str
    make: Callable[[list[bytes], Any], Awaitable[Source]]
    exact: bool = True
    partitioned: bool = False


@dataclass
class SinkHarness:
    """``make(resume_state)`` builds a sink (None: start over); ``read`` returns the rows a reader
    sees after ``publish``; ``exact``: a resume drops rows written after the last flush."""

    name: str
    make: Callable[[Any], Awaitable[Sink]]
    read: Callable[[], Awaitable[list[bytes]]]
    exact: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def read_parts(directory: Path, prefix: str = "part") -> list[bytes]:
    """Rows of every ``{prefix}-*`` part of a directory, in name order (gzip/zstd decoded)."""
    out: list[bytes] = []
    for p in sorted(directory.glob(f"{prefix}-*")):
        data = p.read_bytes()
        if p.name.endswith(".gz"):
            data = gzip.decompress(data)
        elif p.name.endswith(".zst"):
            import io

            import zstandard

            reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
            data = reader.read()
        out += [line for line in data.split(b"\n") if line]
    return out
