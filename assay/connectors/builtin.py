"""The built-in connectors: how a run file's section becomes a source or a sink."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from assay.connectors.base import ConnectorConfig, Sink, Source
from assay.connectors.layout import DEAD_LETTER, DEAD_PREFIX, RESULTS_PREFIX, SUMMARY, summary_beside
from assay.connectors.ledger import merge_ledger_states
from assay.connectors.path_config import DeadLetterConfig, SinkConfig, SourceConfig
from assay.connectors.registry import BaseConnector, SinkContext, SourceContext
from assay.exceptions import AssayError, ConfigError


def parquet_source(config: Any, ctx: SourceContext) -> Source | None:
    """The Parquet source when the section names Parquet inputs (``input_format: parquet``, a
    ``.parquet`` suffix, the ``PAR1`` magic); None otherwise. Needs the ``lake`` extra."""
    fmt = getattr(config, "input_format", "auto")
    if fmt not in ("auto", "parquet"):
        return None
    paths = config.paths
    if fmt == "auto":
        if all(p.startswith("s3://") for p in paths):
            if not all(p.lower().endswith((".parquet", ".pq", ".parq")) for p in paths):
                return None
        elif not _local_parquet(paths):
            return None
    return make_parquet_source(config, ctx)


def export_memory(config: Any) -> int:
    """The ``export_memory_bytes`` of a ``source:`` section (the default for a model without it)."""
    from assay.traces.row_groups import DEFAULT_SPILL_BYTES

    return int(getattr(config, "export_memory_bytes", DEFAULT_SPILL_BYTES))


def make_parquet_source(config: Any, ctx: SourceContext) -> Source:
    """The Parquet source of a ``source:`` section (exports assembled), without detection."""
    paths = config.paths
    try:
        from assay.connectors.parquet_source import ParquetSource
    except ImportError as exc:
        raise ConfigError(f"source: Parquet input needs pyarrow ({exc.name}); install assay[lake]") from exc
    if getattr(config, "read_mode", "records") != "records":
        raise ConfigError("source.read_mode: sessions is not supported for Parquet inputs")
    from assay.connectors.exports import AssembleExports

    source = ParquetSource(
        paths,
        batch_size=ctx.batch_size,
        shard=ctx.shard,
        resume_state=ctx.resume_state,
        s3=s3_options(ctx.options),
        skip_text=not getattr(ctx, "reads_text", True),
        skip_call_ids=not getattr(ctx, "reads_call_ids", True),
        skip_args=not getattr(ctx, "reads_args", True),
    )
    # LangSmith / Langfuse exports: one record per trace id
    return AssembleExports(source, across_shard=ctx.shard, spill_bytes=export_memory(config))


def _local_parquet(paths: list[str]) -> bool:
    """Local paths that name Parquet files (by suffix or magic; no pyarrow needed to tell)."""
    import glob
    import os
    from pathlib import Path

    suffixes = (".parquet", ".pq", ".parq")

    def parquet(f: str) -> bool:
        if f.lower().endswith(suffixes):
            return True
        try:
            with open(f, "rb") as fh:
                return fh.read(4) == b"PAR1"
        except OSError:
            return False

    for p in paths:
        if p == "-" or p.startswith("s3://"):
            return False
        if any(ch in p for ch in "*?["):
            files = [m for m in glob.glob(p, recursive=True) if os.path.isfile(m)]
            if files and all(parquet(f) for f in files):
                return True
        elif os.path.isdir(p):
            if any(f.name.lower().endswith(suffixes) for f in Path(p).rglob("*") if f.is_file()):
                return True
        elif os.path.isfile(p) and parquet(p):
            return True
    return False


def is_parquet_sink(config: Any) -> bool:
    """A sink section that asks for Parquet rows (``format: parquet`` or a ``.parquet`` path)."""
    fmt = getattr(config, "format", None)
    path = getattr(config, "path", "")
    return fmt == "parquet" or (fmt is None and isinstance(path, str) and path.endswith(".parquet"))


def parquet_sink(config: Any, ctx: SinkContext) -> Sink:
    """The Parquet sink of a ``sink:`` section (results only: dead letters stay JSON lines). An
    ``s3://`` path gets the same output, staged under the run's ``state_dir`` and uploaded when the
    run publishes (:mod:`~assay.connectors.s3_parquet`)."""
    if getattr(config, "compression", "auto") not in ("auto", "none"):
        raise ConfigError("sink.compression: Parquet parts are zstd-compressed inside; leave compression unset")
    try:
        from assay.connectors.parquet_sink import ParquetSink
    except ImportError as exc:
        raise ConfigError(f"sink: Parquet output needs pyarrow ({exc.name}); install assay[lake]") from exc
    path = str(config.path)
    remote = path.startswith("s3://")
    if remote:
        from assay.connectors.s3_parquet import S3ParquetSink, staging_path

    sink = ParquetSink(
        staging_path(path, ctx.state_dir) if remote else path,
        shard=ctx.shard,
        max_rows_per_part=getattr(config, "max_rows_per_part", None),
        resume_state=ctx.resume_state,
        layout=getattr(config, "layout", "wide"),
        ds=getattr(config, "ds", None),
        reset_only_shard=ctx.reset_only_shard,
    )
    return S3ParquetSink(path, sink, s3=s3_options(ctx.options)) if remote else sink


def s3_options(options: Any) -> Any:
    """The run file's ``s3:`` block as an ``S3Config`` (None or an ``S3Config`` as they are)."""
    if options is None or not isinstance(options, dict):
        return options
    from assay.connectors.s3_client import S3Config

    return S3Config.model_validate(options)


