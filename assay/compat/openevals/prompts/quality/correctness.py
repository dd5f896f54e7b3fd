"""The prompt constants of ``openevals.prompts.quality.correctness``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

CORRECTNESS_PROMPT = prompt_text("correctness")

__all__ = ["CORRECTNESS_PROMPT"]
