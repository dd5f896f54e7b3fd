"""The prompt constants of ``openevals.prompts.safety.toxicity``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

TOXICITY_PROMPT = prompt_text("toxicity")

__all__ = ["TOXICITY_PROMPT"]
