"""The prompt constants of ``openevals.prompts.trajectory.tool_selection``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

TOOL_SELECTION_PROMPT = prompt_text("tool_selection")

__all__ = ["TOOL_SELECTION_PROMPT"]
