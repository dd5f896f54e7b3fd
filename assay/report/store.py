"""Where a run's results live: a small read-only interface over a results location.

A results location is what the file/directory sink writes: ``part-*.jsonl[.gz|.zst]`` rows,
``_dead_letter/dead-*.jsonl`` failures, ``_SUMMARY.json`` and ``_SUCCESS``. The report reads it
through :class:`ResultStore` (list the files, open one as a byte stream), so that another place of
bytes (S3) plugs in with :func:`register_store` without touching the report::

    register_store("s3", lambda location: MyS3Store(location))

Compression is a separate concern: :func:`open_decompressed` wraps any opened stream by the
file's suffix (``.gz``, ``.zst``).
"""

from __future__ import annotations

import fnmatch
import glob
import gzip
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Protocol, runtime_checkable

from assay.exceptions import ConfigError, ConnectorError

__all__ = [
    "LocalStore",
    "ResultStore",
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
_FACTORIES: dict[str, StoreFactory] = {}


def register_store(scheme: str, factory: StoreFactory) -> None:
    """Make ``scheme://…`` locations readable through ``factory(location)`` (e.g. ``"s3"``)."""
    _FACTORIES[scheme] = factory


def open_store(location: str) -> ResultStore:
    """The store of ``location``: a registered scheme (``s3://``), or a local directory."""
    scheme, sep, _ = location.partition("://")
    if sep:
        factory = _FACTORIES.get(scheme)
        if factory is None:
            raise ConfigError(f"report: no reader for {scheme}:// locations (known: {sorted(_FACTORIES) or 'none'})")
        return factory(location)
    if not os.path.isdir(location):
        raise ConfigError(f"report: {location!r} is not a results directory")
    return LocalStore(location)


def expand_locations(locations: list[str]) -> list[str]:
    """Expand local glob patterns (``results/dt=*``) into the matching directories, in order given.

    Remote locations pass through unchanged (a registered store may expand them itself)."""
    out: list[str] = []
    for loc in locations:
        if "://" not in loc and glob.has_magic(loc):
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
