"""Helpers for the end-to-end run tests: a slow user evaluator (so a run can be interrupted
midway) and how many rows a run's checkpoints say are durable."""

from __future__ import annotations

import json
from pathlib import Path


def slow_evaluator(seconds: float) -> str:
    """The source of a module ``slowmod`` whose ``slow`` evaluator sleeps per trace."""
    return f"""
import time

def slow(outputs, **kwargs):
    time.sleep({seconds})
    return {{"key": "slow", "score": 1.0}}
"""


def checkpointed_rows(root: Path) -> int:
    """Rows the checkpoints under ``root/.assay`` record as durable (all writers)."""
    total = 0
    for ck in (root / ".assay" / "checkpoints").glob("*/writer-*.json"):
        try:
            total += json.loads(ck.read_text())["stats"]["counts"]["scored"]
        except (OSError, ValueError, KeyError):
            continue
    return total
