"""One place builds push targets: ``{type: …}`` → a :class:`~assay.push.base.PushTarget` class,
lazily imported, plus the entry-point group ``assay.push`` for third parties.

>>> sorted(target_types())
['langfuse', 'langsmith', 'otel', 'phoenix']
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from pydantic import ValidationError

from assay.exceptions import ConfigError
from assay.push.base import PushParams, PushTarget

__all__ = ["BUILTIN_TARGETS", "build_target", "target_class", "target_types", "validate_push_spec"]

BUILTIN_TARGETS: dict[str, str] = {
    "langsmith": "assay.push.langsmith:LangSmithTarget",
    "langfuse": "assay.push.langfuse:LangfuseTarget",
    "phoenix": "assay.push.phoenix:PhoenixTarget",
    "otel": "assay.push.otel:OtelTarget",
}

#: the optional dependency a built-in target needs, for the install hint
EXTRAS = {"otel": "assay[push]"}


@cache
def _plugins() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group="assay.push")}


def target_types() -> list[str]:
    """Every target type: the built-in ones and those registered under ``assay.push``."""
    return sorted({*BUILTIN_TARGETS, *_plugins()})


def target_class(kind: str) -> type[PushTarget]:
    """The class of a target type (imported on first use)."""
    ref = BUILTIN_TARGETS.get(kind) or _plugins().get(kind)
    if ref is None:
        raise ConfigError(f"push: unknown type {kind!r} (known: {', '.join(target_types())})")
    module, _, attr = ref.partition(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        hint = f"; install {EXTRAS[kind]}" if kind in EXTRAS else ""
        raise ConfigError(f"push: type {kind!r} needs a missing module ({exc.name}){hint}") from exc
    if not (isinstance(cls, type) and issubclass(cls, PushTarget)):
        raise ConfigError(f"push: {ref} is not a PushTarget class")
    return cls


def validate_push_spec(spec: Mapping[str, Any], where: str = "push") -> PushParams:
    """A run file's ``push:`` entry validated by its target's own params model."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("type"), str):
        raise ConfigError(f"{where}: each entry needs a type ({', '.join(target_types())})")
    cls = target_class(spec["type"])
    try:
        return cls.params_model.model_validate(dict(spec))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{where}.{loc}: {first['msg']}") from exc


def build_target(spec: Mapping[str, Any], env: Mapping[str, str] | None = None) -> PushTarget:
    """A target, ready to send (no I/O here)."""
    params = validate_push_spec(spec)
    return target_class(params.type)(params, env)
