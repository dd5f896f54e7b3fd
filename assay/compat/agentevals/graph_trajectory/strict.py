"""``from agentevals.graph_trajectory.strict import graph_trajectory_strict_match``.

>>> t = {"inputs": [], "results": [], "steps": [["__start__", "agent"]]}
>>> graph_trajectory_strict_match(outputs=t, reference_outputs=t)["score"]
True
"""

from __future__ import annotations

from typing import Any

from assay.compat._core import EvaluatorResult, wrap
from assay.evaluators.graph_trajectory import GraphTrajectoryStrictMatch


def graph_trajectory_strict_match(*, outputs: Any, reference_outputs: Any, **kwargs: Any) -> EvaluatorResult:
    """The per-turn node lists are equal, order included (key ``graph_trajectory_strict_match``, a
    bool score); other keyword arguments are ignored, as in agentevals."""
    result: EvaluatorResult = wrap(GraphTrajectoryStrictMatch())(outputs=outputs, reference_outputs=reference_outputs)
    return result


async def graph_trajectory_strict_match_async(
    *, outputs: Any, reference_outputs: Any, **kwargs: Any
) -> EvaluatorResult:
    """:func:`graph_trajectory_strict_match`, awaited."""
    return graph_trajectory_strict_match(outputs=outputs, reference_outputs=reference_outputs)


__all__ = ["graph_trajectory_strict_match", "graph_trajectory_strict_match_async"]
