"""Where the bytes live, locally: files, directories, globs and stdin (``-``), and byte ranges of
large plain JSON-lines files for sharded reads.

Framing (:mod:`assay.connectors.framing`) and compression (:mod:`assay.connectors.compression`)
are separate; this module only names inputs and opens them.
"""

from __future__ import annotations

import glob
import mmap
import os
import sys
from pathlib import Path
from typing import IO, Any

from assay.exceptions import ConnectorError, InputMissingError

STDIN = "-"
STDIN_NAME = "<stdin>"
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


def expand_paths(paths: list[str] | tuple[str, ...] | Any) -> list[str]:
    """Files named by paths, directories (recursively, input suffixes only) and globs, sorted."""
    out: list[str] = []
    for p in paths:
        if p == STDIN:
            out.append(p)
            continue
        if any(ch in p for ch in "*?["):
            matches = sorted(m for m in glob.glob(p, recursive=True) if os.path.isfile(m))
            if not matches:
                raise InputMissingError(f"source: no files match {p!r} (not landed yet?)")
            out.extend(matches)
        elif os.path.isdir(p):
            found = sorted(
                str(f)
                for f in Path(p).rglob("*")
                if f.is_file() and _has_input_suffix(f.name) and not f.name.startswith(("_", "."))
            )
            if not found:
                raise InputMissingError(
                    f"source: directory {p!r} holds no .jsonl/.json(.gz/.zst) files (not landed yet?)"
                )
            out.extend(found)
        elif os.path.isfile(p):
            out.append(p)
        else:
            raise InputMissingError(f"source: no such file or directory: {p!r} (not landed yet?)")
    return out


def display_name(path: str) -> str:
    """The name positions carry: the path, or ``<stdin>``."""
    return STDIN_NAME if path == STDIN else path


def open_raw(path: str) -> IO[bytes]:
    """The raw bytes of a local input (stdin for ``-``); a file that is gone or unreadable raises
    ConnectorError naming it."""
    if path == STDIN:
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except FileNotFoundError as exc:
        raise ConnectorError(f"{path}: the file disappeared before it was read ({exc.strerror})") from exc
    except OSError as exc:
        raise ConnectorError(f"{path}: cannot open: {exc.strerror or exc}") from exc


def file_size(path: str) -> int:
    """Size in bytes (0 for stdin or a file that is gone)."""
    if path == STDIN:
        return 0
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


# -- byte ranges -----------------------------------------------------------------------------


def line_start_at(f: IO[bytes], offset: int) -> int:
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


def count_newlines(f: IO[bytes], end: int) -> int:
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


def byte_range(f: IO[bytes], size: int, i: int, n: int) -> tuple[int, int, int]:
    """Shard ``i`` of ``n`` of a plain file: (start offset, end offset, lines before start).
    Ranges start and end on line boundaries, so every line belongs to exactly one shard."""
    start = line_start_at(f, size * i // n)
    end = line_start_at(f, size * (i + 1) // n) if i + 1 < n else size
    return start, end, count_newlines(f, start) if start else 0


class Limited:
    """A reader that stops after ``limit`` bytes (one shard's byte range)."""

    def __init__(self, f: IO[bytes], limit: int) -> None:
        self.f = f
        self.left = limit

    def read(self, n: int = -1, /) -> bytes:
        if self.left <= 0:
            return b""
        data = self.f.read(self.left if n is None or n < 0 else min(n, self.left))
        self.left -= len(data)
        return data

    def readinto(self, b: memoryview, /) -> int:
        if self.left <= 0:
            return 0
        n: int = self.f.readinto(b[: self.left] if len(b) > self.left else b)  # type: ignore[attr-defined]
        self.left -= n
        return n


__all__ = [
    "INPUT_SUFFIXES",
    "STDIN",
    "STDIN_NAME",
    "Limited",
    "byte_range",
    "count_newlines",
    "display_name",
    "expand_paths",
    "file_size",
    "line_start_at",
    "open_raw",
]
