"""File sinks: JSONL (plain, .gz, .zst) files and directories of parts.

Writing goes to a temporary file in the target directory that is renamed into place when a part is
complete, so a reader never sees a half-written part. The reading side lives in
:mod:`assay.connectors.file_source` (re-exported here: ``from assay.connectors.file import
FileSource`` keeps working), :mod:`~assay.connectors.local`, :mod:`~assay.connectors.framing` and
:mod:`~assay.connectors.compression`.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.to_thread

from assay.connectors.base import Sink
from assay.connectors.file_source import FileSource
from assay.connectors.framing import CHUNK, iter_lines, line_chunks
from assay.connectors.local import INPUT_SUFFIXES, expand_paths
from assay.exceptions import ConfigError, ConnectorError

__all__ = [
    "CHUNK",
    "INPUT_SUFFIXES",
    "FileSource",
    "JsonlSink",
    "expand_paths",
    "is_directory_target",
    "iter_lines",
    "line_chunks",
]


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
