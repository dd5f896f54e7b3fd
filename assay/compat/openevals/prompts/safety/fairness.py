"""The prompt constants of ``openevals.prompts.safety.fairness``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

FAIRNESS_PROMPT = prompt_text("fairness")

__all__ = ["FAIRNESS_PROMPT"]
