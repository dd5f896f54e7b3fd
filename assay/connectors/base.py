"""Role contracts for connectors.

A :class:`Source` is an async resource that yields batches of :class:`~assay.records.Envelope`
and acknowledges positions once the rows covering them are durably written. A :class:`Sink` is an
async resource with ``write_batch`` (rows as encoded JSON lines), ``flush`` (make everything written
so far durable and return the part files that became final) and ``aclose``.
No I/O happens in ``__init__``; ``async with`` opens and closes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence

from assay.records import Envelope, Position
from assay.resources import AsyncResource


class Source(AsyncResource, ABC):
    """Yields batches of envelopes.

    ``read_errors`` collects positions the source could not split into records (e.g. a JSON array
    file that stops parsing); the pipeline turns each into a dead-letter row.
    """

    read_errors: list[tuple[Position, str]]

    def __init__(self) -> None:
        self.read_errors = []

    @abstractmethod
    def batches(self) -> AsyncIterator[list[Envelope]]:
        """Batches of envelopes until the source is exhausted (or stopped)."""

    async def ack(self, positions: Sequence[Position]) -> None:
        """The rows covering these positions are durable (Kafka commits offsets here)."""

    def stop(self) -> None:
        """Stop yielding new batches as soon as possible (graceful shutdown)."""

    def describe(self) -> str:
        return type(self).__name__


class Sink(AsyncResource, ABC):
    """Writes encoded rows (one JSON document per row, without the trailing newline)."""

    @abstractmethod
    async def write_batch(self, rows: Sequence[bytes]) -> None:
        """Write rows (may buffer)."""

    async def flush(self) -> None:
        """Make everything written so far durable."""

    @abstractmethod
    async def aclose(self) -> None:
        """Flush, finalize (e.g. rename temp files) and release resources."""

    def describe(self) -> str:
        return type(self).__name__
