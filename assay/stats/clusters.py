"""Which cluster a trace belongs to (``stats.cluster_by``): the value at a dotted path.

>>> from assay.traces import Trace
>>> cluster_of(Trace(id="t1", metadata={"session_id": "s9"}), "metadata.session_id")
's9'
>>> cluster_of(Trace(id="t2"), "metadata.session_id")  # no session: a cluster of its own
'trace:t2'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["cluster_of"]


def cluster_of(obj: Any, path: str) -> str:
    """The value at ``path`` (attributes, then mapping keys) as a string; a trace without it is a
    cluster of its own (``trace:<id>``), so it still counts as one independent observation."""
    value: Any = obj
    for part in path.split("."):
        if isinstance(value, Mapping):
            value = value.get(part)
        else:
            value = getattr(value, part, None)
        if value is None:
            return f"trace:{getattr(obj, 'id', None) or id(obj)}"
    return str(value)
