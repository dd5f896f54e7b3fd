"""Custom argument matchers used by the trajectory conformance cases.

Loaded by file path from both ``generate_trajectory_golden.py`` (reference venv) and
``test_trajectory_golden.py`` (assay), so the two sides run exactly the same functions.
Both are sensitive to the argument order, which is what the agentevals/potato swap changes.
"""

from __future__ import annotations

from typing import Any


def same_keys(out: dict[str, Any], ref: dict[str, Any]) -> bool:
    """The agent passed exactly the reference's argument names (values ignored)."""
    return set(out) == set(ref)


def out_has_more_keys(out: dict[str, Any], ref: dict[str, Any]) -> bool:
    """The agent passed at least as many arguments as the reference (order-sensitive on purpose)."""
    return len(out) >= len(ref)


CALLABLES = {"same_keys": same_keys, "out_has_more_keys": out_has_more_keys}
