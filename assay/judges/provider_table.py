"""The table of judge providers by name, below everything that names a provider.

It maps the ``provider:`` names of the run file to ``"module:Class"`` strings (built-in, from the
``assay.judge_providers`` entry-point group, or registered at run time) and loads a class on first
use. It imports no provider module and neither :mod:`assay.judges.config` nor
:mod:`assay.judges.wire`, so both can look providers up without an import cycle (the providers
import them). :mod:`assay.judges.providers` is its typed face.

>>> provider_names()[:3]
['anthropic', 'azure_openai', 'google_genai']
>>> load_provider_class("ollama").__name__
'OllamaProvider'
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from assay.exceptions import ConfigError

#: The entry-point group third-party providers register under.
ENTRY_POINT_GROUP = "assay.judge_providers"

#: Built-in providers: ``provider:`` name -> ``"module:Class"`` (imported on first use).
BUILTIN_PROVIDERS: dict[str, str] = {
    "anthropic": "assay.judges.providers.anthropic:AnthropicProvider",
    "azure_openai": "assay.judges.providers.azure_openai:AzureOpenAIProvider",
    "google_genai": "assay.judges.providers.google_genai:GoogleGenAIProvider",
    "ollama": "assay.judges.providers.ollama:OllamaProvider",
    "openai": "assay.judges.providers.openai:OpenAIProvider",
}

#: Where the base class every provider derives from lives (a provider is checked against it by
#: name, so this table needs no import of the providers).
BASE_CLASS = ("assay.judges.providers.base", "JudgeProvider")

#: Providers registered at run time (:func:`register_provider`): name -> class or ``"module:Class"``.
_extra: dict[str, str | type[Any]] = {}


def register_provider(name: str, target: str | type[Any]) -> None:
    """Register a provider class (or a lazy ``"module:Class"`` string) under ``name``."""
    _extra[name] = target
    clear_cache()


@cache
def _table() -> dict[str, str | type[Any]]:
    table: dict[str, str | type[Any]] = dict(BUILTIN_PROVIDERS)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        table.setdefault(ep.name, ep.value)
    table.update(_extra)
    return table


def provider_names() -> list[str]:
    """Every known provider name (built-in, entry points, registered), sorted."""
    return sorted(_table())


def _is_provider_class(cls: object) -> bool:
    """``issubclass(cls, JudgeProvider)``, told by the classes ``cls`` derives from."""
    return isinstance(cls, type) and any((c.__module__, c.__qualname__) == BASE_CLASS for c in cls.__mro__)


@cache
def load_provider_class(name: str) -> type[Any]:
    """The provider class registered under ``name``; ConfigError naming the known ones otherwise."""
    table = _table()
    if name not in table:
        raise ConfigError(f"unknown judge provider {name!r}; available: {', '.join(provider_names())}")
    target = table[name]
    if isinstance(target, str):
        module_name, _, attr = target.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"judge provider {name!r}: cannot load {target!r}: {exc}") from exc
    else:
        cls = target
    if not _is_provider_class(cls):
        raise ConfigError(f"judge provider {name!r} ({target}) is not a JudgeProvider subclass")
    return cls  # type: ignore[no-any-return]


def clear_cache() -> None:
    """Forget the table (after installing a package with a new entry point, in tests)."""
    _table.cache_clear()
    load_provider_class.cache_clear()


__all__ = [
    "BUILTIN_PROVIDERS",
    "ENTRY_POINT_GROUP",
    "clear_cache",
    "load_provider_class",
    "provider_names",
    "register_provider",
]
