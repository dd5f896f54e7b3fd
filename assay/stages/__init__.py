"""Thin stage functions: the logic lives in traces/, evaluators/ and connectors/."""

from assay.stages.evaluate import EvaluateStage
from assay.stages.normalize import parse_envelope, tool_argument_warnings, trace_warnings, warning_failure

__all__ = [
    "EvaluateStage",
    "parse_envelope",
    "tool_argument_warnings",
    "trace_warnings",
    "warning_failure",
]
