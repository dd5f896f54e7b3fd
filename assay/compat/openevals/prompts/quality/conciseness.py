"""The prompt constants of ``openevals.prompts.quality.conciseness``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

CONCISENESS_PROMPT = prompt_text("conciseness")

__all__ = ["CONCISENESS_PROMPT"]
