"""What surrounds one ``assay run`` for operations: its run id, logs, metrics and the end-of-run output.

The CLI builds one :class:`RunSession` from its options, gets the progress display from it, and
hands it the finished run's report; the engine itself knows nothing of logs formats or Prometheus.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from assay.exceptions import ConfigError
from assay.observability.logs import ObservedProgress, log_event, setup_logging

if TYPE_CHECKING:
    from assay.config import RunConfig
    from assay.observability.metrics import RunMetrics
    from assay.pipeline.progress import Gauges
    from assay.pipeline.summary import RunStats


@dataclass
class RunSession:
    """Logs and metrics of one invocation (see the module docstring)."""

    log_format: str = "text"
    metrics_port: int | None = None
    metrics_addr: str = "0.0.0.0"
    metrics_textfile: str | None = None
    metrics_push: str | None = None
    metrics_job: str = "assay"
    progress_interval_s: float = 30.0
    secrets: list[str] = field(default_factory=list)
    run_id: str | None = None
    metrics: RunMetrics | None = None
    quiet: bool = False
    """``-q``: text logs show errors only (JSON events stay: a JSON log is what was asked for)."""
    verbose: bool = False
    """``--verbose``: debug logs too, with the Kafka client's own messages."""

    @property
    def wants_metrics(self) -> bool:
        return self.metrics_port is not None or bool(self.metrics_textfile) or bool(self.metrics_push)

    def start(self, config: RunConfig, **fields: Any) -> RunConfig:
        """Fix the run id (so logs, metrics and rows agree), set up logging and metrics, log
        ``run_started``; returns the config carrying the run id."""
        from assay.config import stable_run_id

        self.run_id = config.run_id or stable_run_id(config)
        config = config.model_copy(update={"run_id": self.run_id})
        quiet = self.quiet and self.log_format == "text"
        level = logging.ERROR if quiet else logging.DEBUG if self.verbose else logging.INFO
        setup_logging(self.log_format, self.run_id, self.secrets, level=level)
        if self.wants_metrics:
            try:
                from assay.observability.metrics import RunMetrics
            except ImportError as exc:
                raise ConfigError(str(exc)) from exc
            self.metrics = RunMetrics(self.run_id)
            if self.metrics_port is not None:
                port = self.metrics.serve(self.metrics_port, self.metrics_addr)
                log_event("metrics_serving", addr=self.metrics_addr, port=port)
        log_event("run_started", **{k: v for k, v in fields.items() if v is not None})
        return config

    def progress(self, *, enabled: bool) -> ObservedProgress:
        """The progress display: rich on a terminal, a timestamped line every
        ``progress_interval_s`` otherwise, ``progress`` events for ``json``; it feeds the metrics
        (counts on every update, queue depths on every tick)."""
        observers: list[Callable[[RunStats], None]] = []
        gauge_observers: list[Callable[[Gauges], None]] = []
        if self.metrics is not None:
            observers.append(self.metrics.observer())
            gauge_observers.append(self.metrics.observe_gauges)
        return ObservedProgress(
            enabled=enabled,
            events=self.log_format == "json",
            observers=observers,
            gauge_observers=gauge_observers,
            interval_s=self.progress_interval_s,
        )

    def finish(self, summary: dict[str, Any], exit_code: int, messages: Iterable[str]) -> None:
        """Log ``run_finished`` (and each message as a warning) and write/push the metrics."""
        level = logging.INFO if exit_code == 0 else logging.WARNING
        for msg in messages if self.log_format == "json" else ():  # text: the CLI prints them
            log_event("run_message", logging.WARNING, msg, exit_code=exit_code)
        log_event(
            "run_finished",
            level,
            status=summary.get("status"),
            exit_code=exit_code,
            counts=summary.get("counts"),
            totals=summary.get("totals"),
            wall_time_s=summary.get("wall_time_s"),
            error=(summary.get("error") or {}).get("message"),  # JSON logs: the only place it is said
        )
        if self.metrics is None:
            return
        self.metrics.update_from_summary({**summary, "exit_code": exit_code})
        try:
            if self.metrics_textfile:
                self.metrics.write_textfile(self.metrics_textfile)
                log_event("metrics_written", path=self.metrics_textfile)
            if self.metrics_push:
                self.metrics.push(self.metrics_push, self.metrics_job, {"instance": os.uname().nodename})
                log_event("metrics_pushed", url=self.metrics_push, job=self.metrics_job)
        except OSError as exc:  # the run's outcome stands; a metrics sink being down is reported only
            log_event("metrics_failed", logging.ERROR, f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()
