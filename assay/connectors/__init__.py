"""Connectors: sources and sinks (files now; Kafka and S3 are planned)."""

from assay.connectors.base import Sink, Source
from assay.connectors.file import FileSource, JsonlSink, expand_paths

__all__ = ["FileSource", "JsonlSink", "Sink", "Source", "expand_paths"]
