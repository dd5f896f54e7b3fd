"""The prompt constants of ``openevals.prompts.quality.hallucination``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

HALLUCINATION_PROMPT = prompt_text("hallucination")

__all__ = ["HALLUCINATION_PROMPT"]
