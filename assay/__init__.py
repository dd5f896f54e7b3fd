"""assay: batch-score large corpora of LLM and agent traces.

>>> from assay import TrajectoryMatch
>>> TrajectoryMatch(mode="superset").key
'trajectory_superset_match'
"""

from assay.evaluators import (
    BaseEvaluator,
    Evaluator,
    EvaluatorParams,
    ToolCallAccuracy,
    ToolUse,
    TrajectoryMatch,
)
from assay.exceptions import AssayError, ConfigError, NormalizationError
from assay.records import Envelope, Failure, Position, Result, TraceResult
from assay.registry import build_evaluator, list_evaluators, register_evaluator
from assay.traces import Message, ToolCall, Trace, normalize_record, to_trace

__version__ = "0.1.0"

__all__ = [
    "AssayError",
    "BaseEvaluator",
    "ConfigError",
    "Envelope",
    "Evaluator",
    "EvaluatorParams",
    "Failure",
    "Message",
    "NormalizationError",
    "Position",
    "Result",
    "ToolCall",
    "ToolCallAccuracy",
    "ToolUse",
    "Trace",
    "TraceResult",
    "TrajectoryMatch",
    "__version__",
    "build_evaluator",
    "list_evaluators",
    "normalize_record",
    "register_evaluator",
    "to_trace",
]
