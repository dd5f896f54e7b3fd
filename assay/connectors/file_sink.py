"""Local sinks: JSON lines in numbered parts, made durable in place and restored exactly on resume.

A :class:`LocalSink` writes ``{prefix}-{shard:05d}-{seq:05d}.jsonl[.gz|.zst]`` parts. The part being
written is a hidden temp file (``.{name}.tmp``) renamed into place when it is complete, so a reader
never sees a half-written part. ``flush`` makes everything written so far durable: compressed
streams end their gzip member / zstd frame (members and frames concatenate into valid streams), the
file is fsynced, and :meth:`snapshot` records the finished parts and the committed length of the
current one. A sink opened with that ``resume_state`` deletes every part of its shard written after
it and truncates the current part to the committed length: rows written after the last commit are
gone, and the source (which was never acknowledged for them) reads them again. ``resume_state=None``
starts over: the outputs of earlier attempts are removed first (``_SUCCESS`` before anything).

Two layouts:

* a **directory** (``out/``): parts are the output; ``_SUMMARY.json`` and ``_SUCCESS`` beside them;
* a **file** (``out.jsonl.gz``): parts are staged in ``.out.jsonl.gz.parts/`` next to it and
  concatenated into the file by :meth:`publish` (atomically: temp file, then rename) only when the
  run succeeded; its summary is ``out.jsonl.gz._SUMMARY.json``.

>>> import anyio, tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> async def demo():
...     async with LocalSink(str(d / "out.jsonl")) as sink:
...         await sink.write_batch([b'{"a":1}', b'{"a":2}'])
...         await sink.flush()
...         await sink.publish({"status": "ok"}, success=True)
...     return (d / "out.jsonl").read_bytes()
>>> anyio.run(demo)
b'{"a":1}\\n{"a":2}\\n'
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.to_thread
import orjson

from assay.connectors.base import Sink
from assay.connectors.layout import (
    JSONL_SUFFIX,
    RESULTS_PREFIX,
    STAGING,
    SUCCESS,
    SUMMARY,
    part_name,
    part_pattern,
    summary_beside,
    temp_path,
)
from assay.connectors.layout import write_json_atomic as write_json_atomic  # its home before layout.py
from assay.exceptions import ConfigError, ConnectorError
from assay.paths import safe_join

CHUNK = 1 << 20
SWAP = "_SWAP.json"
OPEN = "_OPEN"
"""In a staging area from its start-over until it is swapped in: a resumed publish whose staging
area is empty and lacks it was swapped in already (a stop came before the run was forgotten)."""
_EXT = {"none": "", "gzip": ".gz", "zstd": ".zst"}


def compression_for(path: str, compression: str | None) -> str:
    """``none`` / ``gzip`` / ``zstd`` from an explicit setting or the path's suffix."""
    if compression and compression != "auto":
        if compression not in _EXT:
            raise ConfigError(f"sink.compression: unknown {compression!r} (none | gzip | zstd)")
        return compression
    if path.endswith(".gz"):
        return "gzip"
    if path.endswith(".zst"):
        return "zstd"
    return "none"


def is_directory_target(path: str) -> bool:
    """An output path names a directory when it ends with '/', exists as one, or has no JSON suffix."""
    if path.endswith(("/", os.sep)) or os.path.isdir(path):
        return True
    base = path.removesuffix(".gz").removesuffix(".zst")
    return not base.endswith((".jsonl", ".ndjson", ".json", ".parquet"))


def require_recorded(where: str, directory: Path, names: Iterable[str]) -> None:
    """A ConnectorError when a file a checkpoint records as committed is gone from ``directory``
    (removed by hand, or by another tool): the output cannot be resumed exactly."""
    missing = sorted(n for n in names if not (directory / n).exists())
    if missing:
        raise ConnectorError(
            f"{where}: parts recorded by the checkpoint are missing ({', '.join(missing[:3])});"
            " run again with --fresh to start over"
        )


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _compressor(compression: str) -> Any:
    """A compressor of one gzip member / zstd frame (``compress`` then ``flush`` ends it)."""
    if compression == "gzip":
        return zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: a gzip member (mtime 0)
    import zstandard

    return zstandard.ZstdCompressor(level=3).compressobj()


