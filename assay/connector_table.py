"""The table of connectors by type, below everything that names one (the run file's models).

It maps the ``type:`` of a run file's ``source:`` / ``sink:`` / ``dead_letter:`` section to a
``"module:attr"`` string (built-in, or from the ``assay.connectors`` entry-point group) and loads
the connector on first use; it imports no connector module. A connector owns the models of its
sections (subclasses of :class:`ConnectorConfig`), so :func:`parse_section` validates a section
with the model of the connector its ``type`` names (from the path's scheme when it names none).
:mod:`assay.connectors.registry` is its typed face, with the hooks the engine asks a connector.

>>> sorted(connector_types())[:3]
['delta', 'file', 'kafka']
>>> parse_section({"path": "s3://lake/scores/"}, "sink").type
's3'
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from pydantic import BaseModel, ConfigDict

from assay.exceptions import ConfigError

#: Built-in connectors: ``type:`` -> ``"module:attr"`` (imported on first use).
BUILTIN_CONNECTORS: dict[str, str] = {
    "file": "assay.connectors.builtin:FILE",
    "s3": "assay.connectors.s3:CONNECTOR",
    "kafka": "assay.connectors.kafka:CONNECTOR",
    "delta": "assay.connectors.delta:CONNECTOR",
    "langsmith": "assay.connectors.langsmith_api:CONNECTOR",
    "langfuse": "assay.connectors.langfuse_api:CONNECTOR",
    "phoenix": "assay.connectors.phoenix_api:CONNECTOR",
}

#: the optional dependency each built-in connector needs, for the install hint
EXTRAS = {"s3": "assay[s3]", "kafka": "assay[kafka]", "delta": "assay[lake]"}


class ConnectorConfig(BaseModel):
    """The run-file section of one connector (``source:``, ``sink:``, ``dead_letter:``): ``type``
    names the connector, whose own frozen model (a subclass) validates the rest. The engine reads
    no field but ``type``; what a connector needs it finds in its own model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    """The connector (``file``, ``s3``, ``kafka``, or one registered under ``assay.connectors``)."""


@cache
def _entry_points() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group="assay.connectors")}


def clear_cache() -> None:
    """Forget the entry points read so far (a package installed since is found next time)."""
    _entry_points.cache_clear()


def connector_types() -> list[str]:
    return sorted({*BUILTIN_CONNECTORS, *_entry_points()})


def load_connector(type_: str) -> Any:
    """The connector object registered under ``type_`` (typed by
    :func:`assay.connectors.registry.get_connector`); ConfigError naming the known types, or the
    extra to install."""
    target = BUILTIN_CONNECTORS.get(type_) or _entry_points().get(type_)
    if target is None:
        raise ConfigError(f"unknown connector type {type_!r} (known: {', '.join(connector_types())})")
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        hint = f"; install {EXTRAS[type_]}" if type_ in EXTRAS else ""
        raise ConfigError(f"connector {type_!r} needs a missing dependency ({exc.name}){hint}") from exc


def default_type(section: Mapping[str, Any]) -> str:
    """The connector of a section without ``type``: the one claiming the scheme of its (first)
    ``path`` (``s3://`` → ``s3``), else ``file``."""
    path = section.get("path")
    first = path[0] if isinstance(path, list) and path else path
    if isinstance(first, str) and "://" in first:
        scheme = first.split("://", 1)[0]
        for name in connector_types():
            try:
                if scheme in getattr(load_connector(name), "schemes", ()):
                    return name
            except ConfigError:
                continue
    return "file"


def config_model(type_: str, role: str) -> type[ConnectorConfig]:
    """The model a ``role`` section (``source``, ``sink``, ``dead_letter``) of ``type_`` is
    validated with: the connector's own."""
    connector = load_connector(type_)
    model = getattr(connector, "dead_letter_config", None) if role == "dead_letter" else None
    model = model or getattr(connector, "source_config" if role == "source" else "sink_config", None)
    if model is None:
        raise ConfigError(f"connector {type_!r} has no {'source' if role == 'source' else 'sink'}")
    return model  # type: ignore[no-any-return]


def parse_section(raw: Any, role: str) -> ConnectorConfig:
    """A run file's ``source:``/``sink:``/``dead_letter:`` section, validated by its connector's
    model (a pydantic ValidationError names the keys; an unknown type is a ValueError)."""
    if isinstance(raw, ConnectorConfig):
        return raw
    if isinstance(raw, BaseModel):
        raw = raw.model_dump()
    if not isinstance(raw, Mapping):
        raise ValueError(f"expected a mapping, got {type(raw).__name__}")
    section = {**raw, "type": raw.get("type") or default_type(raw)}
    try:
        model = config_model(str(section["type"]), role)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return model.model_validate(section)
