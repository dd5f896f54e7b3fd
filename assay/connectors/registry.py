"""One place builds connectors: ``{type: …}`` → source and sink classes, lazily imported, plus the
entry-point group ``assay.connectors`` for third parties (like evaluators and formats).

A connector entry is a ``"module:attr"`` string naming a :class:`Connector`: an object with
``build_source(config, ctx)`` and ``build_sink(config, ctx)``. The built-in ones are ``file``
(local files, directories, globs, stdin), ``s3`` (``s3://`` paths select it without a ``type``)
and ``kafka``. Used by ``run``, ``score``, ``--dry-run`` and ``report``.

>>> from assay.connectors.registry import connector_types
>>> sorted(connector_types())[:3]
['file', 'kafka', 's3']
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from typing import Any, Protocol

from assay.connectors.base import Sink, Source
from assay.exceptions import ConfigError

BUILTIN_CONNECTORS: dict[str, str] = {
    "file": "assay.connectors.builtin:FILE",
    "s3": "assay.connectors.s3:CONNECTOR",
    "kafka": "assay.connectors.kafka:CONNECTOR",
}

#: the optional dependency each built-in connector needs, for the install hint
EXTRAS = {"s3": "assay[s3]", "kafka": "assay[kafka]"}

#: a sink's start-over state: a writer that restores nothing and deletes nothing of other writers
EMPTY_SINK_STATE: dict[str, Any] = {"parts": [], "seq": 0, "current": None}


@dataclass(frozen=True, slots=True)
class SourceContext:
    """What the engine hands a source besides its own config."""

    batch_size: int = 256
    shard: tuple[int, int] | None = None
    resume_state: Any = None
    options: Any = None
    """Run-level connector options (the run file's ``s3:`` block)."""


@dataclass(frozen=True, slots=True)
class SinkContext:
    """What the engine hands a sink: its role, its writer number and its resume state
    (``None``: start over, removing earlier outputs)."""

    role: str = "results"  # results | dead_letter
    shard: int = 0
    resume_state: Any = None
    options: Any = None
    reset_only_shard: bool = False


class Connector(Protocol):
    def build_source(self, config: Any, ctx: SourceContext) -> Source: ...

    def build_sink(self, config: Any, ctx: SinkContext) -> Sink: ...


@cache
def _entry_points() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group="assay.connectors")}


def connector_types() -> list[str]:
    return sorted({*BUILTIN_CONNECTORS, *_entry_points()})


def get_connector(type_: str) -> Connector:
    target = BUILTIN_CONNECTORS.get(type_) or _entry_points().get(type_)
    if target is None:
        raise ConfigError(f"unknown connector type {type_!r} (known: {', '.join(connector_types())})")
    module, _, attr = target.partition(":")
    try:
        obj: Connector = getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        hint = f"; install {EXTRAS[type_]}" if type_ in EXTRAS else ""
        raise ConfigError(f"connector {type_!r} needs a missing dependency ({exc.name}){hint}") from exc
    return obj


def build_source(config: Any, ctx: SourceContext) -> Source:
    """The source a run file's ``source:`` section describes."""
    return get_connector(config.type).build_source(config, ctx)


def build_sink(config: Any, ctx: SinkContext) -> Sink:
    """The sink a run file's ``sink:`` or ``dead_letter:`` section describes."""
    return get_connector(config.type).build_sink(config, ctx)
