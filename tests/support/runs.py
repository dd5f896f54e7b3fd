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


def checkpointed_rows(root: Path, since: float = 0.0) -> int:
    """Rows the checkpoints under ``root/.assay`` record as durable (all writers, and the writers
    of earlier attempts carried over); 0 until a writer saved a checkpoint after ``since``
    (``time.time()``: a run started then has committed at least once)."""
    total = 0
    fresh = False
    base = root / ".assay" / "checkpoints"
    for ck in [*base.glob("*/writer-*.json"), *base.glob("*/carried.json")]:
        try:
            fresh = fresh or (ck.name.startswith("writer-") and ck.stat().st_mtime >= since)
            total += json.loads(ck.read_text())["stats"]["counts"]["scored"]
        except (OSError, ValueError, KeyError):
            continue
    return total if fresh else 0