def _write_all(f: IO[bytes], data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[f.write(view) or 0 :]


def os_error_message(path: str, exc: OSError) -> str:
    """``cannot write PATH: no space left on device`` (the errno's words, lower case)."""
    why = "no space left on device" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc)).lower()
    where = exc.filename if isinstance(exc.filename, str) else path
    return f"cannot write {where}: {why}"


class _Part:
    """The part being written: a temp file in append mode, written unbuffered (what ``write``
    returned from is on its way to disk, and a failed write leaves nothing in a buffer), compressed
    in memory one gzip member / zstd frame per commit."""

    def __init__(self, final: Path, compression: str, rows: int = 0) -> None:
        self.final = final
        self.tmp = temp_path(final)
        self.compression = compression
        self.rows = rows
        self.raw: IO[bytes] = open(self.tmp, "ab", buffering=0)  # noqa: SIM115 - closed in finish()/close()
        self._z: Any = None

    def write(self, data: bytes) -> None:
        if self.compression != "none":
            if self._z is None:
                self._z = _compressor(self.compression)
            data = self._z.compress(data)
        _write_all(self.raw, data)

    def sync(self) -> int:
        """Durable up to here: end the compressed member/frame, fsync; the committed length."""
        if self._z is not None:
            _write_all(self.raw, self._z.flush())
            self._z = None
        os.fsync(self.raw.fileno())
        return self.raw.tell()

    def seal(self) -> None:
        """A full part: durable and closed, still under its temp name (renamed at the next commit)."""
        self.sync()
        self.raw.close()

    def finish(self) -> Path:
        self.seal()
        os.replace(self.tmp, self.final)
        return self.final

    def close(self) -> None:
        self.raw.close()


