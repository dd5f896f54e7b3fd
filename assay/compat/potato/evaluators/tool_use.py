"""``potato.evaluators.tool_use``."""

from __future__ import annotations

from assay.evaluators.potato import ToolCallAccuracyEvaluator, ToolUseEvaluator

__all__ = ["ToolCallAccuracyEvaluator", "ToolUseEvaluator"]
