"""The evaluator catalog. Importing this package imports no ML stack and no HTTP client
(the embedding model loads on first use; judges import their HTTP client when built)."""

from assay.evaluators.base import (
    AsyncEvaluator,
    BaseEvaluator,
    Evaluator,
    EvaluatorParams,
    MultiEvaluator,
)
from assay.evaluators.code import MypyCheck, PyrightCheck
from assay.evaluators.composite import Composite
from assay.evaluators.custom import PythonEvaluator
from assay.evaluators.embedding import EmbeddingSimilarity
from assay.evaluators.heuristic import (
    Contains,
    EditDistance,
    ExactMatch,
    JsonSchemaMatch,
    JsonValid,
    RegexMatch,
)
from assay.evaluators.json_match import JsonMatch
from assay.evaluators.scenario import (
    ErrorSuggestions,
    Escalation,
    InterruptRejection,
    MaxTurns,
    PendingConfirmation,
    ResponseContains,
    RoutingAccuracy,
    TaskCompleteSignal,
    TokenBudget,
    ToolGraph,
)
from assay.evaluators.tool_use import ToolCallAccuracy, ToolUse
from assay.evaluators.trajectory import TrajectoryMatch

__all__ = [
    "AsyncEvaluator",
    "BaseEvaluator",
    "Composite",
    "Contains",
    "EditDistance",
    "EmbeddingSimilarity",
    "ErrorSuggestions",
    "Escalation",
    "Evaluator",
    "EvaluatorParams",
    "ExactMatch",
    "InterruptRejection",
    "JsonMatch",
    "JsonSchemaMatch",
    "JsonValid",
    "MaxTurns",
    "MultiEvaluator",
    "MypyCheck",
    "PendingConfirmation",
    "PyrightCheck",
    "PythonEvaluator",
    "RegexMatch",
    "ResponseContains",
    "RoutingAccuracy",
    "TaskCompleteSignal",
    "TokenBudget",
    "ToolCallAccuracy",
    "ToolGraph",
    "ToolUse",
    "TrajectoryMatch",
]
