"""``from openevals import …`` → ``from assay.compat.openevals import …`` (see :mod:`assay.compat`)."""

from __future__ import annotations

from assay.compat.openevals.llm import create_async_llm_as_judge, create_llm_as_judge
from assay.compat.trajectory import (
    create_async_trajectory_llm_as_judge,
    create_async_trajectory_match_evaluator,
    create_trajectory_llm_as_judge,
    create_trajectory_match_evaluator,
)

__all__ = [
    "create_async_llm_as_judge",
    "create_async_trajectory_llm_as_judge",
    "create_async_trajectory_match_evaluator",
    "create_llm_as_judge",
    "create_trajectory_llm_as_judge",
    "create_trajectory_match_evaluator",
]
