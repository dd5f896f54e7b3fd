"""The prompt constants of ``openevals.prompts.conversation.knowledge_retention``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

KNOWLEDGE_RETENTION_PROMPT = prompt_text("knowledge_retention")

__all__ = ["KNOWLEDGE_RETENTION_PROMPT"]