def beside_results(config: Any) -> DeadLetterConfig:
    """The dead letters of a path sink: ``_dead_letter/`` inside a directory (local or S3), or
    ``<name>.dead_letter.jsonl`` next to a file."""
    from assay.connectors.file_sink import is_directory_target

    path = str(config.path)
    if path.startswith("s3://") or is_directory_target(path):
        return DeadLetterConfig(type=config.type, path=f"{path.rstrip('/')}/{DEAD_LETTER}/")
    p = Path(path)
    stem = p.name.split(".")[0]
    return DeadLetterConfig(path=str(p.with_name(f"{stem}.dead_letter.jsonl")))


class FileConnector(BaseConnector):
    """Local files, directories, globs and stdin; sinks are directories of parts or one file."""

    source_config = SourceConfig
    sink_config = SinkConfig
    dead_letter_config = DeadLetterConfig

    def default_dead_letter(self, config: Any) -> ConnectorConfig | None:
        return beside_results(config)

    def summary_path(self, config: Any) -> Path | None:
        """``_SUMMARY.json`` in a directory's parts, ``out.jsonl._SUMMARY.json`` beside a file."""
        from assay.connectors.file_sink import is_directory_target

        path = str(config.path)
        return Path(path) / SUMMARY if is_directory_target(path) else Path(summary_beside(path))

    def merge_resume_states(self, states: Iterable[Any]) -> Any:
        """The union of the writers' completed-positions ledgers."""
        return merge_ledger_states(states)

    def input_size(self, config: Any) -> int | None:
        """The bytes of every input file (None for stdin or when a path cannot be listed)."""
        from assay.connectors.local import expand_paths

        if any(p == "-" for p in config.paths):
            return None
        try:
            return sum(os.path.getsize(f) for f in expand_paths(config.paths))
        except (AssayError, OSError):
            return None

    def build_source(self, config: Any, ctx: SourceContext) -> Source:
        from assay.connectors.file_source import FileSource

        parquet = parquet_source(config, ctx)
        if parquet is not None:
            return parquet
        if config.read_mode == "sessions":
            from assay.connectors.sessions import GroupSessions

            inner = FileSource(
                config.paths,
                batch_size=ctx.batch_size,
                input_format=config.input_format,
                resume_state=ctx.resume_state,
            )
            return GroupSessions(inner, shard=ctx.shard, spill_bytes=export_memory(config))
        from assay.connectors.exports import AssembleExports

        source = FileSource(
            config.paths,
            batch_size=ctx.batch_size,
            input_format=config.input_format,
            shard=ctx.shard,
            resume_state=ctx.resume_state,
        )
        # LangSmith / Langfuse exports: one record per trace id
        return AssembleExports(source, across_shard=ctx.shard, spill_bytes=export_memory(config))

    def build_sink(self, config: Any, ctx: SinkContext) -> Sink:
        from assay.connectors.file_sink import LocalSink

        results = ctx.role == "results"
        if results and is_parquet_sink(config):
            return parquet_sink(config, ctx)
        sink = LocalSink(
            config.path,
            prefix=RESULTS_PREFIX if results else DEAD_PREFIX,
            shard=ctx.shard,
            compression=getattr(config, "compression", None) if results else None,
            max_rows_per_part=getattr(config, "max_rows_per_part", None) if results else None,
            resume_state=ctx.resume_state,
            marker=results,
            create_empty=results,  # an output with no dead letters has no dead-letter file
            staged=getattr(ctx, "staged", False),
        )
        sink.reset_only_shard = ctx.reset_only_shard
        return sink


FILE = FileConnector()
