"""Where a run's results live: a small read-only interface over a results location.

A results location is what the file/directory sink writes: ``part-*.jsonl[.gz|.zst]`` rows,
``_dead_letter/dead-*.jsonl`` failures, ``_SUMMARY.json`` and ``_SUCCESS``. The report reads it
through :class:`ResultStore` (list the files, open one as a byte stream), so that another place of
bytes plugs in with :func:`register_store` without touching the report::

    register_store("gs", lambda location: MyGcsStore(location), expand=my_glob, close=my_close)

``s3://`` is built in (:mod:`assay.connectors.s3_results`, extra ``assay[s3]``, imported on first use):
a prefix is one run, a pattern such as ``s3://lake/scores/dt=*/`` expands to the runs it selects.

Compression is a separate concern: :func:`open_decompressed` wraps any opened stream by the
file's suffix (``.gz``, ``.zst``).
"""

from __future__ import annotations

import fnmatch
import glob
import gzip
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol, runtime_checkable

from assay.exceptions import ConfigError, ConnectorError

__all__ = [
    "LocalStore",
    "ResultStore",
    "close_stores",
    "expand_locations",
    "open_decompressed",
    "open_store",
    "register_store",
]


@runtime_checkable
class ResultStore(Protocol):
    """Read access to one results location (a directory, an S3 prefix…)."""

    location: str
    """The location as the user named it (shown in the report)."""

    def list(self, pattern: str) -> list[str]:
        """Names (relative, ``/``-separated, sorted) of the files matching the glob ``pattern``."""
        ...

    def open(self, name: str) -> IO[bytes]:
        """The raw bytes of the file ``name`` (as listed), as a readable binary stream."""
        ...

    def exists(self, name: str) -> bool:
        """Whether the file ``name`` exists."""
        ...


class LocalStore:
    """A results directory on the local file system.

    >>> import tempfile
    >>> d = tempfile.mkdtemp(); _ = open(os.path.join(d, "part-00000.jsonl"), "w").write("{}")
    >>> LocalStore(d).list("part-*")
    ['part-00000.jsonl']
    """

    def __init__(self, location: str) -> None:
        self.location = location
        self.root = Path(location)

    def list(self, pattern: str) -> list[str]:
        """Files under the directory matching ``pattern`` (``/`` separates directories)."""
        return sorted(p.relative_to(self.root).as_posix() for p in self.root.glob(pattern) if p.is_file())

    def open(self, name: str) -> IO[bytes]:
        """Open ``name`` for binary reading."""
        try:
            return open(self.root / name, "rb")
        except OSError as exc:
            raise ConnectorError(f"cannot open {self.root / name}: {exc}") from exc

    def exists(self, name: str) -> bool:
        """Whether ``name`` is a file in the directory."""
        return (self.root / name).is_file()


StoreFactory = Callable[[str], ResultStore]
StoreExpander = Callable[[str], list[str]]


@dataclass(frozen=True, slots=True)
class _Scheme:
    factory: StoreFactory
    expand: StoreExpander | None = None
    close: Callable[[], None] | None = None


_FACTORIES: dict[str, _Scheme] = {}


def register_store(
    scheme: str,
    factory: StoreFactory,
    *,
    expand: StoreExpander | None = None,
    close: Callable[[], None] | None = None,
) -> None:
    """Make ``scheme://…`` locations readable through ``factory(location)``. ``expand`` turns a
    location with a glob into the locations it selects; ``close`` releases what the stores of the
    scheme share (clients, connections), called by :func:`close_stores`."""
    _FACTORIES[scheme] = _Scheme(factory, expand, close)


def _s3_store(location: str) -> ResultStore:
    from assay.connectors.s3_results import S3Store

    return S3Store(location)


def _s3_expand(location: str) -> list[str]:
    from assay.connectors.s3_results import expand_s3

    return expand_s3(location)


def _s3_close() -> None:
    import sys

    module = sys.modules.get("assay.connectors.s3_results")  # nothing to close if it was never imported
    if module is not None:
        module.close_shared_reader()


register_store("s3", _s3_store, expand=_s3_expand, close=_s3_close)


def open_store(location: str) -> ResultStore:
    """The store of ``location``: a registered scheme (``s3://``), or a local directory."""
    scheme, sep, _ = location.partition("://")
    if sep:
        return _scheme(scheme).factory(location)
    lake = _lake_store(location)
    if lake is not None:
        return lake
    if not os.path.isdir(location):
        raise ConfigError(f"report: {location!r} is not a results directory")
    return LocalStore(location)


def _lake_store(location: str) -> ResultStore | None:
    """A Parquet output file or one day of a Delta table (:mod:`assay.report.lake`), else None."""
    if not (location.endswith(".parquet") or "ds=" in location):
        return None
    from assay.report.lake import open_lake_store

    store: ResultStore | None = open_lake_store(location)
    return store


def _scheme(scheme: str) -> _Scheme:
    found = _FACTORIES.get(scheme)
    if found is None:
        raise ConfigError(f"report: no reader for {scheme}:// locations (known: {sorted(_FACTORIES) or 'none'})")
    return found


def close_stores() -> None:
    """Release what the registered schemes' stores share (the report command calls it at the end)."""
    for entry in _FACTORIES.values():
        if entry.close is not None:
            entry.close()


def expand_locations(locations: list[str]) -> list[str]:
    """Expand glob patterns (``results/dt=*``, ``s3://lake/scores/dt=*/``) into the matching
    locations, in the order given (each pattern's matches sorted)."""
    out: list[str] = []
    for loc in locations:
        scheme, sep, _ = loc.partition("://")
        if sep:
            expand = _scheme(scheme).expand
            out.extend(expand(loc) if expand is not None else [loc])
        elif os.path.isdir(os.path.join(loc, "_delta_log")):  # a Delta table: one run per day
            from assay.report.lake import expand_lake

            out.extend(expand_lake(loc) or [loc])
        elif glob.has_magic(loc):
            found = sorted(p for p in glob.glob(loc) if os.path.isdir(p))
            if not found:
                raise ConfigError(f"report: no results directory matches {loc!r}")
            out.extend(found)
        else:
            out.append(loc)
    return out


def open_decompressed(stream: IO[bytes], name: str) -> IO[bytes]:
    """``stream`` decompressed according to the suffix of ``name`` (``.gz``, ``.zst``, or as is)."""
    if fnmatch.fnmatch(name, "*.gz"):
        return gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[return-value]
    if fnmatch.fnmatch(name, "*.zst"):
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(stream, closefd=True)  # type: ignore[no-any-return,unused-ignore]
    return stream
