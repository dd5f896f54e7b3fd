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

from typing import TYPE_CHECKING

from assay.judges.provider_table import (
    BUILTIN_PROVIDERS,
    ENTRY_POINT_GROUP,
    clear_cache,
    load_provider_class,
    provider_names,
    register_provider,
)
from assay.judges.provider_table import (
    _extra as _extra,  # (tests reset it)
)
from assay.judges.provider_table import (
    _table as _table,
)

if TYPE_CHECKING:
    from assay.judges.batch.api import BatchAPI
    from assay.judges.config import JudgeConfig
    from assay.judges.guard import Secrets
    from assay.judges.providers.base import JudgeProvider


def get_provider_class(name: str) -> type[JudgeProvider]:
    """The provider class registered under ``name``; ConfigError naming the known ones otherwise
    (the table is :mod:`assay.judges.provider_table`)."""
    return load_provider_class(name)


def provider_for(cfg: JudgeConfig) -> JudgeProvider:
    """The provider object of ``cfg`` (its class looked up by ``cfg.provider``)."""
    return get_provider_class(cfg.provider)(cfg)


def batcher_for(name: str, cfg: JudgeConfig, api_key: str | None, secrets: Secrets | None = None) -> BatchAPI:
    """The batch client of judge ``name`` (its provider makes it; ConfigError when it has none)."""
    return provider_for(cfg).batcher(name, api_key, secrets)


__all__ = [
    "BUILTIN_PROVIDERS",
    "ENTRY_POINT_GROUP",
    "batcher_for",
    "clear_cache",
    "get_provider_class",
    "provider_for",
    "provider_names",
    "register_provider",
]
