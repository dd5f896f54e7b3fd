"""``from agentevals.trajectory.match import …`` (see :mod:`assay.compat`).

agentevals 0.0.9's field-list override (``{"tool": ["a.b"]}``): a path missing on both sides
matches (openevals fails it; :mod:`assay.compat.openevals.trajectory.match`).
"""

from __future__ import annotations

from typing import Any

from assay.compat._core import CompatEvaluator
from assay.compat.trajectory import _match


def create_trajectory_match_evaluator(
    *,
    trajectory_match_mode: str = "strict",
    tool_args_match_mode: str = "exact",
    tool_args_match_overrides: dict[str, Any] | None = None,
) -> CompatEvaluator:
    """Deterministic trajectory match (``strict``, ``unordered``, ``subset``, ``superset``);
    key ``trajectory_<mode>_match``, a bool score. See docs/semantics.md."""
    return _match(trajectory_match_mode, tool_args_match_mode, tool_args_match_overrides, False, openevals_paths=False)


def create_async_trajectory_match_evaluator(
    *,
    trajectory_match_mode: str = "strict",
    tool_args_match_mode: str = "exact",
    tool_args_match_overrides: dict[str, Any] | None = None,
) -> CompatEvaluator:
    """:func:`create_trajectory_match_evaluator`, awaited."""
    return _match(trajectory_match_mode, tool_args_match_mode, tool_args_match_overrides, True, openevals_paths=False)


__all__ = ["create_async_trajectory_match_evaluator", "create_trajectory_match_evaluator"]
