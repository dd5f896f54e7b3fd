"""``from agentevals.graph_trajectory.llm import create_graph_trajectory_llm_as_judge``.

``outputs`` is a graph trajectory, ``inputs`` the turn inputs (a list, or ``{"inputs": [...]}``);
the prompt's variables are ``{thread}`` and ``{reference_outputs}``. Key
``graph_trajectory_accuracy``.
"""

from __future__ import annotations

from typing import Any, cast

from assay.compat._core import AsyncCompatEvaluator, CompatEvaluator, llm_judge_evaluator
from assay.compat.openevals.types import EvaluatorResult as TypedResult
from assay.evaluators.graph_trajectory import GRAPH_TRAJECTORY_PROMPT, GraphTrajectoryJudge

DEFAULT_REF_COMPARE_PROMPT = GRAPH_TRAJECTORY_PROMPT


def create_graph_trajectory_llm_as_judge(
    *,
    prompt: Any = DEFAULT_REF_COMPARE_PROMPT,
    model: str | None = None,
    feedback_key: str = "graph_trajectory_accuracy",
    judge: Any = None,
    continuous: bool = False,
    choices: list[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: list[dict[str, Any]] | None = None,
) -> CompatEvaluator[TypedResult]:
    """An LLM judge of a LangGraph thread's steps (logical, efficient, like the reference)."""
    return cast("CompatEvaluator[TypedResult]", llm_judge_evaluator(GraphTrajectoryJudge, **locals(), is_async=False))


def create_async_graph_trajectory_llm_as_judge(
    *,
    prompt: Any = DEFAULT_REF_COMPARE_PROMPT,
    model: str | None = None,
    feedback_key: str = "graph_trajectory_accuracy",
    judge: Any = None,
    continuous: bool = False,
    choices: list[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: list[dict[str, Any]] | None = None,
) -> AsyncCompatEvaluator[TypedResult]:
    """:func:`create_graph_trajectory_llm_as_judge`, awaited."""
    return cast(
        "AsyncCompatEvaluator[TypedResult]", llm_judge_evaluator(GraphTrajectoryJudge, **locals(), is_async=True)
    )


__all__ = [
    "DEFAULT_REF_COMPARE_PROMPT",
    "create_async_graph_trajectory_llm_as_judge",
    "create_graph_trajectory_llm_as_judge",
]
