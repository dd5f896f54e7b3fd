"""The prompt constants of ``openevals.prompts.voice.audio_quality``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

AUDIO_QUALITY_PROMPT = prompt_text("audio_quality")

__all__ = ["AUDIO_QUALITY_PROMPT"]
