"""The evaluator catalog. Importing this package imports no ML stack and no HTTP client."""

from assay.evaluators.base import (
    AsyncEvaluator,
    BaseEvaluator,
    Evaluator,
    EvaluatorParams,
    MultiEvaluator,
)
from assay.evaluators.tool_use import ToolCallAccuracy, ToolUse
from assay.evaluators.trajectory import TrajectoryMatch

__all__ = [
    "AsyncEvaluator",
    "BaseEvaluator",
    "Evaluator",
    "EvaluatorParams",
    "MultiEvaluator",
    "ToolCallAccuracy",
    "ToolUse",
    "TrajectoryMatch",
]
