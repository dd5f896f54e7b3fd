"""Structured log events: :func:`log_event` writes one event (``run_started``, ``input_skipped``,
``sampling_counted``, …) with its fields to the ``assay.events`` logger.

At the bottom of the package, so every layer may write one; how the lines look (text or JSON,
tagged with the run id, secrets redacted) is decided by the handler
:func:`assay.observability.logs.setup_logging` installs.
"""

from __future__ import annotations

import logging
from typing import Any

EVENT_LOGGER = "assay.events"
#: The attributes of a ``LogRecord``: an event field of that name is renamed (``name`` → ``name_``).
RESERVED = frozenset(vars(logging.makeLogRecord({})))


def log_event(event: str, level: int = logging.INFO, message: str = "", **fields: Any) -> None:
    """Log one structured event (``run_started``, ``lock_wait``, ``run_finished``, …) with its fields."""
    clash = RESERVED.intersection(fields)
    if clash:  # LogRecord attributes cannot be overwritten through ``extra``
        for name in clash:
            fields[f"{name}_"] = fields.pop(name)
    logging.getLogger(EVENT_LOGGER).log(level, message or event, extra={"event": event, **fields})
