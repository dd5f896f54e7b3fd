"""The prompt constants of ``openevals.prompts.conversation.support_intent``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

SUPPORT_INTENT_PROMPT = prompt_text("support_intent")

__all__ = ["SUPPORT_INTENT_PROMPT"]
