"""``from openevals.trajectory.match import …`` (see :mod:`assay.compat`)."""

from __future__ import annotations

from assay.compat.trajectory import create_async_trajectory_match_evaluator, create_trajectory_match_evaluator

__all__ = ["create_async_trajectory_match_evaluator", "create_trajectory_match_evaluator"]
