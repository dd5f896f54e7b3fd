"""The prompt constants of ``openevals.prompts.conversation.user_satisfaction``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

USER_SATISFACTION_PROMPT = prompt_text("user_satisfaction")

__all__ = ["USER_SATISFACTION_PROMPT"]
