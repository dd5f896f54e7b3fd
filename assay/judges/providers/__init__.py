"""The judge providers: one class per wire format, found by name in a lazy table.

Each provider is a :class:`~assay.judges.providers.base.JudgeProvider` subclass in a module of
its own; this table maps the ``provider:`` names of the run file to ``"module:Class"`` strings, so
a provider's module is imported only when a judge uses it. Third-party packages add providers
through the ``assay.judge_providers`` entry-point group (name = the ``provider:`` value, value =
``"module:Class"``), or at run time with :func:`register_provider`.

>>> provider_names()[:3]
['anthropic', 'azure_openai', 'google_genai']
>>> get_provider_class("ollama").__name__
'OllamaProvider'
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from assay.exceptions import ConfigError

if TYPE_CHECKING:
    from assay.judges.providers.base import JudgeProvider

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

_extra: dict[str, str | type[JudgeProvider]] = {}


def register_provider(name: str, target: str | type[JudgeProvider]) -> None:
    """Register a provider class (or a lazy ``"module:Class"`` string) under ``name``."""
    _extra[name] = target
    _table.cache_clear()
    get_provider_class.cache_clear()


@cache
def _table() -> dict[str, str | type[JudgeProvider]]:
    table: dict[str, str | type[JudgeProvider]] = dict(BUILTIN_PROVIDERS)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        table.setdefault(ep.name, ep.value)
    table.update(_extra)
    return table


def provider_names() -> list[str]:
    """Every known provider name (built-in, entry points, registered), sorted."""
    return sorted(_table())


@cache
def get_provider_class(name: str) -> type[JudgeProvider]:
    """The provider class registered under ``name``; ConfigError naming the known ones otherwise."""
    from assay.judges.providers.base import JudgeProvider

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
    if not (isinstance(cls, type) and issubclass(cls, JudgeProvider)):
        raise ConfigError(f"judge provider {name!r} ({target}) is not a JudgeProvider subclass")
    return cls


def clear_cache() -> None:
    """Forget the table (after installing a package with a new entry point, in tests)."""
    _table.cache_clear()
    get_provider_class.cache_clear()


__all__ = [
    "BUILTIN_PROVIDERS",
    "ENTRY_POINT_GROUP",
    "clear_cache",
    "get_provider_class",
    "provider_names",
    "register_provider",
]
