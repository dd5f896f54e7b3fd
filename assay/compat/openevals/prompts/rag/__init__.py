"""``from openevals.prompts.rag import …`` (see :mod:`assay.compat.openevals.prompts`)."""

from __future__ import annotations

from assay.compat.openevals.prompts.rag.groundedness import RAG_GROUNDEDNESS_PROMPT
from assay.compat.openevals.prompts.rag.helpfulness import RAG_HELPFULNESS_PROMPT
from assay.compat.openevals.prompts.rag.retrieval_relevance import RAG_RETRIEVAL_RELEVANCE_PROMPT

__all__ = [
    "RAG_GROUNDEDNESS_PROMPT",
    "RAG_HELPFULNESS_PROMPT",
    "RAG_RETRIEVAL_RELEVANCE_PROMPT",
]
