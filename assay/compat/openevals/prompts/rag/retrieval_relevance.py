"""The prompt constants of ``openevals.prompts.rag.retrieval_relevance``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

RAG_RETRIEVAL_RELEVANCE_PROMPT = prompt_text("rag_retrieval_relevance")

__all__ = ["RAG_RETRIEVAL_RELEVANCE_PROMPT"]
