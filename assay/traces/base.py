"""The contract of a trace format module and the dotted-path helper shared by normalizers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from assay.traces.model import Trace


@dataclass(frozen=True, slots=True)
class TraceFormat:
    """One input format: a cheap ``detect(value)`` and a ``normalize(value) -> Trace``.

    ``value`` is a record's outputs value (or the whole record when it has no outputs field):
    a dict, a list, or a scalar. ``normalize`` raises NormalizationError on a bad shape.
    """

    name: str
    description: str
    detect: Callable[[Any], bool]
    normalize: Callable[[Any], Trace]


_MISSING = object()


def get_path(obj: Any, path: str, default: Any = None) -> Any:
    """Walk a dotted path through dicts (and lists, with integer steps): ``"a.b.0.c"``."""
    cur = obj
    for step in path.split("."):
        if isinstance(cur, dict):
            cur = cur.get(step, _MISSING)
        elif isinstance(cur, list) and step.lstrip("-").isdigit():
            i = int(step)
            cur = cur[i] if -len(cur) <= i < len(cur) else _MISSING
        else:
            return default
        if cur is _MISSING:
            return default
    return cur


def has_path(obj: Any, path: str) -> bool:
    """Whether a dotted path resolves (to any value, None included)."""
    return get_path(obj, path, _MISSING) is not _MISSING
