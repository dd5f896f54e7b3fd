"""``potato.evaluators`` (see :mod:`assay.compat.potato`).

>>> from assay.compat.potato.evaluators import ExactMatch, build_evaluator
>>> ExactMatch().evaluate(outputs="hi ", reference_outputs="hi").score
1.0
>>> build_evaluator("contains", {"substring": "x"}).evaluate(outputs="xyz").score
1.0
"""

from __future__ import annotations

from assay.compat.potato.evaluators import agentevals_adapter
from assay.compat.potato.evaluators.agent_as_judge import AgentAsJudgeEvaluator
from assay.compat.potato.evaluators.base import EvaluationResult, Evaluator
from assay.compat.potato.evaluators.heuristic import (
    Contains,
    EditDistance,
    EmbeddingDistance,
    ExactMatch,
    JSONSchemaMatch,
    JSONValid,
    RegexMatch,
)
from assay.compat.potato.evaluators.llm_judge import LLMTrajectoryJudge
from assay.compat.potato.evaluators.rag_triad import (
    AnswerRelevanceEvaluator,
    ContextRelevanceEvaluator,
    GroundednessEvaluator,
    rag_triad,
)
from assay.compat.potato.evaluators.registry import (
    build_evaluator,
    get_supported_evaluators,
    list_evaluators,
    register_evaluator,
)
from assay.compat.potato.evaluators.rubric_dag import RUBRIC_PRESETS, RubricDagEvaluator, make_rubric_dag
from assay.compat.potato.evaluators.tool_use import ToolCallAccuracyEvaluator, ToolUseEvaluator
from assay.compat.potato.evaluators.trajectory import Step, ToolCall, extract_tool_calls, normalize_trajectory
from assay.compat.potato.evaluators.trajectory_match import TrajectoryMatchEvaluator

__all__ = [
    "RUBRIC_PRESETS",
    "AgentAsJudgeEvaluator",
    "AnswerRelevanceEvaluator",
    "Contains",
    "ContextRelevanceEvaluator",
    "EditDistance",
    "EmbeddingDistance",
    "EvaluationResult",
    "Evaluator",
    "ExactMatch",
    "GroundednessEvaluator",
    "JSONSchemaMatch",
    "JSONValid",
    "LLMTrajectoryJudge",
    "RegexMatch",
    "RubricDagEvaluator",
    "Step",
    "ToolCall",
    "ToolCallAccuracyEvaluator",
    "ToolUseEvaluator",
    "TrajectoryMatchEvaluator",
    "agentevals_adapter",
    "build_evaluator",
    "extract_tool_calls",
    "get_supported_evaluators",
    "list_evaluators",
    "make_rubric_dag",
    "normalize_trajectory",
    "rag_triad",
    "register_evaluator",
]
