"""The prompt constants of ``openevals.prompts.security.prompt_injection``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

PROMPT_INJECTION_PROMPT = prompt_text("prompt_injection")

__all__ = ["PROMPT_INJECTION_PROMPT"]
