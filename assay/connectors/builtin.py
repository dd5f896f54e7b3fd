"""The built-in connectors: how a run file's section becomes a source or a sink."""

from __future__ import annotations

from typing import Any

from assay.connectors.base import Sink, Source
from assay.connectors.registry import SinkContext, SourceContext


class FileConnector:
    """Local files, directories, globs and stdin; sinks are directories of parts or one file."""

    def build_source(self, config: Any, ctx: SourceContext) -> Source:
        from assay.connectors.file_source import FileSource

        if config.read_mode == "sessions":
            from assay.stages.sessions import GroupSessions

            inner = FileSource(
                config.paths,
                batch_size=ctx.batch_size,
                input_format=config.input_format,
                resume_state=ctx.resume_state,
            )
            return GroupSessions(inner, shard=ctx.shard)
        return FileSource(
            config.paths,
            batch_size=ctx.batch_size,
            input_format=config.input_format,
            shard=ctx.shard,
            resume_state=ctx.resume_state,
        )

    def build_sink(self, config: Any, ctx: SinkContext) -> Sink:
        from assay.connectors.file_sink import LocalSink

        results = ctx.role == "results"
        sink = LocalSink(
            config.path,
            prefix="part" if results else "dead",
            shard=ctx.shard,
            compression=getattr(config, "compression", None) if results else None,
            max_rows_per_part=getattr(config, "max_rows_per_part", None) if results else None,
            resume_state=ctx.resume_state,
            marker=results,
        )
        sink.reset_only_shard = ctx.reset_only_shard
        return sink


FILE = FileConnector()
