"""S3 connectors (extra ``assay[s3]``): :class:`S3Source`, :class:`S3Sink` and their settings.

>>> from assay.connectors.s3 import S3Source, S3Sink, S3Config
>>> S3Sink.dead_letter("s3://lake/scores/dt=2026-11-21").url
's3://lake/scores/dt=2026-11-21/_dead_letter/'

The modules split where the bytes live (:mod:`~assay.connectors.s3_client`), reading
(:mod:`~assay.connectors.s3_source`) and writing (:mod:`~assay.connectors.s3_sink`).
:data:`CONNECTOR` builds them from a run file's sections for the connector registry.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from assay.connectors.base import ConnectorConfig, Sink, Source
from assay.connectors.layout import DEAD_LETTER, DEAD_PREFIX, RESULTS_PREFIX
from assay.connectors.ledger import merge_ledger_states
from assay.connectors.path_config import DeadLetterConfig, SinkConfig, SourceConfig
from assay.connectors.registry import BaseConnector
from assay.connectors.s3_client import S3Config, S3Url, is_s3_url, parse_s3_url, s3_config
from assay.connectors.s3_sink import S3Sink
from assay.connectors.s3_source import S3Source

__all__ = [
    "CONNECTOR",
    "S3Config",
    "S3Connector",
    "S3Sink",
    "S3Source",
    "S3Url",
    "is_s3_url",
    "parse_s3_url",
    "s3_config",
]


class S3Connector(BaseConnector):
    """``s3://`` sources and sinks for the connector registry (``build_source(config, ctx)`` /
    ``build_sink(config, ctx)``; ``ctx`` carries batch size, shard, resume state, the ``s3:``
    options and, for sinks, the role and ``reset_only_shard``). An ``s3://`` path selects it."""

    source_config = SourceConfig
    sink_config = SinkConfig
    dead_letter_config = DeadLetterConfig
    schemes = ("s3",)

    def default_dead_letter(self, config: Any) -> ConnectorConfig | None:
        """``_dead_letter/`` under the results prefix; beside one ``.parquet`` object,
        ``_dead_letter/<its name without .parquet>/`` in its folder."""
        path = str(config.path)
        if path.endswith(".parquet"):
            folder, _, name = path.rpartition("/")
            return DeadLetterConfig(type="s3", path=f"{folder}/{DEAD_LETTER}/{name.removesuffix('.parquet')}/")
        return DeadLetterConfig(type="s3", path=f"{path.rstrip('/')}/{DEAD_LETTER}/")

    def results_fs(self, location: str, s3: Any) -> Any:
        """The results prefix through its own S3 client (closed by ``close()``)."""
        from assay.connectors.s3_results import S3ResultsFS

        return S3ResultsFS(location, s3)

    def merge_resume_states(self, states: Iterable[Any]) -> Any:
        """The union of the writers' object ledgers."""
        return merge_ledger_states(states)

    def build_source(self, config: Any, ctx: Any) -> Source:
        from assay.connectors.builtin import parquet_source

        parquet = parquet_source(config, ctx)
        if parquet is not None:
            return parquet
        if getattr(config, "input_format", "auto") == "auto" and getattr(config, "read_mode", "records") == "records":
            from assay.connectors.parquet_detect import DetectedSource

            # a prefix or an object without a telling suffix: Parquet or JSON is decided at open()
            return DetectedSource(config, ctx, json_source=lambda: self._json_source(config, ctx))
        return self._json_source(config, ctx)

    def _json_source(self, config: Any, ctx: Any) -> Source:
        from assay.connectors.builtin import export_memory

        paths = config.paths if hasattr(config, "paths") else [config.path]
        sessions = getattr(config, "read_mode", "records") == "sessions"
        source = S3Source(
            paths,
            s3=s3_config(getattr(ctx, "options", None)),
            batch_size=ctx.batch_size,
            input_format=getattr(config, "input_format", "auto"),
            shard=None if sessions else ctx.shard,
            resume_state=ctx.resume_state,
        )
        if sessions:  # session grouping works over any source
            from assay.connectors.sessions import GroupSessions

            return GroupSessions(source, shard=ctx.shard, spill_bytes=export_memory(config))
        from assay.connectors.exports import AssembleExports

        # objects are sharded whole: unsharded, a trace is grouped across them
        return AssembleExports(source, spill_bytes=export_memory(config))

    def build_sink(self, config: Any, ctx: Any) -> Sink:
        from assay.connectors.builtin import is_parquet_sink, parquet_sink

        results = getattr(ctx, "role", "results") == "results"
        if results and is_parquet_sink(config):
            return parquet_sink(config, ctx)
        return S3Sink(
            config.path,
            s3=s3_config(getattr(ctx, "options", None)),
            prefix=RESULTS_PREFIX if results else DEAD_PREFIX,
            shard=ctx.shard,
            compression=getattr(config, "compression", "auto") if results else "none",
            max_rows_per_part=getattr(config, "max_rows_per_part", None) if results else None,
            resume_state=ctx.resume_state,
            markers=results,
            start_over_scope="shard" if getattr(ctx, "reset_only_shard", False) else "prefix",
            staged=getattr(ctx, "staged", False),
        )


CONNECTOR = S3Connector()
"""The registry entry: ``"s3": "assay.connectors.s3:CONNECTOR"``."""
