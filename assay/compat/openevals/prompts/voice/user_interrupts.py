"""The prompt constants of ``openevals.prompts.voice.user_interrupts``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

USER_INTERRUPTS_PROMPT = prompt_text("user_interrupts")

__all__ = ["USER_INTERRUPTS_PROMPT"]
