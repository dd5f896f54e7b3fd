"""The prompt constants of ``openevals.prompts.voice.transcription_accuracy``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

TRANSCRIPTION_ACCURACY_PROMPT = prompt_text("transcription_accuracy")

__all__ = ["TRANSCRIPTION_ACCURACY_PROMPT"]
