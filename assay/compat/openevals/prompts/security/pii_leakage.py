"""The prompt constants of ``openevals.prompts.security.pii_leakage``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

PII_LEAKAGE_PROMPT = prompt_text("pii_leakage")

__all__ = ["PII_LEAKAGE_PROMPT"]
