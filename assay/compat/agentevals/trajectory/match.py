"""``from agentevals.trajectory.match import …`` (see :mod:`assay.compat`).

agentevals 0.0.9's field-list override (``{"tool": ["a.b"]}``): a path missing on both sides
matches (openevals fails it; :mod:`assay.compat.openevals.trajectory.match`).
"""

from __future__ import annotations

from typing import Any, cast

from assay.compat._core import AsyncCompatEvaluator, CompatEvaluator
from assay.compat.openevals.types import EvaluatorResult as TypedResult
from assay.compat.openevals.types import ToolArgsMatchMode, TrajectoryMatchMode
from assay.compat.trajectory import _match


def create_trajectory_match_evaluator(
    *,
    trajectory_match_mode: TrajectoryMatchMode = "strict",
    tool_args_match_mode: ToolArgsMatchMode = "exact",
    tool_args_match_overrides: dict[str, Any] | None = None,
) -> CompatEvaluator[TypedResult]:
    """Deterministic trajectory match (``strict``, ``unordered``, ``subset``, ``superset``);
    key ``trajectory_<mode>_match``, a bool score. See docs/semantics.md."""
    return cast(
        "CompatEvaluator[TypedResult]",
        _match(trajectory_match_mode, tool_args_match_mode, tool_args_match_overrides, False, openevals_paths=False),
    )


def create_async_trajectory_match_evaluator(
    *,
    trajectory_match_mode: TrajectoryMatchMode = "strict",
    tool_args_match_mode: ToolArgsMatchMode = "exact",
    tool_args_match_overrides: dict[str, Any] | None = None,
) -> AsyncCompatEvaluator[TypedResult]:
    """:func:`create_trajectory_match_evaluator`, awaited."""
    return cast(
        "AsyncCompatEvaluator[TypedResult]",
        _match(trajectory_match_mode, tool_args_match_mode, tool_args_match_overrides, True, openevals_paths=False),
    )


__all__ = ["create_async_trajectory_match_evaluator", "create_trajectory_match_evaluator"]
