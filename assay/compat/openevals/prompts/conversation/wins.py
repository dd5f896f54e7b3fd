"""The prompt constants of ``openevals.prompts.conversation.wins``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

WINS_PROMPT = prompt_text("wins")

__all__ = ["WINS_PROMPT"]
