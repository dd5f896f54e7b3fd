"""One place builds connectors: ``{type: …}`` → source and sink classes, lazily imported, plus the
entry-point group ``assay.connectors`` for third parties (like evaluators and formats).

A connector entry is a ``"module:attr"`` string naming a :class:`Connector`: an object with
``build_source(config, ctx)`` and ``build_sink(config, ctx)`` and the models of its run-file
sections (``source_config``, ``sink_config``, optionally ``dead_letter_config``: subclasses of
:class:`~assay.connectors.base.ConnectorConfig`). A connector also owns its defaults and names
(:class:`BaseConnector` has the defaults a connector may override): the identity of a sink (its
checkpoint key), the dead-letter output beside its results, where its summary lies on local disk,
how the resume states of several writers merge, whether processes scale by a consumer group, and
the size of an input (``--workers auto``). The engine asks through this module's functions and
never reads a connector's fields. The built-in ones are ``file`` (local files, directories, globs,
stdin), ``s3`` (``s3://`` paths select it without a ``type``), ``kafka``, ``delta``, and the
platform API sources ``langsmith``, ``langfuse`` and ``phoenix`` (:mod:`assay.connectors.api_source`).
The table of types and the validation of a section by its connector's model are
:mod:`assay.connector_table`, below the run file's models that use them; this module re-exports
them. Used by ``run``,
``score``, ``--dry-run`` and ``report``.

>>> from assay.connectors.registry import connector_types
>>> sorted(connector_types())[:3]
['delta', 'file', 'kafka']
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

from assay.connector_table import (
    BUILTIN_CONNECTORS,
    EXTRAS,
    ConnectorConfig,
    clear_cache,
    config_model,
    connector_types,
    default_type,
    load_connector,
    parse_section,
)
from assay.connectors.base import Sink, Source
from assay.exceptions import ConfigError, ConnectorError
from assay.paths import safe_join

#: a sink's start-over state: a writer that restores nothing and deletes nothing of other writers
EMPTY_SINK_STATE: dict[str, Any] = {"parts": [], "seq": 0, "current": None}

PUBLISHER = 99_999
"""The writer number of the sink object the engine opens to publish (never one that writes parts)."""


@dataclass(frozen=True, slots=True)
class SourceContext:
    """What the engine hands a source besides its own config."""

    batch_size: int = 256
    shard: tuple[int, int] | None = None
    resume_state: Any = None
    options: Any = None
    """Run-level connector options (the run file's ``s3:`` block)."""
    reads_text: bool = True
    """False: no evaluator reads message text; a columnar source may skip those columns."""
    reads_call_ids: bool = True
    """False: no evaluator reads tool-call ids; a columnar source may skip those columns."""
    reads_args: bool = True
    """False: no evaluator compares tool-call arguments; a columnar source may skip them."""
    owns_input: bool = False
    """The processes of this run own their share of the input outright (the run writes files or
    S3, which one run owns at a time): a source split by a consumer group takes a fixed share
    instead (``shard``; no rebalances among the run's own writers), and its ``resume_state``, saved
    with the rows it covers, says where reading resumes."""


@dataclass(frozen=True, slots=True)
class SinkContext:
    """What the engine hands a sink: its role, its writer number and its resume state
    (``None``: start over, removing earlier outputs)."""

    role: str = "results"  # results | dead_letter
    shard: int = 0
    resume_state: Any = None
    options: Any = None
    reset_only_shard: bool = False
    staged: bool = False
    """Write into the sink's staging area; ``publish(success=True)`` swaps it in (a run that
    started over while a whole output was published: a failure leaves that output in place)."""
    state_dir: str = ".assay"
    """The run's state dir: where a sink that builds its output at publish (Parquet on S3) stages
    rows on local disk."""


class Connector(Protocol):
    """What a connector must have; the hooks of :class:`BaseConnector` are optional."""

    def build_source(self, config: Any, ctx: SourceContext) -> Source: ...

    def build_sink(self, config: Any, ctx: SinkContext) -> Sink: ...


class BaseConnector:
    """The defaults of a connector's hooks (a connector may subclass this, or define only what it
    needs: the registry falls back to these for a hook it lacks)."""

    source_config: type[ConnectorConfig] | None = None
    """The model of a ``source:`` section of this type (None: no source)."""
    sink_config: type[ConnectorConfig] | None = None
    """The model of a ``sink:`` section (None: no sink)."""
    dead_letter_config: type[ConnectorConfig] | None = None
    """The model of a ``dead_letter:`` section (default: ``sink_config``)."""
    schemes: tuple[str, ...] = ()
    """URL schemes whose ``path`` selects this connector without a ``type`` (``s3``)."""

    def build_source(self, config: Any, ctx: SourceContext) -> Source:
        raise ConfigError(f"connector {config.type!r} has no source")

    def build_sink(self, config: Any, ctx: SinkContext) -> Sink:
        raise ConfigError(f"connector {config.type!r} has no sink")

    def sink_identity(self, config: Any) -> str:
        """What tells this sink from every other (the checkpoint key is made from it): its
        ``path`` when it has one, else every field of its section (a table, a topic, a bucket),
        so two sinks without a path never share a checkpoint."""
        path = getattr(config, "path", None)
        if isinstance(path, str):
            return path
        fields = orjson.dumps(config.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS).decode()
        return f"{config.type}:{fields}"

    def checkpoint_scope(self, config: Any) -> str:
        """A part of the checkpoint key beside the sink's identity: runs that write the same sink
        but must never resume into each other (a Delta table's days)."""
        return ""

    def default_dead_letter(self, config: Any) -> ConnectorConfig | None:
        """The dead-letter section beside these results; None: a directory under ``state_dir``."""
        return None

    def summary_path(self, config: Any) -> Path | None:
        """Where the summary of these results lies on local disk; None: not beside them."""
        return None

    def shard_merge(self, config: Any, s3: Any) -> Any:
        """What ``assay merge`` does with these results beyond merging the shard summaries: an
        object with ``location`` (where the shard summaries are) and ``commit(shard summaries,
        merged summary)`` (publishes the shards' rows; returns what to add to the merged summary).
        None (the default): the shards' rows are the output already, beside their summaries."""
        return None

    def results_fs(self, location: str, s3: Any) -> Any:
        """The results under ``location`` (a URL of one of this connector's ``schemes``) that
        ``assay merge`` reads and writes: an object with ``list()``, ``read_bytes(name)``,
        ``write_bytes(name, data)`` (atomic), ``remove(name)`` and ``close()``
        (:class:`~assay.pipeline.merge.ResultsFS`). None (the default): not reachable for a merge."""
        return None

    def merge_resume_states(self, states: Iterable[Any]) -> Any:
        """One resume state from those of several writers of one run (a resume with another
        ``--workers``). The default knows nothing of the state's shape: equal states (or none)
        merge, different ones cannot."""
        found = [s for s in states if s is not None]
        if any(s != found[0] for s in found[1:]):
            raise ConnectorError("this source cannot resume with another number of writers; run with --fresh")
        return found[0] if found else None

    def restart_state(self, state: Any) -> Any:
        """The resume state a run starting over (``--fresh``, a changed run file) begins from,
        given the merged state of its interrupted attempts. None (the default): from the start, as
        a first run does. A source that cannot be read again from the start (Kafka: its records
        are committed) returns where the run began."""
        return None

    def rerun_state(self, config: Any) -> Any:
        """The resume state of a run that starts over beside a whole output an earlier run
        completed (the same command again, no ``--fresh``). None (the default): from the start. A
        source whose records are consumed (Kafka) continues where that output ends."""
        return None

    def joins_group(self, config: Any) -> bool:
        """Whether processes reading this source split it by joining one consumer group."""
        return False

    def appends_only(self, config: Any) -> bool:
        """Whether this sink only appends (several processes may write it side by side)."""
        return False

    def input_size(self, config: Any) -> int | None:
        """The input's size in bytes when cheap to know (``--workers auto``); None: unknown."""
        return None


_DEFAULTS = BaseConnector()


def get_connector(type_: str) -> Connector:
    """The connector registered under ``type_`` (:func:`assay.connector_table.load_connector`)."""
    connector: Connector = load_connector(type_)
    return connector


def build_source(config: Any, ctx: SourceContext) -> Source:
    """The source a run file's ``source:`` section describes."""
    return get_connector(config.type).build_source(config, ctx)


def build_sink(config: Any, ctx: SinkContext) -> Sink:
    """The sink a run file's ``sink:`` or ``dead_letter:`` section describes."""
    return get_connector(config.type).build_sink(config, ctx)


def _hook(config: Any, name: str) -> Any:
    """The connector's own ``name`` hook for ``config``, else the default one."""
    hook = getattr(get_connector(config.type), name, None)
    return hook if hook is not None else getattr(_DEFAULTS, name)


def sink_identity(config: ConnectorConfig) -> str:
    """What tells a sink from every other: its path, or all of its section (see :class:`BaseConnector`)."""
    return str(_hook(config, "sink_identity")(config))


def checkpoint_scope(config: ConnectorConfig) -> str:
    """What the sink's connector adds to its checkpoint key (see :class:`BaseConnector`)."""
    return str(_hook(config, "checkpoint_scope")(config))


def default_dead_letter(config: ConnectorConfig, state_dir: str | Path, key: str) -> ConnectorConfig:
    """The dead-letter section of results going to ``config``: the connector's default beside
    them, else a local directory ``<state_dir>/dead_letter/<key>/`` (``key``: the sink's)."""
    dead = _hook(config, "default_dead_letter")(config)
    if dead is not None:
        return dead  # type: ignore[no-any-return]
    from assay.connectors.path_config import DeadLetterConfig

    return DeadLetterConfig(path=safe_join(str(state_dir), "dead_letter", key + "/"))


def summary_path(config: ConnectorConfig) -> Path | None:
    """Where the summary of results going to ``config`` lies on local disk (None: not beside them)."""
    return _hook(config, "summary_path")(config)  # type: ignore[no-any-return]


def shard_merge(config: ConnectorConfig, s3: Any) -> Any:
    """How ``assay merge`` publishes the shards of this sink (None: only their summaries merge)."""
    return _hook(config, "shard_merge")(config, s3)


def results_fs(location: str, s3: Any) -> Any:
    """The results under a URL (``s3://bucket/prefix/``) that ``assay merge`` reads and writes,
    reached by the connector claiming its scheme (``s3``: the run file's ``s3:`` settings); None
    when no connector reaches it."""
    type_ = default_type({"path": location})
    hook = getattr(get_connector(type_), "results_fs", None) or _DEFAULTS.results_fs
    return hook(location, s3)


def merge_resume_states(config: ConnectorConfig, states: Iterable[Any]) -> Any:
    """The resume states of several writers reading ``config``, merged by its connector."""
    return _hook(config, "merge_resume_states")(states)


def restart_state(config: ConnectorConfig, states: Iterable[Any]) -> Any:
    """Where a run over ``config`` that starts over begins reading (see ``restart_state``)."""
    hook = getattr(get_connector(config.type), "restart_state", None)
    if hook is None or getattr(hook, "__func__", None) is BaseConnector.restart_state:
        return None  # from the start: no need to merge (a default merge refuses different states)
    found = [s for s in states if s is not None]
    return hook(_hook(config, "merge_resume_states")(found)) if found else None


def rerun_state(config: ConnectorConfig) -> Any:
    """Where a run over ``config`` starting over beside a whole output begins (see ``rerun_state``)."""
    return _hook(config, "rerun_state")(config)


def scales_by_group(source: ConnectorConfig, sinks: Iterable[ConnectorConfig]) -> bool:
    """Whether processes running this side by side share nothing but a consumer group: a source
    that joins its group, writing only to sinks that append."""
    return bool(_hook(source, "joins_group")(source)) and all(_hook(s, "appends_only")(s) for s in sinks)


def input_size(source: ConnectorConfig) -> int | None:
    """The size of a source's input in bytes, when its connector knows it cheaply."""
    return _hook(source, "input_size")(source)  # type: ignore[no-any-return]


__all__ = [
    "BUILTIN_CONNECTORS",
    "EMPTY_SINK_STATE",
    "EXTRAS",
    "PUBLISHER",
    "BaseConnector",
    "Connector",
    "ConnectorConfig",
    "SinkContext",
    "SourceContext",
    "build_sink",
    "build_source",
    "checkpoint_scope",
    "clear_cache",
    "config_model",
    "connector_types",
    "default_dead_letter",
    "default_type",
    "get_connector",
    "input_size",
    "merge_resume_states",
    "parse_section",
    "rerun_state",
    "restart_state",
    "results_fs",
    "scales_by_group",
    "shard_merge",
    "sink_identity",
    "summary_path",
]
