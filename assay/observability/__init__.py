"""Logs and metrics a scheduler or a dashboard can read.

``RunMetrics`` needs the ``assay[metrics]`` extra (``prometheus_client``) and is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assay.observability.logs import (
    ObservedProgress,
    log_event,
    redact,
    secret_env_names,
    secrets_of_run_file,
    setup_logging,
)

if TYPE_CHECKING:
    from assay.observability.metrics import RunMetrics

__all__ = [
    "ObservedProgress",
    "RunMetrics",
    "log_event",
    "redact",
    "secret_env_names",
    "secrets_of_run_file",
    "setup_logging",
]


def __getattr__(name: str) -> Any:
    if name == "RunMetrics":
        from assay.observability.metrics import RunMetrics

        return RunMetrics
    raise AttributeError(name)
