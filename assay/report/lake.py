"""Lake outputs for the report (extra ``assay[lake]``): a Parquet file sink's one file, and one day
of a Delta table.

* ``out.parquet`` (a file sink): one run, its summary ``out.parquet._SUMMARY.json`` beside it;
* ``lake/scores`` (a Delta table, found by its ``_delta_log/``): one run per day that has a
  summary (``_summaries/ds=D/``); ``lake/scores/ds=D`` names one day. A day's rows are read from
  the table's current version (never from the partition folder, which keeps the files of replaced
  versions), its summary and ``_SUCCESS`` from ``_summaries/ds=D/``.

Directories of ``part-*.parquet`` need nothing here: :func:`assay.report.load.iter_rows` reads
Parquet parts like JSON-lines parts. Rows come back in the engine's JSON row shape
(:func:`~assay.connectors.parquet_sink.read_parquet_rows`), so every report section works unchanged.
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from assay.connectors.layout import (
    DEAD_LETTER,
    DEAD_PREFIX,
    RESULTS_PREFIX,
    SUCCESS,
    SUMMARIES,
    SUMMARY,
    part_name,
    summary_beside,
)
from assay.exceptions import ConfigError, ConnectorError
from assay.paths import partition, safe_join

_DAY = re.compile(r"^(?P<table>.+?)/+ds=(?P<ds>[^/]+)/*$")


def is_delta_table(path: str) -> bool:
    """A local directory holding a Delta log."""
    return os.path.isdir(os.path.join(path, "_delta_log"))


def delta_days(table: str) -> list[str]:
    """The days of a Delta table written by assay (those with a summary), sorted."""
    root = Path(table) / SUMMARIES
    if not root.is_dir():
        return []
    return sorted(p.name.removeprefix("ds=") for p in root.iterdir() if p.name.startswith("ds=") and p.is_dir())


def delta_day_location(location: str) -> tuple[str, str] | None:
    """``(table, day)`` when ``location`` names one day of a local Delta table (``table/ds=D``)."""
    m = _DAY.match(location)
    if m and is_delta_table(m.group("table")):
        return m.group("table"), m.group("ds")
    return None


def expand_lake(location: str) -> list[str] | None:
    """A Delta table → one location per day (``table/ds=D``); None when not a Delta table."""
    if is_delta_table(location):
        days = delta_days(location)
        if not days:
            raise ConfigError(f"report: Delta table {location!r} has no days written by assay (_summaries/ds=*)")
        return [f"{location.rstrip('/')}/ds={d}" for d in days]
    return None


class ParquetFileStore:
    """One Parquet output file seen as a results location: its summary and its dead letters
    (``out.dead_letter.jsonl``) beside it. A file target has no ``_SUCCESS``: the file is replaced
    only by a run whose output is whole, so the output is whole when the file exists and its
    summary's status says so (a failed rerun leaves the last whole file, and its own summary)."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.path = Path(location)

    def _files(self) -> dict[str, Path]:
        stem = self.path.name.removesuffix(".parquet")
        return {
            part_name(RESULTS_PREFIX, 0, 0, ".parquet"): self.path,
            SUMMARY: Path(summary_beside(str(self.path))),
            f"{DEAD_LETTER}/{part_name(DEAD_PREFIX, 0, 0, '.jsonl')}": self.path.with_name(f"{stem}.dead_letter.jsonl"),
        }

    def _whole(self) -> bool:
        from assay.pipeline.verdict import WHOLE_STATUSES

        summary = self._files()[SUMMARY]
        if not (self.path.is_file() and summary.is_file()):
            return False
        try:
            status = json.loads(summary.read_bytes()).get("status")
        except (OSError, ValueError, AttributeError):
            return False
        return status in WHOLE_STATUSES

    def list(self, pattern: str) -> list[str]:
        import fnmatch

        return sorted(n for n, p in self._files().items() if fnmatch.fnmatch(n, pattern) and p.is_file())

    def open(self, name: str) -> IO[bytes]:
        try:
            return open(self._files()[name], "rb")
        except (KeyError, OSError) as exc:
            raise ConnectorError(f"cannot open {name} of {self.location}: {exc}") from exc

    def exists(self, name: str) -> bool:
        if name == SUCCESS:
            return self._whole()
        p = self._files().get(name)
        return p is not None and p.is_file()


class DeltaDayStore:
    """One day of a local Delta table as a results location (see the module docs)."""

    def __init__(self, location: str, table: str, day: str) -> None:
        self.location = location
        self.table = table
        self.day = day
        self.folder = safe_join(Path(table), SUMMARIES, partition("ds", day))

    def list(self, pattern: str) -> list[str]:
        import fnmatch

        names = [p.name for p in self.folder.glob("*") if p.is_file()] if self.folder.is_dir() else []
        dead = safe_join(Path(self.table), DEAD_LETTER, partition("ds", self.day))
        if dead.is_dir():
            names += [f"{DEAD_LETTER}/{p.name}" for p in dead.iterdir() if p.is_file()]
        return sorted(n for n in names if fnmatch.fnmatch(n, pattern))

    def _path(self, name: str) -> Path:
        if name.startswith(f"{DEAD_LETTER}/"):
            return safe_join(Path(self.table), DEAD_LETTER, partition("ds", self.day), name.split("/", 1)[1])
        return safe_join(self.folder, name)

    def open(self, name: str) -> IO[bytes]:
        try:
            return open(self._path(name), "rb")
        except OSError as exc:
            raise ConnectorError(f"cannot open {name} of {self.location}: {exc}") from exc

    def exists(self, name: str) -> bool:
        return self._path(name).is_file()

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        """The day's rows from the table's current version, in the engine's row shape."""
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        from assay.connectors.parquet_sink import rows_of_batches

        dataset = DeltaTable(self.table).to_pyarrow_dataset()
        long = "key" in dataset.schema.names and "score" in dataset.schema.names
        yield from rows_of_batches(dataset.to_batches(filter=pc.field("ds") == self.day), long)


def open_lake_store(location: str) -> Any | None:
    """The store of a lake location (a ``.parquet`` file, a Delta day), or None."""
    if location.endswith(".parquet") and os.path.isfile(location):
        return ParquetFileStore(location)
    day = delta_day_location(location)
    if day is not None:
        return DeltaDayStore(location, *day)
    return None


def iter_parquet_part(raw: IO[bytes]) -> Iterator[dict[str, Any]]:
    """The rows of an opened Parquet part (a local file, or the bytes of an S3 object)."""
    from assay.connectors.parquet_sink import read_parquet_rows

    source: Any = raw if raw.seekable() else io.BytesIO(raw.read())
    yield from read_parquet_rows(source)


__all__ = [
    "DeltaDayStore",
    "ParquetFileStore",
    "delta_day_location",
    "delta_days",
    "expand_lake",
    "is_delta_table",
    "iter_parquet_part",
    "open_lake_store",
]
