"""Role contracts for connectors, as the engine uses them.

A :class:`Source` yields batches of :class:`~assay.records.Envelope`; a :class:`Sink` takes result
rows (``write_results``: as the engine builds them; by default encoded as JSON for ``write_batch``).
Both are async resources: no I/O in ``__init__``; ``async with`` opens and closes, and
``aclose`` is idempotent.

The commit protocol (one place: :mod:`assay.pipeline.commit`)::

    rows/dead letters ──write_results/write_failures──▶ sink (buffered, not yet durable)
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
* ``aclose`` discards what was written after the last ``flush`` (a failed or stopped run never
  makes a row visible that its checkpoint does not count); a full part becomes visible at the
  ``flush`` that commits it, never before.
* **Staging.** A run that starts over while ``whole()`` says a whole output is published there
  builds its sinks with ``SinkContext.staged``: parts go to the sink's staging area (a
  ``_staging`` folder or prefix beside them), ``publish(success=True)`` swaps them in (the earlier
  parts not in the new output removed, then the summary, then the marker), and any other ending
  leaves the whole output as it was (its summary goes to the staging area; ``discard()`` drops the
  staging area). ``withdraw()`` removes the marker before the first sink swaps; ``settle()``
  finishes a swap a stop cut short. A sink without a published state of its own (Kafka: a topic
  is append-only) keeps the defaults: never whole, nothing staged.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import anyio
import orjson

from assay.connector_table import ConnectorConfig as ConnectorConfig  # the sections' base model
from assay.exceptions import ConnectorError
from assay.records import Envelope, Failure, Position, encode_row
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

    commit_after_checkpoint: bool = False
    """Set by the engine when it saves checkpoints: a source whose acknowledgement is external
    (Kafka's committed offsets) then commits in :meth:`checkpointed`, after the checkpoint that
    covers it is saved, instead of in ``ack`` (so the checkpoint is never behind the group)."""

    async def checkpointed(self) -> None:
        """The checkpoint holding the last ``snapshot()`` is saved."""

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
    """Writes result rows: :meth:`write_results` takes them as the engine builds them, and by
    default hands them to :meth:`write_batch` encoded (one JSON document per row, without the
    trailing newline).

    ``commit_every_rows``: a sink that holds full parts until the next ``flush`` (S3: a completed
    object) asks the engine to commit after this many rows as well as on the clock, so that no more
    than about one part waits."""

    commit_every_rows: int | None = None

    @abstractmethod
    async def write_batch(self, rows: Sequence[bytes], keys: Sequence[str | None] | None = None) -> None:
        """Write rows (may buffer). ``keys``: the rows' trace ids (a Kafka sink keys messages by them)."""

    async def write_results(self, rows: Sequence[Mapping[str, Any]], keys: Sequence[str | None] | None = None) -> None:
        """Result role: write the engine's result rows as it builds them (``trace_id``, ``run_id``,
        ``position`` as a dict, ``results``: key → :class:`~assay.records.Result`, ``identity``,
        ``warnings``). The default encodes each as JSON (:func:`~assay.records.encode_row`) and
        writes them with :meth:`write_batch`; a sink with a form of its own (Parquet: columns)
        overrides this and never encodes them."""
        await self.write_batch([encode_row(r) for r in rows], keys)

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

    async def whole(self) -> bool:
        """Whether a whole output is published here (its success marker); may be asked unopened."""
        return False

    async def withdraw(self) -> None:
        """Remove the success marker (a staged output is about to be swapped in)."""

    async def settle(self) -> bool:
        """Finish a swap a stop cut short; True when there was one (its parts are now in place)."""
        return False

    async def discard(self) -> None:
        """Drop the staging area (a staged run that is not swapped in)."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release resources (idempotent). Rows written after the last ``flush`` are discarded;
        committed, unpublished rows stay resumable."""

    def describe(self) -> str:
        return type(self).__name__


class DiscardSink(Sink):
    """A sink that keeps nothing: a pass over the input that writes no row and no dead letter (a
    batch run's collect pass, :mod:`assay.pipeline.batch_run`). Nothing is encoded, flushed or
    published."""

    async def write_batch(self, rows: Sequence[bytes], keys: Sequence[str | None] | None = None) -> None:
        return None

    async def write_results(self, rows: Sequence[Mapping[str, Any]], keys: Sequence[str | None] | None = None) -> None:
        return None

    async def write_failures(self, failures: Sequence[Failure]) -> None:
        return None

    async def aclose(self) -> None:
        return None


async def threaded_batches(
    envelopes: Iterator[Envelope],
    size: int,
    *,
    stopped: Callable[[], bool],
    after_batch: Callable[[], None] | None = None,
    abandon_on_cancel: bool = False,
) -> AsyncIterator[list[Envelope]]:
    """Batches of ``size`` from a blocking iterator of envelopes, each read in a worker thread
    (file and Parquet sources). A ConnectorError raised while reading is raised after the batch
    of what was read before it; ``after_batch`` runs in the thread after each batch read without
    one. Stops at the iterator's end or once ``stopped()``; ``abandon_on_cancel``: a read that may
    wait forever (stdin) is not waited for when the run stops."""

    def next_batch() -> tuple[list[Envelope], ConnectorError | None]:
        batch: list[Envelope] = []
        try:
            for env in envelopes:
                batch.append(env)
                if len(batch) >= size:
                    break
        except ConnectorError as exc:  # the records read before the fault still go out
            return batch, exc
        if after_batch is not None:
            after_batch()
        return batch, None

    while not stopped():
        batch, fault = await anyio.to_thread.run_sync(next_batch, abandon_on_cancel=abandon_on_cancel)
        if batch:
            yield batch
        if fault is not None:
            raise fault
        if not batch:
            return


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

    def start(
        self, topic: str, partition: int, offset: int, done: Iterable[int] = (), *, committed: bool = True
    ) -> None:
        """The first offset this run reads from a partition (the committed offset, or a seek).
        ``done``: offsets after it that are durable already (a checkpoint's, acknowledged out of
        order); ``committed=False``: the start itself is not known to be committed yet (the next
        ``committable`` includes it)."""
        key = (topic, partition)
        self._next[key] = offset
        self._done[key] = {o for o in (*self._done.get(key, set()), *done) if o >= offset}
        if committed:
            self._committed[key] = offset
        else:
            self._committed.pop(key, None)
        nxt = offset
        while nxt in self._done[key]:
            self._done[key].discard(nxt)
            nxt += 1
        self._next[key] = nxt

    def is_done(self, topic: str, partition: int, offset: int) -> bool:
        """Whether this offset is acknowledged already (before the watermark or beyond a gap)."""
        key = (topic, partition)
        nxt = self._next.get(key)
        return nxt is not None and (offset < nxt or offset in self._done.get(key, ()))

    def beyond(self) -> dict[tuple[str, int], list[int]]:
        """Per partition the offsets acknowledged beyond its watermark (after a gap), sorted."""
        return {key: sorted(done) for key, done in self._done.items() if done}  # type: ignore[misc]

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

    def positions(self) -> dict[tuple[str, int], int]:
        """Per partition the next offset after the contiguous acknowledged prefix."""
        return dict(self._next)  # type: ignore[arg-type]

    def committable(self) -> dict[tuple[str, int], int]:
        """Partitions whose watermark moved since the last ``committed``: the offset to commit
        (Kafka convention: the next offset to read)."""
        return {key: nxt for key, nxt in self._next.items() if self._committed.get(key) != nxt}  # type: ignore[misc]

    def committed(self, offsets: dict[tuple[str, int], int]) -> None:
        """These offsets were committed (only partitions still assigned are recorded)."""
        for key, off in offsets.items():
            if key in self._next:
                self._committed[key] = off
