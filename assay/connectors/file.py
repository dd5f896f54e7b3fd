"""Local files: the reading side lives in :mod:`assay.connectors.file_source` (with
:mod:`~assay.connectors.local`, :mod:`~assay.connectors.framing` and
:mod:`~assay.connectors.compression`), the writing side in :mod:`assay.connectors.file_sink`.
This module keeps the names importable from one place."""

from __future__ import annotations

from assay.connectors.file_sink import LocalSink, compression_for, is_directory_target
from assay.connectors.file_source import FileSource
from assay.connectors.framing import CHUNK, iter_lines, line_chunks
from assay.connectors.local import INPUT_SUFFIXES, expand_paths

__all__ = [
    "CHUNK",
    "INPUT_SUFFIXES",
    "FileSource",
    "LocalSink",
    "compression_for",
    "expand_paths",
    "is_directory_target",
    "iter_lines",
    "line_chunks",
]
