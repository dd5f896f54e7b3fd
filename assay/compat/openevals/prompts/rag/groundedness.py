"""The prompt constants of ``openevals.prompts.rag.groundedness``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

RAG_GROUNDEDNESS_PROMPT = prompt_text("rag_groundedness")

__all__ = ["RAG_GROUNDEDNESS_PROMPT"]
