"""Traces read straight from a platform's API (``source: {type: langsmith | langfuse | phoenix}``).

Every platform source reads in two steps, page by page:

1. **the traces of the window**, in the platform's order with its own cursor (LangSmith: the root
   runs of a project; Langfuse: ``GET /api/public/traces``; Phoenix: a project's traces), the
   window being the run's ``ds`` day (UTC) unless ``start`` / ``end`` name one;
2. **each trace whole** (its runs, its observations, its spans): one record per trace in exactly
   the form the export readers give the normalizers (a JSON array of LangSmith runs, a Langfuse
   trace with its ``observations``, a list of OpenTelemetry spans), so a trace read from the API
   and the same trace read from an export score the same.

Resume: record ``k`` of the window has the position ``<source>:k``. The source's checkpoint
state is the cursor of the first page that still has a trace not yet durable, that page's first
index and the indices after it already acknowledged; a run killed (``kill -9`` included) starts
again at that page and skips what is done, so a resume re-reads at most one page of listings.
Shards (``--workers``) each list every page and keep the traces whose id hashes to them.
"""

from __future__ import annotations

import datetime as dt
import zlib
from abc import abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from assay.connectors.api_client import ApiClient
from assay.connectors.base import ConnectorConfig, Source
from assay.exceptions import ConfigError
from assay.paths import day_problem
from assay.records import Envelope, Position

__all__ = ["ApiSourceConfig", "ApiTraceSource", "Page", "TraceRecord"]


class ApiSourceConfig(ConnectorConfig):
    """The keys every platform API source has (its own model adds where and which project)."""

    ds: str | None = None
    """The day to read, ``YYYY-MM-DD`` (UTC midnight to midnight; default: the run's ``--ds``)."""
    start: dt.datetime | None = None
    """The window's inclusive start (with ``end``, instead of a day; no zone means UTC)."""
    end: dt.datetime | None = None
    """The window's exclusive end."""
    rpm: float | None = Field(default=None, gt=0)
    """Requests per minute (default: the platform's published read limit)."""
    page_size: int | None = Field(default=None, gt=0)
    """Traces listed per request (default: the platform's)."""
    retries: int = Field(default=6, ge=0)
    """Attempts after the first for 429, 5xx and connection errors (backing off 0.5 s, 1 s, 2 s …;
    a 429's ``Retry-After`` instead)."""
    timeout_s: float = Field(default=60.0, gt=0)

    @model_validator(mode="after")
    def _window(self) -> ApiSourceConfig:
        if (self.start is None) != (self.end is None):
            raise ValueError("start and end go together (or neither: the run's ds day)")
        if self.start is not None and self.end is not None and _utc(self.start) >= _utc(self.end):
            raise ValueError("start must be before end")
        if self.ds is not None and (problem := day_problem(self.ds)) is not None:
            raise ValueError(f"ds: {problem}")
        return self

    def window(self) -> tuple[dt.datetime, dt.datetime]:
        """``[start, end)`` in UTC."""
        if self.start is not None and self.end is not None:
            return _utc(self.start), _utc(self.end)
        if self.ds is None:
            msg = f"source (type: {self.type}): which day to read? pass --ds YYYY-MM-DD or set start and end"
            raise ConfigError(msg)
        day = dt.datetime.fromisoformat(self.ds).replace(tzinfo=dt.UTC)
        return day, day + dt.timedelta(days=1)


def _utc(t: dt.datetime) -> dt.datetime:
    return t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t.astimezone(dt.UTC)


