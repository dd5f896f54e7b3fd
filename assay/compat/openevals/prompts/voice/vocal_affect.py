"""The prompt constants of ``openevals.prompts.voice.vocal_affect``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

VOCAL_AFFECT_PROMPT = prompt_text("vocal_affect")

__all__ = ["VOCAL_AFFECT_PROMPT"]
