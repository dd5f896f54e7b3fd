"""Progress reporting: a rich progress line on a terminal, plain log lines otherwise."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Protocol, Self, TextIO

from assay.pipeline.summary import RunStats


class ProgressSink(Protocol):
    """What the engine reports progress to (``Progress``, or a shard worker's shared counters)."""

    def update(self, stats: RunStats) -> None: ...


class Progress:
    """Shows records read, scored, failed and the rate. Updated by the sink stage."""

    def __init__(self, *, enabled: bool = True, stream: TextIO | None = None, interval_s: float = 10.0) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()
        self.interval_s = interval_s
        self.started = time.perf_counter()
        self._last = 0.0
        self._live: object | None = None
        self._task: object | None = None

    def __enter__(self) -> Self:
        if self.tty:
            from rich.progress import Progress as RichProgress
            from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

            prog = RichProgress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                transient=True,
                console=None,
            )
            prog.start()
            self._live = prog
            self._task = prog.add_task("starting…", total=None)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.stop()  # type: ignore[attr-defined]
            self._live = None

    def line(self, stats: RunStats) -> str:
        c = stats.counts
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        return (
            f"read {c['read']:,}  scored {c['scored']:,}  failed {c['dead_letters']:,}  "
            f"{c['read'] / elapsed:,.0f} rec/s"
        )

    def update(self, stats: RunStats) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if self._live is not None:
            if now - self._last >= 0.1:
                self._last = now
                self._live.update(self._task, description=self.line(stats))  # type: ignore[attr-defined]
        elif now - self._last >= self.interval_s:
            self._last = now
            print(f"assay: {self.line(stats)}", file=self.stream, flush=True)
