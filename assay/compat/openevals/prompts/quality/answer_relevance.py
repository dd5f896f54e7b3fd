"""The prompt constants of ``openevals.prompts.quality.answer_relevance``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

ANSWER_RELEVANCE_PROMPT = prompt_text("answer_relevance")

__all__ = ["ANSWER_RELEVANCE_PROMPT"]
