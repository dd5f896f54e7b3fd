"""The prompt constants of ``openevals.prompts.rag.helpfulness``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

RAG_HELPFULNESS_PROMPT = prompt_text("rag_helpfulness")

__all__ = ["RAG_HELPFULNESS_PROMPT"]
