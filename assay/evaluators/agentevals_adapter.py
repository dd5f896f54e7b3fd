"""potato's ``agentevals_adapter`` names. assay implements the graph trajectory evaluators itself
(:mod:`assay.evaluators.graph_trajectory`), so they are always available.

>>> is_available()
True
>>> graph_trajectory_strict_match().key
'graph_trajectory_strict_match'
"""

from __future__ import annotations

from typing import Any

from assay.evaluators.graph_trajectory import GraphTrajectoryJudge, GraphTrajectoryStrictMatch


def is_available() -> bool:
    """Always True: no third-party package is needed."""
    return True


def graph_trajectory_strict_match(**params: Any) -> GraphTrajectoryStrictMatch:
    """The strict graph trajectory evaluator (key ``graph_trajectory_strict_match``)."""
    return GraphTrajectoryStrictMatch(params)


def graph_trajectory_llm_judge(**params: Any) -> GraphTrajectoryJudge:
    """The graph trajectory LLM judge (key ``graph_trajectory_accuracy``)."""
    return GraphTrajectoryJudge(params)


__all__ = ["graph_trajectory_llm_judge", "graph_trajectory_strict_match", "is_available"]
