"""Role contracts for connectors, as the engine uses them.

A :class:`Source` yields batches of :class:`~assay.records.Envelope`; a :class:`Sink` takes encoded
result rows. Both are async resources: no I/O in ``__init__``; ``async with`` opens and closes, and
``aclose`` is idempotent.

The commit protocol (one place: :mod:`assay.pipeline.commit`)::

    rows/dead letters ──write_batch──▶ sink (buffered, not yet durable)
    every commit interval and at the end of the run:
        1. sink.flush(); dead_letter.flush()     everything written so far is durable
        2. source.ack(positions)                 positions whose rows (or dead letters) are now durable
        3. checkpoint.save({source: source.snapshot(), sink: sink.snapshot(), ...})

* ``ack`` receives each position at most once, in **any order** (several evaluate workers finish
  batches out of order). A source that commits offsets (Kafka) commits per partition only up to the
  contiguous watermark: the first position not yet acknowledged (:class:`Watermarks`). A source
  that keeps a ledger (files, S3) records them as intervals and needs no order at all.
* **Resume state belongs to the source.** ``snapshot()`` returns a JSON-able value the engine stores
  in its checkpoint after each commit (files, S3: the completed-positions ledger; Kafka: ``None``,
  its committed offsets are the checkpoint); the next run hands it back as ``resume_state`` and the
  source skips what it covers. The engine never interprets it.
* A sink's ``snapshot()`` after ``flush()`` describes its durable state (finished parts, the
  committed length of the part being written). Given back as ``resume_state`` it restores exactly
  that state, dropping whatever was written after it (so a resume after ``kill -9`` never repeats a
  row). ``resume_state=None`` on a sink means **start over**: ``open`` removes the outputs of earlier
  attempts (stale parts, ``_SUCCESS``) before anything is written.
* The sink owns the run's outputs: ``publish(summary, success)`` finalizes the rows (renames,
  completes uploads), writes the summary and, only when ``success``, the success marker last.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Hashable, Iterable, Sequence
from typing import Any

import orjson

from assay.records import Envelope, Failure, Position
from assay.resources import AsyncResource


class Source(AsyncResource, ABC):
    """Yields batches of envelopes; acknowledges positions once their rows are durable.

    ``read_errors`` collects positions the source could not split into records (e.g. a JSON array
    file that stops parsing, a truncated gzip member); the pipeline turns each into a dead-letter
    row, and they are acknowledged like any other position.
    """

    read_errors: list[tuple[Position, str]]

    def __init__(self) -> None:
        self.read_errors = []

    @abstractmethod
    def batches(self) -> AsyncIterator[list[Envelope]]:
        """Batches of envelopes until the source is exhausted (or stopped)."""

    async def ack(self, positions: Sequence[Position]) -> None:
        """The rows or dead letters covering these positions are durable (see the module docs)."""

    def snapshot(self) -> Any:
        """JSON-able resume state (after the last ``ack``); None when the source keeps none."""
        return None

    def stop(self) -> None:
        """Stop yielding new batches as soon as possible (graceful shutdown)."""

    def size_hint(self) -> int | None:
        """Records (or bytes, see ``size_unit``) the run will read, when known (progress ETA)."""
        return None

    size_unit: str = "records"

    def size_done(self) -> int | None:
        """How much of ``size_hint`` has been read so far, in ``size_unit`` (what a resumed run
        skips included). None when the source does not count it: the engine then counts the
        records it took, which is the same thing for a ``records`` hint."""
        return None

    def describe(self) -> str:
        return type(self).__name__


class Sink(AsyncResource, ABC):
    """Writes encoded rows (one JSON document per row, without the trailing newline).

    ``commit_every_rows``: a sink whose ``flush`` ends a part (S3: a completed object) asks the
    engine to commit after this many rows instead of on a clock, so that a rerun over the same input
    cuts the same parts and writes the same keys with the same bytes."""

    commit_every_rows: int | None = None

    @abstractmethod
    async def write_batch(self, rows: Sequence[bytes], keys: Sequence[str | None] | None = None) -> None:
        """Write rows (may buffer). ``keys``: the rows' trace ids (a Kafka sink keys messages by them)."""

    async def write_failures(self, failures: Sequence[Failure]) -> None:
        """Dead-letter role: write failed records. The default writes each as a JSON row
        (``Failure.to_dict``: raw payload, position, stage, error type, error); a sink with a richer
        form (Kafka: the original bytes with headers) overrides this."""
        await self.write_batch([orjson.dumps(f.to_dict(), default=str) for f in failures])

    async def flush(self) -> None:
        """Make everything written so far durable (fsync, completed upload, delivery confirmed)."""

    def snapshot(self) -> Any:
        """JSON-able durable state after the last ``flush`` (restored exactly on resume)."""
        return None

    async def publish(self, summary: dict[str, Any], *, success: bool, summary_name: str | None = None) -> str | None:
        """Finalize the output, write the summary (as ``summary_name``, default ``_SUMMARY.json``),
        then the success marker when ``success``. Returns where the summary went (a path or URL),
        or None for a sink with no place of its own (the engine then writes it locally)."""
        return None

    @abstractmethod
    async def aclose(self) -> None:
        """Release resources (idempotent). Unpublished rows stay resumable."""

    def describe(self) -> str:
        return type(self).__name__


class Watermarks:
    """Per-partition contiguous watermarks over positions acknowledged in any order.

    >>> w = Watermarks()
    >>> w.start("t", 0, 10)
    >>> w.ack("t", 0, 11); w.committable()
    {}
    >>> w.ack("t", 0, 10); w.committable()
    {('t', 0): 12}
    >>> w.ack("t", 0, 12); w.committable()
    {('t', 0): 13}
    """

    def __init__(self) -> None:
        self._next: dict[Hashable, int] = {}
        self._done: dict[Hashable, set[int]] = {}
        self._committed: dict[Hashable, int] = {}  # last committed, or the start offset

    def start(self, topic: str, partition: int, offset: int) -> None:
        """The first offset this run reads from a partition (the committed offset, or a seek)."""
        key = (topic, partition)
        self._next[key] = offset
        self._done[key] = {o for o in self._done.get(key, set()) if o >= offset}
        self._committed[key] = offset

    def forget(self, topic: str, partition: int) -> None:
        """A revoked partition: nothing more of it will be committed by this consumer."""
        key = (topic, partition)
        self._next.pop(key, None)
        self._done.pop(key, None)
        self._committed.pop(key, None)

    def ack(self, topic: str, partition: int, offset: int) -> None:
        key = (topic, partition)
        nxt = self._next.get(key)
        if nxt is None or offset < nxt:
            return
        done = self._done.setdefault(key, set())
        done.add(offset)
        while nxt in done:
            done.discard(nxt)
            nxt += 1
        self._next[key] = nxt

    def ack_all(self, positions: Iterable[Position]) -> None:
        for p in positions:
            if p.partition is not None and p.offset is not None:
                self.ack(p.source, p.partition, p.offset)

    def committable(self) -> dict[tuple[str, int], int]:
        """Partitions whose watermark moved since the last ``committed``: the offset to commit
        (Kafka convention: the next offset to read)."""
        return {key: nxt for key, nxt in self._next.items() if self._committed.get(key) != nxt}  # type: ignore[misc]

    def committed(self, offsets: dict[tuple[str, int], int]) -> None:
        """These offsets were committed (only partitions still assigned are recorded)."""
        for key, off in offsets.items():
            if key in self._next:
                self._committed[key] = off
