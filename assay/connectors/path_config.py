"""The run-file models of the path connectors, ``file`` and ``s3`` (a ``path`` that is a local
file, directory, glob, ``-`` or an ``s3://`` URL), owned by the connectors that read them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from assay.connectors.base import ConnectorConfig
from assay.paths import check_ds
from assay.traces.row_groups import DEFAULT_SPILL_BYTES


class SourceConfig(ConnectorConfig):
    """Where traces come from: local files (``type: file``) or S3 (``type: s3``, selected by
    ``s3://`` paths)."""

    type: Literal["file", "s3"] = "file"
    """Connector type (default from the path)."""
    path: str | list[str]
    """File(s), directories, globs, ``-`` for stdin, or ``s3://bucket/prefix/`` (an object, a
    prefix or a glob). Compression (gzip, zstd) is detected."""
    input_format: Literal["auto", "jsonl", "json", "json_trace", "parquet"] = "auto"
    """``auto``: from the content: Parquet for ``.parquet`` files (or files starting with ``PAR1``,
    docs/lake.md), JSON lines, or JSON documents and arrays (an array whose elements are all chat
    messages, LangChain messages or Responses items is ONE trace); ``json``: one record per array
    element; ``json_trace``: the whole file is one trace."""
    read_mode: Literal["records", "sessions"] = "records"
    """``records``: one trace per line/element. ``sessions``: agent session transcripts (Claude Code,
    Agent SDK streams) where one trace spans many lines, grouped by session id, and span-per-record
    OTel exports (``ConsoleSpanExporter``), grouped by trace id (docs/formats.md, otel)."""
    export_memory_bytes: int = Field(DEFAULT_SPILL_BYTES, ge=0)
    """LangSmith / Langfuse exports (many rows per trace): bytes of rows held in memory while they
    are grouped by trace id; past it, the rows are sorted by trace id into runs in the system temp
    directory and merged when the source ends (docs/formats.md, multi-row exports)."""

    @property
    def paths(self) -> list[str]:
        return [self.path] if isinstance(self.path, str) else list(self.path)


class SinkConfig(ConnectorConfig):
    """Where result rows go: local files (``type: file``) or S3 (``s3://`` paths)."""

    type: Literal["file", "s3"] = "file"
    path: str
    """A file (``out.jsonl[.gz|.zst]``) or a directory (``out/``: parts, ``_SUMMARY.json``, ``_SUCCESS``)."""
    compression: Literal["auto", "none", "gzip", "zstd"] = "auto"
    """``auto`` follows the file suffix (directories: none)."""
    max_rows_per_part: int | None = Field(default=None, gt=0)
    """Directory output: start a new part file after this many rows."""
    format: Literal["jsonl", "parquet"] | None = None
    """Row encoding: ``jsonl``, or ``parquet`` (extra ``assay[lake]``; a ``.parquet`` path implies it;
    the schema is in docs/lake.md). Default: from the path (``jsonl``)."""
    layout: Literal["wide", "long"] = "wide"
    """Parquet rows: ``wide`` (one row per trace, one struct column per result key) or ``long`` (one
    row per trace and result key)."""
    ds: str | None = None
    """The ``ds`` column of Parquet rows (default: the run's ``--ds``): a day, ``YYYY-MM-DD``."""

    @field_validator("ds")
    @classmethod
    def _day(cls, v: str | None) -> str | None:
        return check_ds(v)


class DeadLetterConfig(ConnectorConfig):
    """Where records that could not be parsed, normalized or evaluated go."""

    type: Literal["file", "s3"] = "file"
    path: str
    """A JSONL file or a directory."""


__all__ = ["DeadLetterConfig", "SinkConfig", "SourceConfig", "check_ds"]
