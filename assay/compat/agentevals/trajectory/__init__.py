"""``from agentevals.trajectory import …`` (see :mod:`assay.compat`): the trajectory factories,
the prompt constants and the agent-evaluation catalog's ``check_trajectory``."""

from __future__ import annotations

from assay.compat.agentevals.trajectory.match import (
    create_async_trajectory_match_evaluator,
    create_trajectory_match_evaluator,
)
from assay.compat.trajectory import (
    TRAJECTORY_ACCURACY_PROMPT,
    TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE,
    create_async_trajectory_llm_as_judge,
    create_trajectory_llm_as_judge,
)
from assay.evaluators.catalog import check_trajectory

__all__ = [
    "TRAJECTORY_ACCURACY_PROMPT",
    "TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE",
    "check_trajectory",
    "create_async_trajectory_llm_as_judge",
    "create_async_trajectory_match_evaluator",
    "create_trajectory_llm_as_judge",
    "create_trajectory_match_evaluator",
]
