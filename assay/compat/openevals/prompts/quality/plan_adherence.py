"""The prompt constants of ``openevals.prompts.quality.plan_adherence``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

PLAN_ADHERENCE_PROMPT = prompt_text("plan_adherence")

__all__ = ["PLAN_ADHERENCE_PROMPT"]
