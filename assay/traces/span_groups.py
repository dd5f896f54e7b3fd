"""Group span-per-record exports into traces, streaming with bounded memory.

The OpenTelemetry Python SDK's ``ConsoleSpanExporter`` and span-per-line collector dumps write one
JSON document per span, in the order the spans *end*: a trace's children first, its root last,
and the spans of concurrent traces interleaved. :class:`SpanGrouper` turns that stream back into
traces, keyed by the trace id (``context.trace_id``, ``traceId`` or ``trace_id``):

* a trace is **complete** once its root span (no ``parent_id``/``parentSpanId``) has arrived and a
  span of another trace follows it, or the input ends (a start-ordered dump, root first, works
  too: the root waits for its children as long as they keep coming);
* at most ``max_open`` traces are held; when one more opens, the one extended least recently is
  emitted as it is (its later spans, if any, then form a second trace with the same id);
* a span without a trace id is a trace of its own.

Memory holds the open traces only. Spans of one trace keep their arrival order in the group (the
otel normalizer orders them by start time).

>>> g = SpanGrouper(max_open=8)
>>> span = lambda t, s, parent=None: {"name": s, "context": {"trace_id": t, "span_id": s}, "parent_id": parent}
>>> g.add(span("a", "a1", "a0"), 1), g.add(span("b", "b1", "b0"), 2), g.add(span("a", "a0"), 3)
([], [], [])
>>> [[tag for _, tag in group] for group in g.add(span("b", "b0"), 4)]
[[1, 3]]
>>> [[tag for _, tag in group] for group in g.flush()]
[[2, 4]]
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: How many traces a grouper holds open by default.
DEFAULT_MAX_OPEN = 256


def span_trace_id(row: Any) -> str | None:
    """The trace id of a span-per-record row (None when the row is not such a span)."""
    if type(row) is not dict or "name" not in row:
        return None
    ctx = row.get("context")
    tid = ctx.get("trace_id") if type(ctx) is dict else None
    if tid is None:
        tid = row.get("traceId", row.get("trace_id"))
    if not isinstance(tid, str) or not tid:
        return None
    return tid.removeprefix("0x").lower()


def is_span_row(row: Any) -> bool:
    """A single span (OTel SDK ``to_json()``, a flat OTLP span): name, attributes and a trace id."""
    return type(row) is dict and "attributes" in row and span_trace_id(row) is not None


def is_root_span(row: dict[str, Any]) -> bool:
    """Whether a span has no parent (the root of its trace)."""
    parent = row.get("parent_id", row.get("parentSpanId", row.get("parent_span_id")))
    return parent in (None, "", "0x0000000000000000", "0000000000000000")


class _Open(Generic[T]):
    __slots__ = ("members", "rooted")

    def __init__(self) -> None:
        self.members: list[tuple[Any, T]] = []
        self.rooted = False


class SpanGrouper(Generic[T]):
    """Collects ``(span, tag)`` pairs into traces (see the module docs); ``tag`` is the caller's
    (a record position)."""

    def __init__(self, *, max_open: int = DEFAULT_MAX_OPEN) -> None:
        if max_open < 1:
            raise ValueError("max_open must be at least 1")
        self.max_open = max_open
        self._open: OrderedDict[str | None, _Open[T]] = OrderedDict()  # least recently extended first
        self._last: str | None = None

    def __len__(self) -> int:
        return len(self._open)

    def add(self, span: Any, tag: T) -> list[list[tuple[Any, T]]]:
        """Add one span; returns the traces that became complete (oldest first)."""
        tid = span_trace_id(span)
        if tid is None:
            return [[(span, tag)]]
        done: list[list[tuple[Any, T]]] = []
        if self._last is not None and self._last != tid:
            last = self._open.get(self._last)
            if last is not None and last.rooted:
                done.append(self._open.pop(self._last).members)
        group = self._open.get(tid)
        if group is None:
            if len(self._open) >= self.max_open:
                _, oldest = self._open.popitem(last=False)
                done.append(oldest.members)
            group = self._open[tid] = _Open()
        else:
            self._open.move_to_end(tid)
        group.members.append((span, tag))
        group.rooted = group.rooted or is_root_span(span)
        self._last = tid
        return done

    def flush(self) -> list[list[tuple[Any, T]]]:
        """Every open trace (the input ended), in the order they were last extended."""
        done = [g.members for g in self._open.values()]
        self._open.clear()
        self._last = None
        return done


__all__ = ["DEFAULT_MAX_OPEN", "SpanGrouper", "is_root_span", "is_span_row", "span_trace_id"]
