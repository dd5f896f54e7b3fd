"""The prompt constants of ``openevals.prompts.quality.code_correctness``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

CODE_CORRECTNESS_PROMPT = prompt_text("code_correctness")
CODE_CORRECTNESS_PROMPT_WITH_REFERENCE_OUTPUTS = prompt_text("code_correctness_with_reference")

__all__ = ["CODE_CORRECTNESS_PROMPT", "CODE_CORRECTNESS_PROMPT_WITH_REFERENCE_OUTPUTS"]
