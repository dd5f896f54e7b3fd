"""The prompt constants of ``openevals.prompts.conversation.task_completion``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

TASK_COMPLETION_PROMPT = prompt_text("task_completion")

__all__ = ["TASK_COMPLETION_PROMPT"]
