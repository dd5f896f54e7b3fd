"""The prompt constants of ``openevals.prompts.conversation.agent_tone``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

AGENT_TONE_PROMPT = prompt_text("agent_tone")

__all__ = ["AGENT_TONE_PROMPT"]
