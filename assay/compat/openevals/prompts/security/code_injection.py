"""The prompt constants of ``openevals.prompts.security.code_injection``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

CODE_INJECTION_PROMPT = prompt_text("code_injection")

__all__ = ["CODE_INJECTION_PROMPT"]