class LocalSink(Sink):
    """JSON-lines parts on local disk (see the module docs).

    ``marker``: this sink writes the run's summary and ``_SUCCESS`` (the results sink; not the
    dead-letter sink). ``create_empty``: a published output with no rows still gets a (empty) file.
    """

    def __init__(
        self,
        path: str,
        *,
        prefix: str = RESULTS_PREFIX,
        shard: int = 0,
        compression: str | None = None,
        max_rows_per_part: int | None = None,
        resume_state: Any = None,
        marker: bool = True,
        create_empty: bool = True,
        staged: bool = False,
    ) -> None:
        self.path = path
        self.staged = staged
        self.directory = is_directory_target(path)
        self.compression = compression_for(path, compression)
        self.max_rows = max_rows_per_part if self.directory else None
        self.prefix = prefix
        self.shard = shard
        self.resume_state = resume_state
        self.marker = marker
        self.create_empty = create_empty
        if self.directory:
            self.out_dir = Path(path)
            self.parts_dir = self.out_dir / STAGING if staged else self.out_dir
            self.summary_path = self.out_dir / SUMMARY
            self.success_path: Path | None = self.out_dir / SUCCESS
        else:
            final = Path(path)
            self.out_dir = final.parent
            self.parts_dir = final.parent / f".{final.name}.parts"
            self.summary_path = Path(summary_beside(str(final)))
            self.success_path = None
        self.parts: list[str] = []
        self.seq = 0
        self.rows_written = 0
        self._part: _Part | None = None
        self._full: list[_Part] = []
        """Parts that reached ``max_rows_per_part`` since the last commit: renamed into place at
        the next ``flush`` (a part under its final name holds committed rows only)."""
        self._committed: dict[str, Any] | None = None
        self._dirty = False
        """Rows written since the last ``flush``."""
        self._failed = False
        """A write or flush failed: what follows the last commit cannot be trusted."""
        self.reset_only_shard = False
        """Start-over removes only this shard's parts (a ``--shard i/N`` run)."""

    def describe(self) -> str:
        return self.path

    # -- naming -------------------------------------------------------------------------------

    def _pattern(self, shard: int | None) -> re.Pattern[str]:
        return part_pattern(self.prefix, JSONL_SUFFIX, shard, temp=True)

    def _part_name(self, seq: int) -> str:
        return part_name(self.prefix, self.shard, seq, f".jsonl{_EXT[self.compression]}")

    # -- lifecycle ----------------------------------------------------------------------------

    async def open(self) -> None:
        try:
            await anyio.to_thread.run_sync(self._open)
        except OSError as exc:
            raise ConnectorError(f"cannot prepare output {self.path!r}: {exc}") from exc

    def _open(self) -> None:
        if self.resume_state is None:
            self.reset(shard=self.shard if self.reset_only_shard else None)
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        if self.resume_state is not None:
            self._restore(self.resume_state)

    def reset(self, shard: int | None) -> None:
        """Start over: remove the outputs of earlier attempts (``_SUCCESS`` first), of every shard
        or of one shard (a ``--shard i/N`` run leaves the other shards' parts alone). A staged sink
        clears only its staging area: the whole output beside it stays until ``publish``."""
        if self.staged:
            if self.parts_dir.is_dir():
                pattern = self._pattern(shard)
                for f in self.parts_dir.iterdir():
                    if pattern.match(f.name) or f.name in (SUMMARY, SWAP):
                        f.unlink(missing_ok=True)
            if self.directory:
                self.parts_dir.mkdir(parents=True, exist_ok=True)
                (self.parts_dir / OPEN).touch()
            return
        if self.marker and self.success_path is not None:
            self.success_path.unlink(missing_ok=True)
        if not self.directory:
            Path(self.path).unlink(missing_ok=True)
            if shard is None:
                shutil.rmtree(self.parts_dir, ignore_errors=True)
        if self.marker and shard is None:
            self.summary_path.unlink(missing_ok=True)
        if self.parts_dir.is_dir():
            pattern = self._pattern(shard)
            for f in self.parts_dir.iterdir():
                if pattern.match(f.name):
                    f.unlink(missing_ok=True)
        if self.directory and shard is None:
            shutil.rmtree(self.out_dir / STAGING, ignore_errors=True)  # of an earlier staged attempt

    async def whole(self) -> bool:
        """Whether a whole output is published here (``_SUCCESS``; a file sink: its file)."""
        where = self.success_path if self.success_path is not None else Path(self.path)
        return await anyio.to_thread.run_sync(where.exists)

    async def withdraw(self) -> None:
        """Remove the success marker: the output is about to change."""
        if self.marker and self.success_path is not None:
            await anyio.to_thread.run_sync(self._withdraw, self.success_path)

    def _withdraw(self, marker: Path) -> None:
        marker.unlink(missing_ok=True)
        fsync_dir(self.out_dir)

    async def settle(self) -> bool:
        """Finish a swap a stop cut short (see ``_swap``); True when there was one."""
        return await anyio.to_thread.run_sync(self._settle)

    def _settle(self) -> bool:
        if not self.directory or not (self.out_dir / STAGING / SWAP).exists():
            return False
        self._swap()
        return True

    def _restore(self, state: dict[str, Any]) -> None:
        keep = set(state.get("parts", []))
        current = state.get("current")
        cur_name = current["name"] if current else None
        pattern = self._pattern(self.shard)
        for f in self.parts_dir.iterdir():
            if not pattern.match(f.name):
                continue
            name = f.name[1:].removesuffix(".tmp") if f.name.endswith(".tmp") else f.name
            if name in keep and not f.name.endswith(".tmp"):
                continue
            if name == cur_name:
                continue
            f.unlink(missing_ok=True)  # written after the last commit: redone by this run
        # swapped in by a publish that a stop cut short before the run was forgotten: in place
        # (a directory's staging area only: a file target's has no marker)
        swapped = self.staged and self.directory and not (self.parts_dir / OPEN).exists()
        require_recorded(self.path, self.out_dir if swapped else self.parts_dir, keep)
        self.parts = sorted(keep)
        self.seq = int(state.get("seq", 0))
        if current:
            final = self.parts_dir / cur_name  # type: ignore[operator]
            tmp = temp_path(final)
            if not tmp.exists() and final.exists():
                os.replace(final, tmp)  # renamed at a stop whose checkpoint was not saved after it
            if not tmp.exists():
                if current["bytes"]:
                    raise ConnectorError(
                        f"{self.path}: the part being written ({cur_name}) is missing; run again with --fresh"
                    )
                tmp.touch()
            with open(tmp, "r+b") as fh:
                fh.truncate(int(current["bytes"]))
            self._part = _Part(final, self.compression, rows=int(current["rows"]))
        self._committed = self._state()

    async def write_batch(self, rows: Sequence[bytes], keys: Sequence[str | None] | None = None) -> None:
        if not rows:
            return
        self._check()
        try:
            await anyio.to_thread.run_sync(self._write, rows)
        except OSError as exc:
            self._failed = True
            raise ConnectorError(os_error_message(self.path, exc)) from exc
        self.rows_written += len(rows)

    def _check(self) -> None:
        if self._failed:
            raise ConnectorError(f"{self.path}: an earlier write failed; rows after the last commit are discarded")

    def _write(self, rows: Sequence[bytes]) -> None:
        self._dirty = True
        i = 0
        while i < len(rows):
            if self._part is None:
                self._part = _Part(self.parts_dir / self._part_name(self.seq), self.compression)
                self.seq += 1
            take = len(rows) - i
            if self.max_rows:
                take = min(take, self.max_rows - self._part.rows)
            chunk = rows[i : i + take]
            self._part.write(b"\n".join(chunk) + b"\n")
            self._part.rows += len(chunk)
            i += take
            if self.max_rows and self._part.rows >= self.max_rows:
                self._part.seal()
                self._full.append(self._part)
                self._part = None

    async def flush(self) -> None:
        """Make every row written so far durable: the current part synced to its committed length,
        full parts renamed into place. After a failed write this raises: nothing after the last
        commit is committed (``aclose`` discards it)."""
        self._check()
        try:
            await anyio.to_thread.run_sync(self._flush)
        except OSError as exc:
            self._failed = True
            raise ConnectorError(os_error_message(self.path, exc)) from exc

    def _flush(self) -> None:
        part = self._part
        committed = part.sync() if part is not None else 0
        for full in self._full:
            os.replace(full.tmp, full.final)
            self.parts.append(full.final.name)
        self._full = []
        fsync_dir(self.parts_dir)
        self._committed = self._state(committed)
        self._dirty = False

    def _state(self, committed: int | None = None) -> dict[str, Any]:
        part = self._part
        current = None
        if part is not None:
            size = committed if committed is not None else part.raw.tell()
            current = {"name": part.final.name, "bytes": size, "rows": part.rows}
        return {"parts": list(self.parts), "seq": self.seq, "current": current}

    def snapshot(self) -> Any:
        return self._committed if self._committed is not None else self._state()

    async def aclose(self) -> None:
        """Discard what was written after the last commit (a failed run never finishes a part
        with uncommitted rows), then finish the current part (renamed into place, or dropped when
        empty)."""
        with anyio.CancelScope(shield=True):
            try:
                await anyio.to_thread.run_sync(self._close)
            except OSError as exc:
                raise ConnectorError(os_error_message(self.path, exc)) from exc

    def _close(self) -> None:
        if self._dirty or self._failed:
            self._rollback()
        part, self._part = self._part, None
        if part is not None:
            self._finish(part)

    def _rollback(self) -> None:
        """Back to the last commit: later parts removed, the current one truncated."""
        for p in [*self._full, *([self._part] if self._part is not None else [])]:
            p.close()
        self._full, self._part = [], None
        self._restore(self._committed or {"parts": [], "seq": 0, "current": None})  # (never flushed: nothing)
        self._dirty = self._failed = False

    def _finish(self, part: _Part) -> None:
        if part.rows:
            self.parts.append(part.finish().name)
        else:
            part.close()
            part.tmp.unlink(missing_ok=True)
            self.seq -= 1  # an empty part is not kept: its number is reused
        self._committed = self._state()

    # -- publishing ---------------------------------------------------------------------------

    async def publish(self, summary: dict[str, Any], *, success: bool, summary_name: str | None = None) -> str | None:
        """Finalize the output (a file sink: concatenate the parts into the file), write the summary,
        then ``_SUCCESS`` when ``success``. The part being written is finished first."""
        with anyio.CancelScope(shield=True):
            try:
                where = await anyio.to_thread.run_sync(self._publish, summary, success, summary_name)
            except OSError as exc:
                raise ConnectorError(os_error_message(self.path, exc)) from exc
        return where

    def _publish(self, summary: dict[str, Any], success: bool, summary_name: str | None) -> str | None:
        if self._dirty and not self._failed:
            self._flush()  # publishing commits what was written
        self._close()
        if success:
            self._finalize_rows()
        elif self.parts_dir != self.out_dir or not self.marker:
            with contextlib.suppress(OSError):  # a run that wrote nothing leaves no empty staging area
                self.parts_dir.rmdir()
        if not self.marker:
            return None
        target = self.summary_path if summary_name is None else safe_join(self.out_dir, summary_name)
        if self.staged and not success:  # the whole output stays as it is; this run's summary beside its rows
            target = safe_join(self.parts_dir, summary_name or SUMMARY)
        write_json_atomic(target, summary)
        if success and self.success_path is not None:
            self.success_path.touch()
            fsync_dir(self.out_dir)
        return str(target)

    async def discard(self) -> None:
        """Drop the staging area (a staged run that is not swapped in: nothing new was read)."""
        if self.staged:
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(self.parts_dir, ignore_errors=True))

    def all_parts(self, where: Path | None = None) -> list[Path]:
        """Every finished part of every shard, in name order."""
        where = where or self.parts_dir
        if not where.is_dir():
            return []
        pattern = self._pattern(None)
        return sorted(f for f in where.iterdir() if pattern.match(f.name) and not f.name.startswith("."))

    def _finalize_rows(self) -> None:
        parts = self.all_parts()
        if self.directory:
            if self.staged and not parts and not (self.parts_dir / OPEN).exists():
                # swapped in already, by a publish that a stop cut short before the run was forgotten
                shutil.rmtree(self.parts_dir, ignore_errors=True)
                return
            if not parts and self.create_empty:
                self.parts_dir.mkdir(parents=True, exist_ok=True)
                (self.parts_dir / part_name(self.prefix, 0, 0, f".jsonl{_EXT[self.compression]}")).touch()
            if self.staged:
                write_json_atomic(self.parts_dir / SWAP, [p.name for p in self.all_parts()])
                self._swap()
            if not self.create_empty and not self.all_parts(self.out_dir):
                with contextlib.suppress(OSError):  # no dead letters: no `_dead_letter/` (unless it holds more)
                    self.out_dir.rmdir()
            return
        if not parts and not self.create_empty:
            # no rows (no dead letters): no file, and none left by an earlier run of this output
            Path(self.path).unlink(missing_ok=True)
            shutil.rmtree(self.parts_dir, ignore_errors=True)
            return
        final = Path(self.path)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_path(final)
        with open(tmp, "wb", buffering=0) as out:
            for p in parts:
                with open(p, "rb", buffering=0) as f:
                    _append(f, out)
            os.fsync(out.fileno())
        os.replace(tmp, final)
        fsync_dir(final.parent)
        shutil.rmtree(self.parts_dir, ignore_errors=True)

    def _swap(self) -> None:
        """Swap a whole staged output in: the earlier parts not in the new output are removed, the
        staged ones renamed into place, the staging area removed. ``_SWAP.json`` (the new parts'
        names, written first) lets a stop in the middle be finished by ``settle``."""
        staging = self.out_dir / STAGING
        names = set(orjson.loads((staging / SWAP).read_bytes()))
        for f in self.all_parts(self.out_dir):
            if f.name not in names:
                f.unlink(missing_ok=True)
        for name in sorted(names):
            if (staging / name).exists():
                os.replace(staging / name, self.out_dir / name)
        fsync_dir(self.out_dir)
        shutil.rmtree(staging, ignore_errors=True)


def _append(src: IO[bytes], dst: IO[bytes]) -> None:
    """Copy the rest of ``src`` to ``dst`` (unbuffered files): in the kernel where it can."""
    try:
        while os.copy_file_range(src.fileno(), dst.fileno(), CHUNK << 4):
            pass
        return
    except OSError:  # not supported here: copy through user space from where it stopped
        pass
    shutil.copyfileobj(src, dst, CHUNK)
