"""The evaluator catalog. Importing this package imports no ML stack and no HTTP client:
the trajectory and tool-use evaluators load at once, every other class on first access
(``from assay.evaluators import ExactMatch`` works as usual)."""

from __future__ import annotations

import importlib
from typing import Any

from assay.evaluators.base import (
    AsyncEvaluator,
    BaseEvaluator,
    Evaluator,
    EvaluatorParams,
    MultiEvaluator,
)
from assay.evaluators.tool_use import ToolCallAccuracy, ToolUse
from assay.evaluators.trajectory import TrajectoryMatch

_LAZY: dict[str, str] = {
    "GraphTrajectoryJudge": "assay.evaluators.graph_trajectory",
    "GraphTrajectoryStrictMatch": "assay.evaluators.graph_trajectory",
    "aextract_langgraph_trajectory_from_thread": "assay.evaluators.graph_trajectory",
    "create_graph_trajectory_llm_as_judge": "assay.evaluators.graph_trajectory",
    "extract_langgraph_trajectory_from_snapshots": "assay.evaluators.graph_trajectory",
    "extract_langgraph_trajectory_from_thread": "assay.evaluators.graph_trajectory",
    "graph_trajectory_llm_judge": "assay.evaluators.graph_trajectory",
    "graph_trajectory_strict_match": "assay.evaluators.graph_trajectory",
    "AgentAsJudgeEvaluator": "assay.evaluators.potato",
    "EmbeddingDistance": "assay.evaluators.potato",
    "JSONSchemaMatch": "assay.evaluators.potato",
    "JSONValid": "assay.evaluators.potato",
    "LLMTrajectoryJudge": "assay.evaluators.potato",
    "RUBRIC_PRESETS": "assay.evaluators.potato",
    "ToolCallAccuracyEvaluator": "assay.evaluators.potato",
    "ToolUseEvaluator": "assay.evaluators.potato",
    "TrajectoryMatchEvaluator": "assay.evaluators.potato",
    "make_rubric_dag": "assay.evaluators.potato",
    "rag_triad": "assay.evaluators.potato",
    "AgentAsJudge": "assay.evaluators.agent_judge",
    "AnswerRelevance": "assay.evaluators.rag",
    "CodeJudge": "assay.evaluators.code_judge",
    "Composite": "assay.evaluators.composite",
    "Contains": "assay.evaluators.heuristic",
    "ContextRelevance": "assay.evaluators.rag",
    "EditDistance": "assay.evaluators.heuristic",
    "EmbeddingSimilarity": "assay.evaluators.embedding",
    "ErrorSuggestions": "assay.evaluators.scenario",
    "Escalation": "assay.evaluators.scenario",
    "ExactMatch": "assay.evaluators.heuristic",
    "Groundedness": "assay.evaluators.rag",
    "InterruptRejection": "assay.evaluators.scenario",
    "JsonMatch": "assay.evaluators.json_match",
    "JsonSchemaMatch": "assay.evaluators.heuristic",
    "JsonValid": "assay.evaluators.heuristic",
    "JudgeEvaluator": "assay.evaluators.judge_base",
    "LLMJudge": "assay.evaluators.llm_judge",
    "MaxTurns": "assay.evaluators.scenario",
    "MypyCheck": "assay.evaluators.code",
    "PendingConfirmation": "assay.evaluators.scenario",
    "PyrightCheck": "assay.evaluators.code",
    "PythonEvaluator": "assay.evaluators.custom",
    "RagTriad": "assay.evaluators.rag",
    "RegexMatch": "assay.evaluators.heuristic",
    "ResponseContains": "assay.evaluators.scenario",
    "RoutingAccuracy": "assay.evaluators.scenario",
    "RubricDag": "assay.evaluators.rubric_dag",
    "TaskCompleteSignal": "assay.evaluators.scenario",
    "TokenBudget": "assay.evaluators.scenario",
    "ToolGraph": "assay.evaluators.scenario",
    "TrajectoryJudge": "assay.evaluators.judge_trajectory",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "RUBRIC_PRESETS",
    "AgentAsJudge",
    "AgentAsJudgeEvaluator",
    "AnswerRelevance",
    "AsyncEvaluator",
    "BaseEvaluator",
    "CodeJudge",
    "Composite",
    "Contains",
    "ContextRelevance",
    "EditDistance",
    "EmbeddingDistance",
    "EmbeddingSimilarity",
    "ErrorSuggestions",
    "Escalation",
    "Evaluator",
    "EvaluatorParams",
    "ExactMatch",
    "GraphTrajectoryJudge",
    "GraphTrajectoryStrictMatch",
    "Groundedness",
    "InterruptRejection",
    "JSONSchemaMatch",
    "JSONValid",
    "JsonMatch",
    "JsonSchemaMatch",
    "JsonValid",
    "JudgeEvaluator",
    "LLMJudge",
    "LLMTrajectoryJudge",
    "MaxTurns",
    "MultiEvaluator",
    "MypyCheck",
    "PendingConfirmation",
    "PyrightCheck",
    "PythonEvaluator",
    "RagTriad",
    "RegexMatch",
    "ResponseContains",
    "RoutingAccuracy",
    "RubricDag",
    "TaskCompleteSignal",
    "TokenBudget",
    "ToolCallAccuracy",
    "ToolCallAccuracyEvaluator",
    "ToolGraph",
    "ToolUse",
    "ToolUseEvaluator",
    "TrajectoryJudge",
    "TrajectoryMatch",
    "TrajectoryMatchEvaluator",
    "aextract_langgraph_trajectory_from_thread",
    "create_graph_trajectory_llm_as_judge",
    "extract_langgraph_trajectory_from_snapshots",
    "extract_langgraph_trajectory_from_thread",
    "graph_trajectory_llm_judge",
    "graph_trajectory_strict_match",
    "make_rubric_dag",
    "rag_triad",
]
