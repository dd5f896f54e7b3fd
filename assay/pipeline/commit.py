"""Commit after flush, in one place (quix-streams' ``Checkpoint.commit`` is the model).

::

    every ``interval_s`` (and at the end, and when the run stops):
        1. flush every sink         the rows and dead letters written so far are durable
        2. source.ack(positions)    the positions they cover (any order; Kafka commits its watermark)
        3. save the checkpoint      source.snapshot(), every sink's snapshot(), cumulative stats

A crash between 1 and 3 leaves the previous checkpoint: the sinks restore to it (dropping what was
written after it) and the source reads those positions again, so a resumed output holds each row
exactly once (at least once for a source whose ack is external, like Kafka's offsets).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from assay.connectors.base import Sink, Source
from assay.pipeline.checkpoint import CheckpointStore
from assay.records import Position


class Committer:
    """Flushes the sinks, acknowledges the source and saves the writer's checkpoint."""

    def __init__(
        self,
        source: Source,
        sinks: Mapping[str, Sink],
        *,
        store: CheckpointStore | None,
        writer: int,
        state: Callable[[], dict[str, Any]],
        interval_s: float = 5.0,
    ) -> None:
        self.source = source
        self.sinks = dict(sinks)
        self.store = store
        self.writer = writer
        self.state = state
        self.interval_s = interval_s
        self.pending: list[Position] = []
        self.commits = 0
        every = [s.commit_every_rows for s in self.sinks.values() if s.commit_every_rows]
        self.every_rows = min(every) if every else None
        """Commit on a row count (a sink whose parts end at flush) instead of on the clock."""
        self.rows = 0
        self._last = time.monotonic()

    def add(self, positions: list[Position], rows: int = 0) -> None:
        """Positions whose rows (or dead letters) were written (not yet durable)."""
        self.pending.extend(positions)
        self.rows += rows

    async def maybe_commit(self) -> None:
        if self.every_rows is not None:
            if self.rows >= self.every_rows:
                await self.commit()
        elif time.monotonic() - self._last >= self.interval_s:
            await self.commit()

    async def commit(self) -> None:
        """Flush, ack, save: shielded, so a cancelled run still records what it made durable."""
        with anyio.CancelScope(shield=True):
            for sink in self.sinks.values():
                await sink.flush()
            pending, self.pending = self.pending, []
            if pending:
                await self.source.ack(pending)
            self.save()
            self.commits += 1
            self.rows = 0
            self._last = time.monotonic()

    def save(self, **extra: Any) -> None:
        """Write the checkpoint from the source's and sinks' current snapshots."""
        if self.store is None:
            return
        data = {
            "source": self.source.snapshot(),
            "sinks": {name: sink.snapshot() for name, sink in self.sinks.items()},
            **self.state(),
            **extra,
        }
        self.store.save(self.writer, data)
