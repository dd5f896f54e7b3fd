"""Commit after flush, in one place (quix-streams' ``Checkpoint.commit`` is the model).

::

    every ``interval_s`` (and at the end, and when the run stops):
        1. flush every sink         the rows and dead letters written so far are durable
        2. source.ack(positions)    the positions they cover (any order)
        3. save the checkpoint      source.snapshot(), every sink's snapshot(), cumulative stats
        4. source.checkpointed()    an external acknowledgement (Kafka commits its watermark)

A crash between 1 and 3 leaves the previous checkpoint: the sinks restore to it (dropping what was
written after it) and the source reads those positions again, so a resumed output holds each row
exactly once. A source whose acknowledgement is external (Kafka's offsets) commits only after the
checkpoint is saved, so it is never ahead of the checkpoint: a stop never skips a record (in the
instant between the two it re-reads the records of one interval).
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
        """Also commit after this many rows (a sink whose full parts become visible at flush)."""
        self.rows = 0
        self._last = time.monotonic()
        self.failed = False
        source.commit_after_checkpoint = store is not None
        """A commit failed: the checkpoint stays at the last good one from then on (the sinks
        discard what follows it when they close, and a resume restores to it)."""

    def add(self, positions: list[Position], rows: int = 0) -> None:
        """Positions whose rows (or dead letters) were written (not yet durable)."""
        self.pending.extend(positions)
        self.rows += rows

    async def maybe_commit(self) -> None:
        """Commit every ``interval_s``, and sooner once a sink's part is full (``every_rows``)."""
        if (self.every_rows is not None and self.rows >= self.every_rows) or (
            time.monotonic() - self._last >= self.interval_s
        ):
            await self.commit()

    async def commit(self) -> None:
        """Flush, ack, save: shielded, so a cancelled run still records what it made durable."""
        if self.failed:
            return
        with anyio.CancelScope(shield=True):
            try:
                for sink in self.sinks.values():
                    await sink.flush()
                pending, self.pending = self.pending, []
                if pending:
                    await self.source.ack(pending)
                self.save()
                await self.source.checkpointed()
            except BaseException:
                self.failed = True
                raise
            self.commits += 1
            self.rows = 0
            self._last = time.monotonic()

    def save(self, **extra: Any) -> None:
        """Write the checkpoint from the source's and sinks' current snapshots (never after a
        failed commit: the sinks' state may then be ahead of what the source acknowledged)."""
        if self.store is None or self.failed:
            return
        data = {
            "source": self.source.snapshot(),
            "sinks": {name: sink.snapshot() for name, sink in self.sinks.items()},
            **self.state(),
            **extra,
        }
        self.store.save(self.writer, data)
