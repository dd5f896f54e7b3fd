"""The prompt constants of ``openevals.prompts.conversation.language_detection``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

LANGUAGE_DETECTION_PROMPT = prompt_text("language_detection")

__all__ = ["LANGUAGE_DETECTION_PROMPT"]
