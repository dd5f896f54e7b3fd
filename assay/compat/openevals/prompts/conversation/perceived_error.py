"""The prompt constants of ``openevals.prompts.conversation.perceived_error``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

PERCEIVED_ERROR_PROMPT = prompt_text("perceived_error")

__all__ = ["PERCEIVED_ERROR_PROMPT"]
