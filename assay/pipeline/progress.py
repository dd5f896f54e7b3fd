"""Progress people can read: a live line on a terminal, a timestamped line at a fixed interval
otherwise (cron, Airflow), and what a stopping run is still doing.

Two feeds reach a :class:`Progress`::

    sink stage ──update(RunStats)──▶ Progress ◀──tick(Gauges)── sampler (about once a second)
                 records read, scored, dead letters     input read vs its size, judges, queue depths

:func:`sample_gauges` is the sampler: it reads the source's ``size_hint``/``size_done``, the
bounded streams' buffers and the judge pool's statistics, and hands a :class:`Gauges` to every
``tick``. Rates (records/s, judge requests/min) are measured over a sliding window, and the ETA
is what is left of the input divided by its current read rate.

A non-terminal line looks like::

    2026-11-25T06:40:00Z assay: read 12,345  scored 12,300  dead letters 3  | 812 rec/s | 41% of 1.2 GB, \
ETA 2m13s | judge gpt: 14 in flight, 96 req/min (limit 100) | queued evaluate 3/4, sink 0/4
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, TextIO

import anyio

from assay.pipeline.summary import RunStats

if TYPE_CHECKING:
    from assay.pipeline.runner import Pipeline

RATE_WINDOW_S = 60.0
"""Rates and the ETA follow the last minute (a judge that slows down shows at once)."""

SAMPLE_EVERY_S = 1.0
"""How often :func:`sample_gauges` reads the gauges (cheap: no I/O)."""


class ProgressSink(Protocol):
    """What the engine reports progress to (``Progress``, or a shard worker's shared counters).
    A sink that also has ``tick(gauges)`` gets :class:`Gauges` from the sampler."""

    def update(self, stats: RunStats) -> None: ...


@dataclass(frozen=True, slots=True)
class JudgeGauge:
    """One judge endpoint now: requests in flight, requests sent so far, its allowed rate."""

    in_flight: int = 0
    requests: int = 0
    limit_rpm: float | None = None


@dataclass(frozen=True, slots=True)
class Gauges:
    """What the run is doing beyond its counts (see :func:`sample_gauges`)."""

    size_total: int | None = None
    """The input's size in ``size_unit`` (the source's ``size_hint``), when known."""
    size_done: int | None = None
    """How much of it has been read (the source's ``size_done``, or the records taken)."""
    size_unit: str = "records"
    in_flight: int = 0
    """Records taken from the source and not yet written."""
    taken: int = 0
    """Records taken from the source by this invocation."""
    queues: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """Stage → (batches buffered in front of it, buffer size)."""
    judges: Mapping[str, JudgeGauge] = field(default_factory=dict)
    grace_left_s: float | None = None
    """Set once the run is stopping: seconds before in-flight work is abandoned."""
    judge_stats: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Each judge's statistics now (``JudgePool.stats()``), for the metrics."""
    judge_latencies: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    """Each judge's latency samples in seconds, for the metrics."""
    source_note: str | None = None
    """What the source says of its reading (a platform API source: its requests and rate limit)."""


class WindowRate:
    """The rate of a growing count over a sliding window of samples. Samples closer than
    ``step_s`` to the one before the newest replace the newest, so the count may be fed on every
    batch: the deque holds about ``window_s / step_s`` samples, and the newest is always current.

    >>> r = WindowRate(window_s=10)
    >>> r.add(0.0, 0); r.add(5.0, 50); r.per_s()
    10.0
    >>> r.add(20.0, 50); r.per_s()  # nothing in the last 15 s
    0.0
    """

    def __init__(self, window_s: float = RATE_WINDOW_S, step_s: float = 1.0) -> None:
        self.window_s = window_s
        self.step_s = step_s
        self._samples: deque[tuple[float, float]] = deque()

    def add(self, t: float, value: float) -> None:
        s = self._samples
        if s and t <= s[-1][0]:
            s[-1] = (s[-1][0], value)
            return
        if len(s) >= 2 and t - s[-2][0] < self.step_s:
            s[-1] = (t, value)
            return
        s.append((t, value))
        while len(s) > 2 and t - s[1][0] >= self.window_s:
            s.popleft()

    def per_s(self) -> float | None:
        """None until two samples are apart in time."""
        s = self._samples
        if len(s) < 2:
            return None
        (t0, v0), (t1, v1) = s[0], s[-1]
        return max(v1 - v0, 0.0) / (t1 - t0)


def eta_s(total: float | None, done: float | None, rate_per_s: float | None) -> float | None:
    """Seconds left to read ``total`` at ``rate_per_s`` from ``done``; None when unknown.

    >>> eta_s(1000, 250, 50.0)
    15.0
    >>> eta_s(1000, 1000, 0.0), eta_s(None, 10, 5.0), eta_s(1000, 10, 0.0)
    (0.0, None, None)
    """
    if total is None or done is None:
        return None
    left = max(total - done, 0)
    if left == 0:
        return 0.0
    if not rate_per_s or rate_per_s <= 0:
        return None
    return left / rate_per_s


def format_duration(seconds: float) -> str:
    """``45s``, ``2m13s``, ``1h05m``, ``2d03h``.

    >>> format_duration(44.6), format_duration(133), format_duration(3900), format_duration(183600)
    ('45s', '2m13s', '1h05m', '2d03h')
    """
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def format_size(n: int, unit: str) -> str:
    """``1.2 GB`` for bytes, ``12,345 records`` otherwise.

    >>> format_size(1_234_567_890, "bytes"), format_size(12345, "records")
    ('1.2 GB', '12,345 records')
    """
    if unit != "bytes":
        return f"{n:,} {unit}"
    size = float(n)
    for suffix in ("B", "kB", "MB", "GB", "TB"):
        if size < 1000 or suffix == "TB":
            return f"{size:.0f} {suffix}" if suffix == "B" else f"{size:.1f} {suffix}"
        size /= 1000
    raise AssertionError("unreachable")


class Progress:
    """Shows records read, scored, dead letters, records/s, the ETA, the judges and the queues.

    On a terminal a live line (rich) is refreshed a few times a second; otherwise a timestamped
    line goes to ``stream`` every ``interval_s`` seconds. ``clock`` (monotonic seconds) and
    ``wall`` (Unix time, for the timestamp) are injectable for tests.
    """

    def __init__(
        self,
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        tty: bool | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and (self.stream.isatty() if tty is None else tty)
        self.interval_s = interval_s
        self.clock = clock
        self.wall = wall
        self.started = clock()
        self.stats = RunStats()
        self.gauges = Gauges()
        self._records = WindowRate()
        self._read0: int | None = None  # records an earlier attempt had read (a resume)
        self._input = WindowRate()
        self._requests: dict[str, WindowRate] = {}
        self._last_line = self.started
        self._done0: int | None = None  # size_done at the first tick (an earlier attempt's share)
        self._done: float | None = None
        self._ticked = False
        self._last_live = -1.0
        self._live: Any = None
        self._task: Any = None

    def __enter__(self) -> Self:
        if self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, SpinnerColumn, TextColumn
            from rich.progress import Progress as RichProgress
            from rich.table import Column

            prog = RichProgress(
                SpinnerColumn(),
                BarColumn(bar_width=20),
                # the whole line, wrapped on a narrow terminal rather than cut off
                TextColumn("{task.description}", table_column=Column(ratio=1, no_wrap=False, overflow="fold")),
                transient=True,
                console=Console(file=self.stream),
            )
            prog.start()
            self._live = prog
            self._task = prog.add_task("starting…", total=None)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    @property
    def sample_every_s(self) -> float:
        """How often the sampler should tick: once a second, or twice per line interval."""
        return min(SAMPLE_EVERY_S, self.interval_s / 2)

    # -- feeds -----------------------------------------------------------------------------------

    def update(self, stats: RunStats) -> None:
        """The latest counts (the sink stage, after every batch)."""
        self.stats = stats
        now = self.clock()
        self._records.add(now, stats.counts["read"])  # (per batch: a cheap deque update)
        # with a sampler, the timestamped lines keep its clock (they come even when no batch ends)
        if not self._ticked or self._live is not None:
            self._show(now)

    def resumed_from(self, read: int) -> None:
        """Records an earlier attempt had read (restored from the checkpoint): not this one's rate."""
        self._read0 = (self._read0 or 0) + read

    def tick(self, gauges: Gauges) -> None:
        """The latest gauges (the sampler, about once a second)."""
        self.gauges = gauges
        self._ticked = True
        now = self.clock()
        self._records.add(now, self.stats.counts["read"])
        self._done = self._finished_part(gauges)
        if self._done is not None:
            self._input.add(now, self._done)
        for name, j in gauges.judges.items():
            self._requests.setdefault(name, WindowRate()).add(now, j.requests)
        self._show(now)

    # -- what is shown ---------------------------------------------------------------------------

    def records_per_s(self) -> float:
        """Records this invocation read per second since it started: the summary's
        ``records_per_s`` (an earlier attempt's records, on a resume, are not this one's)."""
        read = self.stats.counts["read"] - (self._read0 or 0)
        return read / max(self.clock() - self.started, 1e-9)

    def _finished_part(self, g: Gauges) -> float | None:
        """How much of the input is finished: what was read, less the records still in flight
        (at the average size of the records this invocation took). The source reads ahead of
        the workers by the stream buffers and every batch in flight: a judged run can hold
        thousands of records, which must not count as done."""
        if g.size_done is None:
            return None
        if self._done0 is None:
            self._done0 = g.size_done
        if g.taken <= 0 or g.in_flight <= 0:
            return float(g.size_done)
        per_record = (g.size_done - self._done0) / g.taken
        return max(g.size_done - g.in_flight * per_record, float(self._done0))

    def eta_s(self) -> float | None:
        """Seconds until the input is finished, at its rate over the last minute."""
        return eta_s(self.gauges.size_total, self._done, self._input.per_s())

    def fraction(self) -> float | None:
        """The finished share of the input, when its size is known."""
        g = self.gauges
        if not g.size_total or self._done is None:
            return None
        return min(self._done / g.size_total, 1.0)

    def judge_rpm(self, name: str) -> float | None:
        """Requests per minute actually sent to judge ``name`` over the last minute."""
        rate = self._requests.get(name)
        per_s = rate.per_s() if rate is not None else None
        return None if per_s is None else per_s * 60.0

    def line(self, stats: RunStats | None = None) -> str:
        """One progress line (without timestamp)."""
        c = (stats or self.stats).counts
        g = self.gauges
        parts = [
            f"read {c['read']:,}  scored {c['scored']:,}  dead letters {c['dead_letters']:,}",
            f"{self.records_per_s():,.0f} rec/s",
        ]
        frac = self.fraction()
        if frac is not None and g.size_total is not None:
            eta = self.eta_s()
            left = "ETA ?" if eta is None else f"ETA {format_duration(eta)}"
            parts.append(f"{frac:.0%} of {format_size(g.size_total, g.size_unit)}, {left}")
        for name, j in sorted(g.judges.items()):
            rpm = self.judge_rpm(name)
            rate = "? req/min" if rpm is None else f"{rpm:,.0f} req/min"
            limit = "" if j.limit_rpm is None else f" (limit {j.limit_rpm:,.0f})"
            parts.append(f"judge {name}: {j.in_flight} in flight, {rate}{limit}")
        if g.source_note:
            parts.append(g.source_note)
        if g.queues:
            parts.append("queued " + ", ".join(f"{s} {used}/{size}" for s, (used, size) in g.queues.items()))
        if g.grace_left_s is not None:
            parts.append(
                f"stopping: finishing {g.in_flight:,} in-flight records, grace {format_duration(g.grace_left_s)} left"
            )
        return " | ".join(parts)

    def timestamp(self) -> str:
        return dt.datetime.fromtimestamp(self.wall(), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _show(self, now: float) -> None:
        if not self.enabled:
            return
        if self._live is not None:
            if now - self._last_live >= 0.2:
                self._last_live = now
                g = self.gauges
                total = g.size_total if g.size_total and self._done is not None else None
                self._live.update(self._task, description=self.line(), total=total, completed=self._done or 0)
        elif now - self._last_line >= self.interval_s:
            self._last_line = now
            self.emit(now)

    def emit(self, now: float) -> None:
        """Write one progress report (a subclass may send it elsewhere)."""
        print(f"{self.timestamp()} assay: {self.line()}", file=self.stream, flush=True)


def gauges_of(pipeline: Pipeline, pool: Any = None, *, now: float | None = None) -> Gauges:
    """Read the gauges of a running pipeline (and its judge pool, ``JudgePool`` or None)."""
    source = pipeline.source
    unit = source.size_unit
    total = source.size_hint()
    done = source.size_done()
    if done is None and unit == "records" and total is not None:
        done = pipeline.emitted
    judges: dict[str, JudgeGauge] = {}
    stats: dict[str, dict[str, Any]] = pool.stats() if pool is not None else {}
    for name, j in stats.items():
        judges[name] = JudgeGauge(int(j.get("in_flight") or 0), int(j.get("requests") or 0), j.get("rate_rpm"))
    endpoints = getattr(pool, "endpoints", None) or {}
    latencies = {name: tuple(ep.stats.latencies) for name, ep in endpoints.items()}
    grace = None
    if pipeline.stop_deadline is not None:
        grace = max(pipeline.stop_deadline - (time.monotonic() if now is None else now), 0.0)
    note = source.progress_note() if hasattr(source, "progress_note") else None
    return Gauges(
        total,
        done,
        unit,
        pipeline.in_flight,
        pipeline.emitted,
        pipeline.queue_depths(),
        judges,
        grace,
        judge_stats=stats,
        judge_latencies=latencies,
        source_note=note,
    )


async def sample_gauges(pipeline: Pipeline, sink: Any, pool: Any = None, *, every_s: float | None = None) -> None:
    """Hand ``sink.tick`` the pipeline's gauges until cancelled: every ``every_s`` seconds, by
    default ``sink.sample_every_s`` (a :class:`Progress`: often enough for its line interval)."""
    every = every_s if every_s is not None else getattr(sink, "sample_every_s", SAMPLE_EVERY_S)
    while True:
        sink.tick(gauges_of(pipeline, pool))
        await anyio.sleep(every)
