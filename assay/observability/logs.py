"""Run logs for schedulers and log shippers: ``--log-format text|json`` on stderr, secrets redacted.

``json`` writes one object per line: ``time`` (ISO 8601, UTC), ``level``, ``run_id``, ``event``,
``message`` and the event's fields (counts, exit code, …). Every line — assay's own events and the
warnings of any ``assay.*`` logger — passes through :func:`redact` with the values of the run's
secrets, so an API key never reaches a log even when an error message quotes it::

    setup_logging("json", run_id="nightly-2026-11-21", secrets=secrets_of_run_file("nightly.yaml"))
    log_event("run_started", run_file="nightly.yaml", ds="2026-11-21")
    # {"time": "2026-11-22T02:00:00.123+00:00", "level": "info", "run_id": "nightly-2026-11-21",
    #  "event": "run_started", "run_file": "nightly.yaml", "ds": "2026-11-21"}
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TextIO

import orjson
import yaml

from assay.events import RESERVED
from assay.events import log_event as log_event
from assay.exceptions import ConfigError
from assay.pipeline.progress import Gauges, Progress
from assay.pipeline.summary import RunStats

LogFormat = Literal["text", "json"]

#: The logger every assay module logs under; :func:`setup_logging` gives it its handler.
ROOT_LOGGER = "assay"
REDACTED = "[REDACTED]"
#: Shorter values are not treated as secrets (redacting "1" or "true" would garble every line).
MIN_SECRET_LEN = 6

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}")


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of every secret (longest first) replaced by ``[REDACTED]``."""
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LEN}, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def secret_env_names(data: Any) -> set[str]:
    """Names of the environment variables a parsed run file takes values from: the value of every
    key ending in ``_env`` (``api_key_env: OPENAI_API_KEY``) and every ``${NAME}`` reference."""
    names: set[str] = set()
    if isinstance(data, Mapping):
        for k, v in data.items():
            if isinstance(k, str) and k.endswith("_env") and isinstance(v, str):
                names.add(v)
            names |= secret_env_names(v)
    elif isinstance(data, list):
        for v in data:
            names |= secret_env_names(v)
    elif isinstance(data, str):
        names.update(_ENV_REF.findall(data))
    return names


def secrets_of_run_file(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The values (from ``environ``, default ``os.environ``) of the variables the run file names;
    an unreadable file yields none (its error is reported by the loader, not here)."""
    env = os.environ if environ is None else environ
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []
    return secret_values(secret_env_names(data), env)


def secret_values(names: Iterable[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the named environment variables that are set (and long enough to be secrets)."""
    env = os.environ if environ is None else environ
    return [env[n] for n in sorted(set(names)) if len(env.get(n, "")) >= MIN_SECRET_LEN]


class _Formatter(logging.Formatter):
    def __init__(self, fmt: LogFormat, run_id: str | None, secrets: list[str]) -> None:
        super().__init__()
        self.fmt = fmt
        self.run_id = run_id
        self.secrets = secrets

    def format(self, record: logging.LogRecord) -> str:
        fields = {k: v for k, v in vars(record).items() if k not in RESERVED and not k.startswith("_")}
        event = fields.pop("event", None) or record.name
        message = record.getMessage()
        if record.exc_info:
            message = f"{message}\n{self.formatException(record.exc_info)}"
        when = dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds")
        if self.fmt == "json":
            obj: dict[str, Any] = {"time": when, "level": record.levelname.lower(), "run_id": self.run_id}
            obj["event"] = event
            if message and message != event:
                obj["message"] = message
            obj.update(fields)
            line = orjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
        else:
            extra = " ".join(f"{k}={_text_value(v)}" for k, v in fields.items())
            text = message if message and message != event else ""
            line = " ".join(p for p in (when, record.levelname, event, text, extra) if p)
        return redact(line, self.secrets)


def _text_value(v: Any) -> str:
    if isinstance(v, str):
        return v if v and " " not in v else orjson.dumps(v).decode()
    return orjson.dumps(v, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


_handler: logging.Handler | None = None


def setup_logging(
    fmt: str = "text",
    run_id: str | None = None,
    secrets: Iterable[str] = (),
    *,
    stream: TextIO | None = None,
    level: int = logging.INFO,
) -> logging.Logger:
    """Send every ``assay.*`` log record to ``stream`` (default stderr) in ``fmt`` (``text`` or
    ``json``), tagged with ``run_id`` and redacted of ``secrets``. Calling it again replaces the
    handler (one per process). Returns the ``assay`` logger."""
    global _handler
    if fmt not in ("text", "json"):
        raise ConfigError(f"--log-format: expected text or json, got {fmt!r}")
    logger = logging.getLogger(ROOT_LOGGER)
    if _handler is not None:
        logger.removeHandler(_handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_Formatter(fmt, run_id, list(secrets)))  # type: ignore[arg-type]
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    _handler = handler
    return logger


class ObservedProgress(Progress):
    """The run's progress display, plus observers (e.g. metrics) called on every update and
    gauge observers called on every tick (about once a second, even with ``--quiet``).

    With ``events`` (``--log-format json``) the progress goes out as ``progress`` log events at a
    fixed interval instead of the plain lines, which would not parse as JSON."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        events: bool = False,
        observers: Iterable[Callable[[RunStats], None]] = (),
        gauge_observers: Iterable[Callable[[Gauges], None]] = (),
        interval_s: float = 30.0,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(
            enabled=enabled, interval_s=interval_s, stream=stream, clock=clock, tty=False if events else None
        )
        self.events = events and enabled
        self.observers = list(observers)
        self.gauge_observers = list(gauge_observers)

    def update(self, stats: RunStats) -> None:
        for observe in self.observers:
            observe(stats)
        super().update(stats)

    def tick(self, gauges: Gauges) -> None:
        for observe in self.gauge_observers:
            observe(gauges)
        super().tick(gauges)

    def emit(self, now: float) -> None:
        if not self.events:
            super().emit(now)
            return
        g = self.gauges
        eta = self.eta_s()
        fields: dict[str, Any] = {
            "counts": dict(self.stats.counts),
            "records_per_s": round(self.records_per_s(), 1),
            "in_flight": g.in_flight,
            "queues": {stage: used for stage, (used, _size) in g.queues.items()},
        }
        if g.size_total is not None:
            fields.update(size_total=g.size_total, size_done=g.size_done, size_unit=g.size_unit)
            fields["eta_s"] = None if eta is None else round(eta, 1)
        if g.judges:
            fields["judges"] = {
                name: {"in_flight": j.in_flight, "rpm": _round(self.judge_rpm(name)), "limit_rpm": j.limit_rpm}
                for name, j in g.judges.items()
            }
        if g.grace_left_s is not None:
            fields["grace_left_s"] = round(g.grace_left_s, 1)
        log_event("progress", message=self.line(), **fields)


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)
