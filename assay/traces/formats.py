"""The table of trace formats: name -> lazy ``"module:attr"``, in auto-detection order.

Third-party formats register through the entry-point group ``assay.formats`` (appended to the
detection order, before the plain-value fallback).
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points

from assay.exceptions import ConfigError
from assay.traces.base import TraceFormat

#: Built-in formats in detection order. The most specific detectors come first; ``openai`` is
#: the common case and cheap; ``value`` (a plain output with no trajectory) is the fallback.
BUILTIN_FORMATS: dict[str, str] = {
    "claude_code": "assay.traces.claude_code:FORMAT",
    "openai_responses": "assay.traces.openai_responses:FORMAT",
    "anthropic": "assay.traces.anthropic:FORMAT",
    "langchain": "assay.traces.langchain:FORMAT",
    "langfuse": "assay.traces.langfuse:FORMAT",
    "openai": "assay.traces.openai_format:FORMAT",
    "gateway": "assay.traces.gateway:FORMAT",
    "langgraph": "assay.traces.langgraph:FORMAT",
    "langchain_agent": "assay.traces.agent_steps:FORMAT",
    "otel": "assay.traces.otel:FORMAT",
    "langsmith": "assay.traces.langsmith:FORMAT",
    "potato": "assay.traces.potato:FORMAT",
    "value": "assay.traces.openai_format:VALUE_FORMAT",
}

#: Formats whose detectors must run before ``openai``: their values also look like message
#: lists to it (Claude Code rows, LangChain dicts and Langfuse observations have a ``type``,
#: Responses items and Anthropic messages a ``role``). Each rejects an OpenAI message list
#: cheaply: a look at the first item, or (anthropic, openai_responses) one pass over the items.
EARLY_FORMATS: tuple[str, ...] = ("claude_code", "openai_responses", "anthropic", "langchain", "langfuse")


@cache
def load_format(name: str) -> TraceFormat:
    """The TraceFormat registered under ``name``."""
    table = all_format_names()
    if name not in table:
        raise ConfigError(f"unknown trace format {name!r}; known formats: {', '.join(sorted(table))}")
    target = table[name]
    module_name, _, attr = target.partition(":")
    fmt = getattr(importlib.import_module(module_name), attr)
    if not isinstance(fmt, TraceFormat):
        raise ConfigError(f"trace format {name!r} ({target}) is not a TraceFormat")
    return fmt


@cache
def all_format_names() -> dict[str, str]:
    table = dict(BUILTIN_FORMATS)
    for ep in entry_points(group="assay.formats"):
        table.setdefault(ep.name, ep.value)
    return table


@cache
def detection_order() -> tuple[TraceFormat, ...]:
    """Formats in the order auto-detection tries them."""
    names = list(all_format_names())
    names.remove("value")
    names.remove("openai")
    early = [n for n in EARLY_FORMATS if n in names]
    rest = [n for n in names if n not in early]
    # ``openai`` first: its strict detector accepts only plain OpenAI message lists (every message
    # with a known role, no ``type``, no Anthropic blocks), so it cannot steal another format's
    # records, and the common case costs one detector. The loose variant (any role string, so a
    # bad role is reported by the parser) runs after every specific format.
    from assay.traces.openai_format import OPENAI_LOOSE_FORMAT

    specific = (load_format(n) for n in [*early, *rest])
    return (load_format("openai"), *specific, OPENAI_LOOSE_FORMAT, load_format("value"))
