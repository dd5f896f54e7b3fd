"""Test doubles users can reuse in their own tests: an in-memory source and sink, (in
``assay.testing.judge_server``) a stand-in LLM judge server speaking the OpenAI, Anthropic and
Ollama wire formats, and (in ``assay.testing.batch_server``, also importable from here) a stand-in
batch API: OpenAI files + batches and Anthropic message batches; and strict stand-ins of the platforms
scores are pushed to: ``langsmith_server``, ``langfuse_server``, ``otlp_receiver`` (docs/push.md).

>>> import anyio
>>> async def demo():
...     sink = ListSink()
...     async with ListSource([b'{"a": 1}', b'{"a": 2}'], batch_size=1) as src, sink:
...         async for batch in src.batches():
...             await sink.write_batch([e.payload for e in batch])
...     return sink.records()
>>> anyio.run(demo)
[{'a': 1}, {'a': 2}]
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import orjson

from assay.connectors.base import Sink, Source
from assay.connectors.ledger import LineLedger
from assay.records import Envelope, Position


class ListSource(Source):
    """Yields the given payloads (bytes, str, or JSON-serialisable values) as envelopes in batches.

    Positions are ``(name, i)`` with ``i`` the 1-based index of the item. Like a file source it keeps
    a ledger: :meth:`ack` records positions (any order; each also appended to ``acked``),
    :meth:`snapshot` returns ``{name: [[first, last], ...]}``, and ``resume_state`` (an earlier
    snapshot) skips the items it covers.
    """

    def __init__(
        self, items: Iterable[Any], *, batch_size: int = 256, name: str = "<list>", resume_state: Any = None
    ) -> None:
        super().__init__()
        self.items = list(items)
        self.batch_size = batch_size
        self.name = name
        self.acked: list[Position] = []
        self.ledger = LineLedger.from_json(resume_state)
        self._resume = LineLedger.from_json(resume_state)
        self._stopped = False

    def _payload(self, item: Any) -> bytes:
        if isinstance(item, bytes):
            return item
        if isinstance(item, str):
            return item.encode()
        return orjson.dumps(item)

    async def batches(self) -> AsyncIterator[list[Envelope]]:
        batch: list[Envelope] = []
        for i, item in enumerate(self.items, 1):
            if self._stopped:
                return
            if self._resume.is_done(self.name, i):
                continue
            batch.append(Envelope(self._payload(item), Position(self.name, i)))
            if len(batch) >= self.batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    async def ack(self, positions: Sequence[Position]) -> None:
        self.acked.extend(positions)
        self.ledger.add(positions)

    def snapshot(self) -> Any:
        """The acknowledged positions as ``{name: [[first, last], ...]}``."""
        return self.ledger.to_json()

    def size_hint(self) -> int | None:
        return len(self.items)

    def stop(self) -> None:
        self._stopped = True


class ListSink(Sink):
    """Collects written rows in memory."""

    def __init__(self) -> None:
        self.rows: list[bytes] = []
        self.keys: list[str | None] = []
        self.closed = False
        self.pending = 0
        self.durable = 0
        """How many rows were durable at the last flush."""
        self.flushes = 0

    async def write_batch(self, rows: Sequence[bytes], keys: Sequence[str | None] | None = None) -> None:
        self.rows.extend(rows)
        self.keys.extend(keys if keys is not None else [None] * len(rows))
        self.pending += len(rows)

    async def flush(self) -> None:
        self.durable = len(self.rows)
        self.pending = 0
        self.flushes += 1

    def snapshot(self) -> Any:
        return {"rows": self.durable}

    async def aclose(self) -> None:
        self.closed = True

    def records(self) -> list[Any]:
        """The rows parsed back from JSON."""
        return [orjson.loads(r) for r in self.rows]


def __getattr__(name: str) -> Any:
    """``BatchServer``, ``BatchServerThread``, ``JudgeServer``, ``JudgeServerThread``: imported on
    first use (they need aiohttp's server)."""
    if name in ("BatchServer", "BatchServerThread"):
        from assay.testing import batch_server

        return getattr(batch_server, name)
    if name in ("JudgeServer", "JudgeServerThread"):
        from assay.testing import judge_server

        return getattr(judge_server, name)
    raise AttributeError(f"module 'assay.testing' has no attribute {name!r}")


__all__ = ["BatchServer", "BatchServerThread", "JudgeServer", "JudgeServerThread", "ListSink", "ListSource"]
