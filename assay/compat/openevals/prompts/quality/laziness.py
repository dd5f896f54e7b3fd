"""The prompt constants of ``openevals.prompts.quality.laziness``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

LAZINESS_PROMPT = prompt_text("laziness")

__all__ = ["LAZINESS_PROMPT"]