def iso(t: dt.datetime) -> str:
    """``2026-11-21T00:00:00Z``: the form every platform's time filters take."""
    return t.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Page:
    """One listing page: its trace ids (in the platform's order) and the cursor of the next."""

    trace_ids: list[str]
    next_cursor: Any
    total: int | None = None
    """Traces in the whole window, when the platform says (Langfuse)."""
    heads: list[Any] | None = None
    """What the listing returned for each trace (passed to :meth:`ApiTraceSource.fetch`)."""


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One trace fetched: its record (JSON), or why it could not be read."""

    payload: bytes | None
    error: str | None = None


class ApiTraceSource(Source):
    """A platform's traces over a window, page by page, resumable (module docs). A subclass says
    how to list a page (:meth:`list_page`) and how to fetch the traces of one (:meth:`fetch`)."""

    platform: str = "platform"
    fetch_chunk: int = 32
    """Traces fetched per batch at most (a batch goes out as soon as its traces are read)."""

    def __init__(
        self,
        config: ApiSourceConfig,
        *,
        batch_size: int = 256,
        shard: tuple[int, int] | None = None,
        resume_state: Any = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.start, self.end = config.window()
        self.batch_size = batch_size
        self.shard = shard
        self.stats_client: ApiClient | None = None
        self._stopped = False
        self._total: int | None = None
        self._read = 0  # traces given out or skipped as done (progress)
        # the resume ledger: pages not yet wholly acknowledged, as [cursor, first index, size]
        self._pages: list[list[Any]] = []
        self._acked: set[int] = set()
        self._cursor: Any = None  # the cursor of the first page not yet settled
        self._base = 0  # its first index
        self._finished = False
        self._restore(resume_state)

    # -- what a platform says ---------------------------------------------------------------

    @abstractmethod
    def client(self) -> ApiClient:
        """A new client for this source's API (opened with ``async with``)."""

    async def prepare(self, client: ApiClient) -> None:
        """Look up what the listing needs (a project's id) before the first page."""

    @abstractmethod
    async def list_page(self, client: ApiClient, cursor: Any) -> Page:
        """The page of the window's traces at ``cursor`` (None: the first)."""

    @abstractmethod
    async def fetch(self, client: ApiClient, page: Page, keep: Sequence[int]) -> list[TraceRecord]:
        """The records of the traces ``page.trace_ids[i]`` for ``i`` in ``keep``, in that order."""

    def where(self) -> str:
        """The source's name in positions and messages (``langfuse:https://…/traces``)."""
        return self.platform

    # -- the Source ---------------------------------------------------------------------------

    def _restore(self, state: Any) -> None:
        if not isinstance(state, dict) or state.get("window") != [iso(self.start), iso(self.end)]:
            return  # start over: nothing saved, or another window's
        self._cursor = state.get("cursor")
        self._base = int(state.get("base", 0))
        self._acked = {int(i) for i in state.get("acked", [])}
        self._finished = bool(state.get("finished", False))
        self._read = self._base

    def snapshot(self) -> Any:
        return {
            "window": [iso(self.start), iso(self.end)],
            "cursor": self._cursor,
            "base": self._base,
            "acked": sorted(self._acked),
            "finished": self._finished and not self._pages,
        }

    async def ack(self, positions: Sequence[Position]) -> None:
        for p in positions:
            if p.line is not None and p.line >= self._base:
                self._acked.add(p.line)
        self._settle()

    def _settle(self) -> None:
        """Drop the leading pages whose every trace is acknowledged; the checkpoint moves past them."""
        while self._pages:
            cursor, base, size, nxt = self._pages[0]
            if not all(i in self._acked for i in range(base, base + size)):
                self._cursor, self._base = cursor, base
                return
            self._acked.difference_update(range(base, base + size))
            self._pages.pop(0)
            self._cursor, self._base = nxt, base + size
            if nxt is None or size == 0:  # the last page: a resume must not start over from the first
                self._finished = True

    def stop(self) -> None:
        self._stopped = True

    def size_hint(self) -> int | None:
        return self._total

    def size_done(self) -> int | None:
        return self._read if self._total is not None else None

    def _ours(self, trace_id: str) -> bool:
        if self.shard is None or self.shard[1] <= 1:
            return True
        return zlib.crc32(trace_id.encode()) % self.shard[1] == self.shard[0]

    async def batches(self) -> AsyncIterator[list[Envelope]]:
        if self._finished:
            return
        client = self.client()
        self.stats_client = client
        where = self.where()
        async with client:
            await self.prepare(client)
            cursor, base = self._cursor, self._base
            while not self._stopped:
                page = await self.list_page(client, cursor)
                if page.total is not None:
                    self._total = page.total
                n = len(page.trace_ids)
                last = page.next_cursor is None or n == 0
                self._pages.append([cursor, base, n, page.next_cursor])
                keep = [i for i in range(n) if base + i not in self._acked and self._ours(page.trace_ids[i])]
                # traces of other shards, and those done before a resume, are settled as they are
                kept = set(keep)
                self._acked.update(base + i for i in range(n) if i not in kept)
                self._read += n - len(keep)
                step = max(1, min(self.batch_size, self.fetch_chunk))
                for start in range(0, len(keep), step):
                    if self._stopped:
                        break
                    chunk = keep[start : start + step]
                    records = await self.fetch(client, page, chunk)
                    batch: list[Envelope] = []
                    for i, rec in zip(chunk, records, strict=True):
                        pos = Position(where, line=base + i)
                        if rec.payload is None:
                            self.read_errors.append((pos, rec.error or "trace could not be read"))
                        else:
                            batch.append(Envelope(rec.payload, pos))
                    self._read += len(chunk)
                    if batch:
                        yield batch  # read errors go out as dead letters after the next batch
                if self._stopped:
                    break
                self._settle()
                if last:
                    self._finished = True
                    break
                cursor, base = page.next_cursor, base + n

    async def aclose(self) -> None:
        self._stopped = True

    def describe(self) -> str:
        rpm = self.config.rpm or self.default_rpm()
        pace = f", at most {rpm:g} requests/min" if rpm else ""
        return f"{self.platform} API {self.where()} {iso(self.start)}..{iso(self.end)}{pace}"

    def default_rpm(self) -> float | None:
        return None

    #: What the progress line adds about the platform's read limit (Langfuse's is small).
    rate_note: str = ""

    def progress_note(self) -> str:
        """The progress line's part for this source: requests sent, 429s, the pace."""
        client = self.stats_client
        done = client.stats if client is not None else None
        rpm = self.config.rpm or self.default_rpm()
        parts = [f"{self.platform} API: {done.requests if done else 0:,} requests"]
        if done is not None and done.rate_limited:
            parts.append(f"{done.rate_limited:,} rate limited (429)")
        if rpm:
            parts.append(f"at most {rpm:,.0f} req/min{self.rate_note}")
        return ", ".join(parts)
