"""The prompt constants of ``openevals.prompts.image.sensitive_imagery``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

SENSITIVE_IMAGERY_PROMPT = prompt_text("sensitive_imagery")

__all__ = ["SENSITIVE_IMAGERY_PROMPT"]
