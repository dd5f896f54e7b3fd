"""Connectors: sources and sinks for local files, S3 and Kafka, built through one registry
(:mod:`assay.connectors.registry`); the role contracts are in :mod:`assay.connectors.base`."""

from assay.connectors.base import Sink, Source, Watermarks
from assay.connectors.file import FileSource, LocalSink, expand_paths
from assay.connectors.registry import build_sink, build_source, connector_types

__all__ = [
    "FileSource",
    "LocalSink",
    "Sink",
    "Source",
    "Watermarks",
    "build_sink",
    "build_source",
    "connector_types",
    "expand_paths",
]
