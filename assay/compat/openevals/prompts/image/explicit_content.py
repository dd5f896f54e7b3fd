"""The prompt constants of ``openevals.prompts.image.explicit_content``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

EXPLICIT_CONTENT_PROMPT = prompt_text("explicit_content")

__all__ = ["EXPLICIT_CONTENT_PROMPT"]
